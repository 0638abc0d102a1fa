/* kv_server: a Redis-protocol key-value server, sharded per core with shard.
 *
 * Network threads (epoll) parse RESP requests and submit each command to the shard worker owning its
 * key; each worker keeps its keys in a map only it touches, with no lock. redis-cli and
 * redis-benchmark talk to it as to Redis:
 *
 *   GET SET DEL EXISTS INCR DECR INCRBY DECRBY MGET MSET PING ECHO DBSIZE SELECT QUIT SHUTDOWN
 *   SCAN KEYS RANDOMKEY FLUSHDB FLUSHALL MEMORY INFO TIME CLIENT HELLO AUTH CONFIG COMMAND
 *   SHARD.ADD name [weight]   add a worker             SHARD.REMOVE name   remove one gracefully
 *   SHARD.CRASH name          crash one (REROUTE)      SHARD.STATS         per-worker stats, ring checksum
 *   SHARD.OWNER key           the worker holding key   SHARD.PLACE key name  put a key on a worker
 *   SHARD.UNPLACE key         back to the ring
 *
 * Adding, removing or crashing a worker while clients run loses no key and no acknowledged write:
 * the release hook hands moved keys to their new owners (kv/store.h says how, also for crashes).
 * Replies leave in request order per connection, also pipelined and across workers (kv/server.h).
 * SCAN's cursor is a position in the key-hash space: an iteration returns every key that was there
 * all along exactly once, also while workers are added, removed or crashed (kv/scan.c).
 * A client that pipelines without reading holds about 1 MiB of the server's memory, however large
 * the values it asks for; one that hangs up, even with a reset, still has everything it sent run
 * (kv/net.c).
 *
 * Usage: kv_server [--port P (0: any; default 7379)] [--bind ADDR (IPv4, IPv6 or a name; default
 *                  127.0.0.1)] [--workers N]
 *                  [--net-threads N] [--queue N] [--pipeline N] [--max-request BYTES] [--max-args N]
 *                  [--hot-keys N (default 0: off; a clock read a job)] [--balance-ms MS (the
 *                  balancer; default 0: off)]
 *                  [--requirepass PASSWORD (clients must AUTH first, as with Redis's)]
 * (--help lists defaults and ranges; a mistake on the command line exits 2 with a message.)
 * Prints "kv_server: listening on ADDR:PORT" once it accepts connections; stops on SIGINT, SIGTERM
 * or SHUTDOWN, after finishing every command it accepted. */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/server.h"
#include "options.h"

#define SYNOPSIS                                                                                     \
    "usage: kv_server [--port P] [--bind ADDR] [--workers N] [--net-threads N] [--queue N]\n"          \
    "                 [--pipeline N] [--max-request BYTES] [--max-args N] [--requirepass PASSWORD]\n"

/* Prints why, then the synopsis, and exits 2. Not options_refuse: tests/kv/kv_server_test.sh holds
 * this program to its own words ("--port wants a number in [0, 65535]", "usage: kv_server"). */
__attribute__((noreturn, format(printf, 1, 2))) static void refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kv_server: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n" SYNOPSIS "Try 'kv_server --help'.\n");
    exit(2);
}

/* --requirepass: not in struct server_options (server.h), handed to client.c by main. */
static const char *requirepass;

/* The table of options.h (its --help lists defaults and ranges), read by options_parse's rules:
 * --name VALUE or --name=VALUE, -- ends the options, no operands. */
static struct server_options parse_options(int argc, char **argv)
{
    long long port = 7379, workers = 2, net_threads = 0, queue = SHARD_DEFAULT_QUEUE_CAPACITY, pipeline = 1024,
              max_request = 1 << 20, max_args = 1024, hot_keys = 0, balance_ms = 0;
    const char *bind = "127.0.0.1";
    const struct option_spec options[] = {
        { "--port", OPTION_INT, &port, 0, 65535, "port to listen on; 0: any free one, printed" },
        { "--bind", OPTION_STRING, &bind, 0, 0, "address to listen on: IPv4, IPv6 or a host name" },
        { "--workers", OPTION_INT, &workers, 1, SHARD_MAX_WORKERS, "shard workers, each owning its keys" },
        { "--net-threads", OPTION_INT, &net_threads, 0, 64,
          "network threads, each with its own epoll; 0: the workers run the network themselves" },
        { "--queue", OPTION_INT, &queue, 1, SHARD_MAX_QUEUE_CAPACITY, "jobs a worker may hold" },
        { "--pipeline", OPTION_INT, &pipeline, 1, 1 << 20, "requests in flight per connection" },
        { "--max-request", OPTION_INT, &max_request, 64, 512ll << 20, "bytes of one request, at most" },
        { "--max-args", OPTION_INT, &max_args, 3, 1 << 20, "arguments of one request, at most" },
        { "--hot-keys", OPTION_INT, &hot_keys, 0, SHARD_MAX_HOT_KEYS,
          "heaviest keys each worker tracks (SHARD.STATS); a clock read a job" },
        { "--balance-ms", OPTION_INT, &balance_ms, 0, 60000, "the balancer's interval, ms; 0: off" },
        { "--requirepass", OPTION_STRING, &requirepass, 0, 0, "password clients must AUTH with, as Redis's" },
    };
    const struct option_program prog = {
        "kv_server", NULL, "A Redis-protocol key-value server, sharded per core with shard; stops on SIGINT,\n"
        "SIGTERM or SHUTDOWN.", options, sizeof options / sizeof options[0]
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc)
                refuse("unexpected argument '%s'", argv[i + 1]);
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            options_usage(&prog, stdout);
            exit(fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1);
        }
        if (a[0] != '-' || a[1] == '\0')
            refuse("unexpected argument '%s'", a);
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (eq && ((len == 6 && strncmp(a, "--help", 6) == 0) || (len == 2 && strncmp(a, "-h", 2) == 0)))
            refuse("%.*s takes no value ('%s')", (int)len, a, a);
        const struct option_spec *o = NULL;
        for (size_t k = 0; k < prog.count && !o; k++)
            if (strlen(options[k].name) == len && strncmp(options[k].name, a, len) == 0)
                o = &options[k];
        if (!o)
            refuse("unknown option '%.*s'", (int)len, a);
        const char *text = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (o->kind == OPTION_STRING) {
            if (!text || !*text)
                refuse("%s needs a value", o->name);
            *(const char **)o->value = text;
            continue;
        }
        if (!text)
            refuse("%s wants a number in [%lld, %lld]", o->name, o->min, o->max);
        /* strtoll also skips white space: a number starts with its sign or a digit. */
        bool starts = text[0] == '-' || text[0] == '+' || (text[0] >= '0' && text[0] <= '9');
        char *end;
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (!starts || end == text || *end || errno || v < o->min || v > o->max)
            refuse("%s wants a number in [%lld, %lld], not '%s'", o->name, o->min, o->max, text);
        *(long long *)o->value = v;
    }
    if (requirepass && strlen(requirepass) > 255)
        refuse("--requirepass takes at most 255 bytes"); /* what CONFIG GET shows and CONFIG SET takes */
    return (struct server_options){
        .bind = bind, .port = (int)port, .workers = (uint32_t)workers, .net_threads = (uint32_t)net_threads,
        .queue_capacity = (uint32_t)queue, .max_pipeline = (uint32_t)pipeline, .hot_keys = (uint32_t)hot_keys,
        .balance_ms = (uint32_t)balance_ms,
        .limits = { .max_request = (size_t)max_request, .max_args = (size_t)max_args },
    };
}

