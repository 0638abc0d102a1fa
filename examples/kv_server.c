/* kv_server: a Redis-protocol key-value server, sharded per core with shard.
 *
 * Network threads (epoll) parse RESP requests and submit each command to the shard worker owning its
 * key; each worker keeps its keys in a map only it touches, with no lock. redis-cli and
 * redis-benchmark talk to it as to Redis:
 *
 *   GET SET DEL EXISTS INCR DECR INCRBY DECRBY MGET MSET PING ECHO DBSIZE SELECT QUIT SHUTDOWN
 *   SHARD.ADD name [weight]   add a worker             SHARD.REMOVE name   remove one gracefully
 *   SHARD.CRASH name          crash one (REROUTE)      SHARD.STATS         per-worker stats, ring checksum
 *   SHARD.OWNER key           the worker holding key
 *
 * Adding, removing or crashing a worker while clients run loses no key and no acknowledged write:
 * the release hook hands moved keys to their new owners (kv/store.h says how, also for crashes).
 * Replies leave in request order per connection, also pipelined and across workers (kv/server.h).
 * A client that pipelines without reading holds about 1 MiB of the server's memory, however large
 * the values it asks for; one that hangs up, even with a reset, still has everything it sent run
 * (kv/net.c).
 *
 * Usage: kv_server [--port P (0: any; default 7379)] [--bind ADDR (IPv4, IPv6 or a name; default
 *                  127.0.0.1)] [--workers N]
 *                  [--net-threads N] [--queue N] [--pipeline N] [--max-request BYTES] [--max-args N]
 * Prints "kv_server: listening on ADDR:PORT" once it accepts connections; stops on SIGINT, SIGTERM
 * or SHUTDOWN, after finishing every command it accepted. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/server.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: kv_server [--port P] [--bind ADDR] [--workers N] [--net-threads N] [--queue N]\n"
                "                 [--pipeline N] [--max-request BYTES] [--max-args N]\n");
}

/* Reads a whole number in [min, max] or exits with a message. */
static long long number(const char *opt, const char *text, long long min, long long max)
{
    char *end;
    errno = 0;
    long long v = strtoll(text ? text : "", &end, 10);
    if (!text || errno || *end || end == text || v < min || v > max) {
        fprintf(stderr, "kv_server: %s wants a number in [%lld, %lld]\n", opt, min, max);
        exit(2);
    }
    return v;
}

static struct server_options parse_options(int argc, char **argv)
{
    struct server_options o = {
        .bind = "127.0.0.1", .port = 7379, .workers = 2, .net_threads = 1, .queue_capacity = 0,
        .max_pipeline = 1024, .limits = { .max_request = 1 << 20, .max_args = 1024 },
    };
    for (int i = 1; i < argc; i += 2) { /* --option value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--bind") == 0 && v) {
            o.bind = v;
        } else if (strcmp(a, "--port") == 0) {
            o.port = (int)number(a, v, 0, 65535);
        } else if (strcmp(a, "--workers") == 0) {
            o.workers = (uint32_t)number(a, v, 1, SHARD_MAX_WORKERS);
        } else if (strcmp(a, "--net-threads") == 0) {
            o.net_threads = (uint32_t)number(a, v, 1, 64);
        } else if (strcmp(a, "--queue") == 0) {
            o.queue_capacity = (uint32_t)number(a, v, 1, SHARD_MAX_QUEUE_CAPACITY);
        } else if (strcmp(a, "--pipeline") == 0) {
            o.max_pipeline = (uint32_t)number(a, v, 1, 1 << 20);
        } else if (strcmp(a, "--max-request") == 0) {
            o.limits.max_request = (size_t)number(a, v, 64, 512ll << 20);
        } else if (strcmp(a, "--max-args") == 0) {
            o.limits.max_args = (size_t)number(a, v, 3, 1 << 20);
        } else {
            usage(stderr);
            exit(2);
        }
    }
    return o;
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

    struct shard_config cfg = {
        .workers = srv.opt.workers,
        .queue_capacity = srv.opt.queue_capacity,
        .on_worker_start = store_on_start,
        .on_worker_stop = store_on_stop,
        .on_release = store_on_release,
    };
    int err = store_global_init();
    if (!err)
        err = shard_dispatcher_create(&srv.d, &cfg);
    if (err) {
        fprintf(stderr, "kv_server: cannot start: %s\n", shard_strerror(err));
        return 1;
    }
    err = admin_start(&srv);
    if (err)
        fprintf(stderr, "kv_server: cannot start the admin thread: %s\n", strerror(-err));
    else
        err = net_start(&srv);
    if (err == 0) {
        printf("kv_server: listening on %s:%d with %u workers, %u network threads\n", srv.opt.bind,
               srv.port, srv.opt.workers, srv.opt.net_threads);
        fflush(stdout);
        int sig;
        sigwait(&stop_signals, &sig);
    }
    /* In order: no new request (network threads), no membership change (admin), every accepted
     * command run (destroy), then the connections and what is left in transit. */
    net_stop(&srv);
    admin_stop(&srv);
    shard_dispatcher_destroy(srv.d);
    net_free(&srv);
    store_global_free();
    return err ? 1 : 0;
}
