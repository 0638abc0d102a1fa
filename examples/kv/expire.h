/* kv_server: keys that expire, on shard's keyed timers. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A key with a time to live has an expiry record: when it expires, and the keyed timer armed for that
 * moment. The timer is a timer of the key (shard/timer.h), so it lives in the wheel of the worker that
 * holds the key and follows the key through every handoff and crash: at its deadline it runs as a job
 * of the key on whichever worker then holds it, which deletes the key. So the memory of an expired key
 * comes back without a client touching it. A key read after its time and before its timer ran (a busy
 * worker) is deleted by that read: expiry is also lazy, as in Redis.
 *
 * Who owns the record: the entry and the timer's job both hold it (two holds; the last to let go frees
 * it), so the job needs no pointer to the entry (which may be gone or elsewhere by then): it finds the
 * entry by the key the record carries, and acts only if that entry still points to this record. Ending
 * an expiry (a DEL, a PERSIST, a SET, a new time to live) cancels the timer: if shard says the job
 * will not run, its hold goes with the entry's; else the job drops its own when it runs.
 *
 * Times are ms of Unix time (CLOCK_REALTIME), as EXPIREAT and TTL speak; a timer's delay is taken
 * from the realtime clock when it is armed, and a timer that runs before the key's time (the clock
 * was set back) arms itself again for the rest. */
#ifndef KV_EXPIRE_H
#define KV_EXPIRE_H

#include <shard.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvmap.h"

struct kv_store;

struct kv_expiry {
    atomic_uint holds;    /* the entry's, and its timer job's while one is armed */
    int64_t     at_ms;    /* when the key expires */
    int64_t     armed_ms; /* when its timer runs: at_ms, or earlier when at_ms was put off since (the
                           * timer then arms itself again rather than being cancelled and re-armed:
                           * a key whose time to live is renewed on every use costs no timer work) */
    shard_timer timer;    /* armed for armed_ms; 0: none (arming failed: only a read expires it) */
    uint32_t    klen;
    char        key[];    /* the key, for the timer's job to find its entry */
};

/* The dispatcher whose timers expire keys. Context: each worker's start hook (store_on_start). */
void expire_init(shard_dispatcher *d);

/* Now, in ms of Unix time. */
int64_t kv_now_ms(void);

/* When e expires, in ms of Unix time; 0: never. */
static inline int64_t expire_at(const struct kv_entry *e)
{
    return e->exp ? e->exp->at_ms : 0;
}

/* Whether e's time has come by now_ms. */
static inline bool expire_due(const struct kv_entry *e, int64_t now_ms)
{
    return e->exp && e->exp->at_ms <= now_ms;
}

/* Gives e (held by s's worker) the expiry at_ms, replacing any it had, and arms its timer. at_ms must
 * be in the future (a time already past deletes the key instead: the caller's business). Return: 0;
 * -ENOMEM (e keeps the expiry it had). Context: a job of e's key. */
int expire_set(struct kv_entry *e, int64_t at_ms);

/* Ends e's expiry, if it has one: the key lives on with no time to live (PERSIST, SET), or is about
 * to be freed. Context: a job on the worker holding e (of e's key, or one clearing the store). */
void expire_clear(struct kv_entry *e);

/* The time n units of unit_ms (1000 for seconds) make: from now (relative) or from the epoch. Return:
 * 0 with *at_ms set; -EINVAL (arg not an integer); -ERANGE (the time overflows, as Redis refuses it:
 * "invalid expire time"). */
int expire_deadline(const char *arg, size_t len, int64_t unit_ms, bool relative, int64_t *at_ms);

/* Keys with an expiry now (INFO keyspace). Context: any thread. */
size_t expire_count(void);

#endif
