/* hello: shard in one page. Every job of a key runs on one worker, one at a time, in order, also
 * while workers are added, removed and crash. Run it: ./hello (exits non-zero if that did not hold). */
#include <shard.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define PLAYERS 100
#define PACKETS 200

static unsigned next_packet[PLAYERS]; /* touched only by the player's current worker */
static atomic_int out_of_order;

struct packet { int player; unsigned seq; };

static void on_packet(shard_worker *w, void *arg)
{
    struct packet *p = arg;
    (void)w;
    if (next_packet[p->player]++ != p->seq) /* no lock: one job of a key at a time */
        atomic_fetch_add(&out_of_order, 1);
}

int main(int argc, char **argv)
{
    /* Only <shard.h> and libc, so that it builds alone against an installed shard: no options. */
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: hello\nKeyed jobs run in order while workers are added, removed and crash.\n");
        return fflush(stdout) == 0 ? 0 : 1; /* a usage that was not written fails */
    }
    if (argc > 1) {
        fprintf(stderr, "hello: unexpected argument '%s'\nusage: hello [--help]\n", argv[1]);
        return 2;
    }
    static struct packet packets[PACKETS][PLAYERS];
    struct shard_config cfg = { .workers = 2 }; /* "w0", "w1" */
    shard_dispatcher *d;
    int err = shard_dispatcher_create(&d, &cfg);
    if (err) {
        fprintf(stderr, "hello: %s\n", shard_strerror(err));
        return 1;
    }
    for (unsigned s = 0; s < PACKETS; s++) {
        for (int p = 0; p < PLAYERS; p++) {
            char key[16];
            int len = snprintf(key, sizeof key, "player-%d", p);
            packets[s][p] = (struct packet){ p, s };
            shard_submit(d, key, (size_t)len, on_packet, &packets[s][p]);
        }
        if (s == 50)
            shard_worker_add(d, "w2", 1); /* takes about a third of the players */
        if (s == 100)
            shard_worker_remove(d, "w0"); /* w0 runs out its queue; its players move */
        if (s == 150)
            shard_worker_crash(d, "w1", SHARD_CRASH_REROUTE); /* its queue moves, in order */
    }
    shard_drain(d); /* every packet submitted so far has run */
    shard_dispatcher_destroy(d);
    unsigned ran = 0;
    for (int p = 0; p < PLAYERS; p++)
        ran += next_packet[p];
    printf("hello: %u of %d packets ran, %d out of order\n", ran, PLAYERS * PACKETS, atomic_load(&out_of_order));
    return ran == PLAYERS * PACKETS && !atomic_load(&out_of_order) ? 0 : 1;
}