static void on_worker_start(shard_worker *w, void *user)
{
    store_on_start(w, user);
    net_worker_start(user);
}

static void on_worker_stop(shard_worker *w, void *user)
{
    store_on_stop(w, user);
    net_worker_stop(w, user);
}

int main(int argc, char **argv)
{
    struct server srv = { .opt = parse_options(argc, argv), .listen_fd = -1 };

    /* Every thread inherits the blocked signals; main takes them with sigwait. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A request is allocated by the worker that reads its connection and freed by whichever worker
     * writes its reply; a worker's arena then shrinks its heap (madvise) on a free that leaves more
     * than 128 KiB at its top and grows it back on the next burst: page faults, and a TLB shootdown
     * across the cores each time. Measured with 2 workers: a third of the server's CPU a request in
     * the kernel. Heaps are kept instead (what a burst took stays the process's). For glibc's malloc
     * only (-DSHARD_KV_MIMALLOC=OFF, a sanitizer build): mimalloc, when linked, ignores it. */
    mallopt(M_TRIM_THRESHOLD, 256 << 20);

    struct shard_config cfg = {
        .workers = srv.opt.workers,
        .queue_capacity = srv.opt.queue_capacity,
        .on_worker_start = on_worker_start,
        .on_worker_stop = on_worker_stop,
        .on_worker_idle = srv.opt.net_threads ? NULL : net_on_idle,
        .user = &srv,
        .on_release = store_on_release,
        .hot_keys = srv.opt.hot_keys,
        .balance = { .interval_ms = srv.opt.balance_ms },
    };
    info_init();
    int err = command_init();
    if (!err)
        err = auth_set_password(requirepass);
    if (!err)
        err = store_global_init();
    if (!err && (err = net_init(&srv)) != 0) { /* said why */
        net_free(&srv);
        return 1;
    }
    cfg.ring.seed = KV_RING_SEED; /* public: kv_shard_hash */
    cfg.ring.hash = kv_ring_hash; /* hash tags */
    if (!err)
        err = shard_dispatcher_create(&srv.d, &cfg);
    if (err) {
        fprintf(stderr, "kv_server: cannot start: %s\n", shard_strerror(err));
        net_free(&srv);
        return 1;
    }
    /* Parts go to shard by their kv_shard_hash, timers and placements by their bytes: the two must
     * agree, or a key's jobs would go to two owners; a key with a tag is placed by its tag. */
    if (shard_dispatcher_key_hash(srv.d, "{kv}:probe", 10) != kv_shard_hash("kv", 2) ||
        kv_shard_hash("{kv}:probe", 10) != kv_shard_hash("kv", 2)) {
        fprintf(stderr, "kv_server: shard's key hash is not kv_shard_hash\n");
        abort(); /* a programming error, found at the first start */
    }
    err = admin_start(&srv);
    if (err)
        fprintf(stderr, "kv_server: cannot start the admin thread: %s\n", strerror(-err));
    else
        err = net_start(&srv);
    if (err == 0) {
        if (srv.opt.net_threads)
            printf("kv_server: listening on %s:%d with %u workers, %u network threads\n", srv.opt.bind,
                   srv.port, srv.opt.workers, srv.opt.net_threads);
        else
            printf("kv_server: listening on %s:%d with %u workers, the network on the workers\n",
                   srv.opt.bind, srv.port, srv.opt.workers);
        fflush(stdout);
        int sig;
        sigwait(&stop_signals, &sig);
    }
    /* In order: no new request (network threads), no membership change (admin), every accepted
     * command run (destroy), then the connections and what is left in transit. */
    net_stop(&srv);
    admin_stop(&srv);
    scan_free();
    shard_dispatcher_destroy(srv.d);
    net_free(&srv);
    store_global_free();
    command_free();
    auth_free();
    return err ? 1 : 0;
}
