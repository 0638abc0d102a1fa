/* kv_server: INFO, in Redis's format, for redis-cli (--stat reads it every second, and redis-cli asks
 * for the server's version), client libraries (some send INFO on connect and wait for loading:0) and
 * people. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Sections as Redis names them (server clients memory persistence stats replication cpu keyspace),
 * holding the fields that mean something here, plus a shard section: the ring and one line per worker,
 * what SHARD.STATS shows. Run by the network thread (CMD_LOCAL): everything it reads is a counter or
 * one of shard's stats calls, which any thread may make; nothing waits on a worker. */
#include <malloc.h>
#ifdef KV_MIMALLOC
#include <mimalloc.h>
#endif
#include <pthread.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "net_internal.h"
#include "server.h"
#include "watch.h"

static int64_t started_ms;   /* CLOCK_MONOTONIC; set once by info_init before the network threads */
static int64_t started_unix; /* seconds */
static char    run_id[41];

/* instantaneous_ops_per_sec, measured between INFO calls (redis-cli --stat makes one a second); the
 * peak of used_memory as INFO saw it. Under sample_lock: INFO runs on any network thread. */
static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t         sample_ms;
static uint64_t        sample_commands;
static uint64_t        ops_per_sec;
static size_t          memory_peak;

static int64_t clock_ms(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void info_init(void)
{
    started_ms = clock_ms(CLOCK_MONOTONIC);
    started_unix = time(NULL);
    unsigned char raw[20] = { 0 };
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (unsigned char)((uint64_t)started_ms * 2654435761u >> (i % 8 * 8)) ^ (unsigned char)getpid();
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(run_id + 2 * i, 3, "%02x", raw[i]);
}

/* Redis's used_memory_human form: 1.50M. */
static void human(char *out, size_t n, double bytes)
{
    static const char units[] = "BKMGTP";
    int u = 0;
    while (bytes >= 1024 && u < 5) {
        bytes /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, n, "%.0fB", bytes);
    else
        snprintf(out, n, "%.2f%c", bytes, units[u]);
}

__attribute__((format(printf, 2, 3))) static void line(struct buf *b, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (k > 0)
        buf_put(b, text, (size_t)k < sizeof text ? (size_t)k : sizeof text - 1);
    buf_put(b, "\r\n", 2);
}

static void section_server(struct server *srv, struct buf *b)
{
    struct utsname u = { .sysname = "?" };
    uname(&u);
    char exe[256];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    int64_t up = (clock_ms(CLOCK_MONOTONIC) - started_ms) / 1000;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    line(b, "# Server");
    line(b, "redis_version:%s", KV_REDIS_VERSION); /* the Redis whose commands it answers as */
    line(b, "kv_server_version:%s", shard_version_string());
    line(b, "redis_git_sha1:00000000");
    line(b, "redis_git_dirty:0");
    line(b, "redis_mode:standalone");
    line(b, "os:%s %s %s", u.sysname, u.release, u.machine);
    line(b, "arch_bits:%zu", sizeof(void *) * 8);
    line(b, "multiplexing_api:epoll");
    line(b, "atomicvar_api:c11-builtin");
#ifdef __GNUC__
    line(b, "gcc_version:%d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
    line(b, "process_id:%ld", (long)getpid());
    line(b, "process_supervised:no");
    line(b, "run_id:%s", run_id);
    line(b, "tcp_port:%d", srv->port);
    line(b, "server_time_usec:%lld", (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000);
    line(b, "uptime_in_seconds:%lld", (long long)up);
    line(b, "uptime_in_days:%lld", (long long)(up / 86400));
    line(b, "executable:%s", exe);
    line(b, "config_file:");
    line(b, "io_threads_active:0");
    line(b, "net_threads:%u", srv->opt.net_threads);
}

static void section_clients(struct server *srv, struct buf *b)
{
    struct net_totals t;
    net_totals(srv, &t);
    line(b, "# Clients");
    line(b, "connected_clients:%" PRIu64, t.clients);
    line(b, "cluster_connections:0");
    line(b, "maxclients:%llu", (unsigned long long)srv->max_clients);
    line(b, "blocked_clients:0");
    line(b, "tracking_clients:0");
    line(b, "clients_in_timeout_table:0");
    /* As Redis 7.4 names it; a key watched twice counts twice (watch.h). */
    line(b, "total_watched_keys:%u", atomic_load_explicit(&watch_counts.active, memory_order_relaxed));
}

/* Resident set size in bytes, from /proc/self/statm; 0 when unreadable. */
static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static void section_memory(struct buf *b)
{
    /* glibc's own count of the bytes handed out: in its arenas, and mapped one block at a time. It
     * walks every arena under its lock: fine for INFO, not for a hot path. mimalloc, or a sanitizer's
     * allocator, leaves it at 0: used_memory is then the RSS, which does not fall when keys go (the
     * allocator keeps the pages for reuse). mimalloc counts the bytes it hands out only when built
     * for statistics, which Debian's is not; its committed bytes (mi_process_info) are further still
     * from them: 35 MB for an empty server, and they did not fall after a FLUSHALL either. */
    struct mallinfo2 mi = mallinfo2();
    size_t rss = rss_bytes();
    size_t used = mi.uordblks + mi.hblkhd ? mi.uordblks + mi.hblkhd : rss;
    pthread_mutex_lock(&sample_lock);
    if (used > memory_peak)
        memory_peak = used;
    size_t peak = memory_peak;
    pthread_mutex_unlock(&sample_lock);
    char h_used[32], h_rss[32], h_peak[32];
    human(h_used, sizeof h_used, (double)used);
    human(h_rss, sizeof h_rss, (double)rss);
    human(h_peak, sizeof h_peak, (double)peak);
    line(b, "# Memory");
    line(b, "used_memory:%zu", used);
    line(b, "used_memory_human:%s", h_used);
    line(b, "used_memory_rss:%zu", rss);
    line(b, "used_memory_rss_human:%s", h_rss);
    line(b, "used_memory_peak:%zu", peak); /* the highest INFO has seen, not a running peak */
    line(b, "used_memory_peak_human:%s", h_peak);
    line(b, "maxmemory:0");
    line(b, "maxmemory_human:0B");
    line(b, "maxmemory_policy:noeviction");
    line(b, "mem_fragmentation_ratio:%.2f", used ? (double)rss / (double)used : 0.0);
#ifdef KV_MIMALLOC
    int v = mi_version(); /* major, minor, patch as decimal digits: 209 is 2.0.9 */
    line(b, "mem_allocator:mimalloc-%d.%d.%d", v / 100, v / 10 % 10, v % 10);
#else
    line(b, "mem_allocator:libc");
#endif
}

static void section_persistence(struct buf *b)
{
    line(b, "# Persistence"); /* nothing is persisted: the fields say so, for --stat and ready checks */
    line(b, "loading:0");
    line(b, "async_loading:0");
    line(b, "rdb_changes_since_last_save:0");
    line(b, "rdb_bgsave_in_progress:0");
    line(b, "rdb_last_save_time:%lld", (long long)started_unix);
    line(b, "aof_enabled:0");
    line(b, "aof_rewrite_in_progress:0");
    line(b, "aof_rewrite_scheduled:0");
}

static void section_stats(struct server *srv, struct buf *b)
{
    struct net_totals t;
    net_totals(srv, &t);
    uint64_t commands = t.commands;
    int64_t now = clock_ms(CLOCK_MONOTONIC);
    pthread_mutex_lock(&sample_lock);
    /* The rate since the previous sample, taken when it is at least 100 ms old (Redis samples every
     * 100 ms and averages 16 samples: this needs no timer, and --stat's one INFO a second reads the
     * last second's rate). */
    if (sample_ms == 0)
        sample_ms = started_ms;
    if (now - sample_ms >= 100) {
        ops_per_sec = commands >= sample_commands ? (commands - sample_commands) * 1000 / (uint64_t)(now - sample_ms) : 0;
        sample_ms = now;
        sample_commands = commands;
    }
    uint64_t ops = ops_per_sec;
    pthread_mutex_unlock(&sample_lock);
    line(b, "# Stats");
    line(b, "total_connections_received:%llu", atomic_load_explicit(&srv->connections, memory_order_relaxed));
    line(b, "total_commands_processed:%" PRIu64, commands);
    line(b, "instantaneous_ops_per_sec:%" PRIu64, ops);
    line(b, "total_net_input_bytes:%" PRIu64, t.bytes_in);
    line(b, "total_net_output_bytes:%" PRIu64, t.bytes_out);
    line(b, "rejected_connections:%llu", atomic_load_explicit(&srv->refused, memory_order_relaxed));
    line(b, "evicted_keys:0");
    line(b, "total_protocol_errors:%llu", atomic_load_explicit(&srv->protocol_errors, memory_order_relaxed));
}

static void section_replication(struct buf *b)
{
    line(b, "# Replication");
    line(b, "role:master");
    line(b, "connected_slaves:0");
    line(b, "master_failover_state:no-failover");
    line(b, "master_replid:%s", run_id);
    line(b, "master_repl_offset:0");
    line(b, "repl_backlog_active:0");
}

static void section_cpu(struct buf *b)
{
    struct rusage self;
    getrusage(RUSAGE_SELF, &self);
    line(b, "# CPU");
    line(b, "used_cpu_sys:%ld.%06ld", (long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec);
    line(b, "used_cpu_user:%ld.%06ld", (long)self.ru_utime.tv_sec, (long)self.ru_utime.tv_usec);
}

static void section_keyspace(struct buf *b)
{
    size_t keys = store_total_keys();
    line(b, "# Keyspace");
    if (keys) /* Redis lists only databases that hold keys */
        line(b, "db0:keys=%zu,expires=%zu,avg_ttl=0", keys, store_total_expires());
}

static const char *state_name(enum shard_worker_state s)
{
    static const char *const names[] = { "running", "retiring", "crashed", "exited" };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

static void section_shard(struct server *srv, struct buf *b)
{
    struct shard_stats st;
    line(b, "# Shard");
    if (shard_dispatcher_stats(srv->d, &st) != 0)
        return;
    line(b, "epoch:%" PRIu64, st.epoch);
    line(b, "ring_checksum:%016" PRIx64, st.ring_checksum);
    line(b, "workers:%zu", st.workers);
    line(b, "changes:%" PRIu64, st.changes);
    line(b, "placements:%zu", st.placements);
    line(b, "keys_in_transit:%zu", store_transit_keys());
    line(b, "balance_ratio:%.2f", st.balance_ratio);
    line(b, "balance_moves:%" PRIu64, st.balance_moves);
    line(b, "timers:%" PRIu64, st.timers);
    uint64_t drained, reread;
    scan_counters(&drained, &reread);
    line(b, "scan_drains:%" PRIu64, drained);   /* keyspace commands that waited for a change's fences */
    line(b, "scan_rereads:%" PRIu64, reread);   /* slices read again: the ring changed during them */
    long n = shard_dispatcher_worker_stats(srv->d, NULL, 0);
    struct shard_worker_stats *ws = n > 0 ? calloc((size_t)n, sizeof *ws) : NULL;
    if (!ws)
        return;
    long got = shard_dispatcher_worker_stats(srv->d, ws, (size_t)n);
    for (long i = 0; i < got && i < n; i++)
        line(b, "worker_%s:state=%s,keys=%zu,share=%.4f,queued=%" PRIu64 ",executed=%" PRIu64 ",busy_ms=%" PRIu64
                ",set_aside=%" PRIu64 ",handed_over=%" PRIu64,
             ws[i].name, state_name(ws[i].state), store_worker_keys(ws[i].name), ws[i].share, ws[i].queued,
             ws[i].executed, ws[i].busy_ns / 1000000, ws[i].set_aside, ws[i].handed_over);
    free(ws);
}

enum { S_SERVER, S_CLIENTS, S_MEMORY, S_PERSISTENCE, S_STATS, S_REPLICATION, S_CPU, S_KEYSPACE, S_SHARD, S_COUNT };

static const char *const section_names[S_COUNT] = { "server", "clients", "memory", "persistence", "stats",
                                                   "replication", "cpu", "keyspace", "shard" };

/* INFO [section ...]: none, "default", "all" or "everything" give every section (there is no
 * section here that Redis leaves out of its default); an unknown name gives nothing. */
void info_run(struct server *srv, struct request *r)
{
    bool want[S_COUNT] = { false };
    for (uint32_t i = 1; i < r->argc; i++) {
        const struct resp_arg *a = &r->argv[i];
        bool every = (a->len == 3 && strncasecmp(a->p, "all", 3) == 0) ||
                     (a->len == 7 && strncasecmp(a->p, "default", 7) == 0) ||
                     (a->len == 10 && strncasecmp(a->p, "everything", 10) == 0);
        for (int s = 0; s < S_COUNT; s++)
            want[s] |= every || (a->len == strlen(section_names[s]) && strncasecmp(a->p, section_names[s], a->len) == 0);
    }
    struct buf text = { 0 };
    int shown = 0;
    for (int s = 0; s < S_COUNT; s++) {
        if (r->argc > 1 && !want[s])
            continue;
        if (shown++)
            buf_put(&text, "\r\n", 2);
        switch (s) {
        case S_SERVER: section_server(srv, &text); break;
        case S_CLIENTS: section_clients(srv, &text); break;
        case S_MEMORY: section_memory(&text); break;
        case S_PERSISTENCE: section_persistence(&text); break;
        case S_STATS: section_stats(srv, &text); break;
        case S_REPLICATION: section_replication(&text); break;
        case S_CPU: section_cpu(&text); break;
        case S_KEYSPACE: section_keyspace(&text); break;
        default: section_shard(srv, &text); break;
        }
    }
    resp_bulk(&r->reply, text.p ? text.p : "", text.len);
    r->reply.failed |= text.failed;
    buf_free(&text);
}
