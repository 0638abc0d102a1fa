/* Internal: the balancer's state and its parts (balance.c: its thread; balance_measure.c: what each
 * member did; balance_plan.c: a round's decisions and their one ring edit). The policy: balance.c's
 * head. SPDX-License-Identifier: LGPL-2.1-or-later */
#ifndef SHARD_SRC_BALANCE_INTERNAL_H
#define SHARD_SRC_BALANCE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatcher_internal.h"

#define MAX_MEMBERS 128 /* workers it looks at: the first this many ring members by name */
#define OWN_MAX     1024 /* keys it keeps placed; beyond, the oldest go back to the ring (balance_plan.c) */
#define ISOLATION_FACTOR     8       /* the other members' weights during an isolation, times theirs */
#define ISOLATION_MAX_POINTS (1u << 22) /* no isolation that would make the ring larger than this */
#define ISOLATION_CALM       20      /* rounds without an unsplittable key before weights return */
#define STEADY_MIN           2       /* hot-key windows in a row, at least, before a key is acted on */

/* A hot key of a member over the hot-key windows it read, loads in units of the round's mean. */
struct track {
    uint64_t hash;
    uint32_t listed; /* windows in a row in which it was among the member's hot keys */
    uint32_t heavy;  /* windows in a row in which its load was over the mean */
    float    last;   /* its load in the last of them */
    float    low;    /* the smaller of its loads in the last two (the last alone when listed once) */
};

/* A member as the balancer remembers it from round to round. */
struct seen {
    char         name[SHARD_NAME_MAX + 1];
    uint64_t     counter; /* busy_ns or executed, as last read */
    uint32_t     over;    /* intervals in a row its load was over threshold times the target */
    uint64_t     window;  /* the number of the hot-key window it read last (0: none) */
    uint32_t     ntrack;
    struct track track[SHARD_MAX_HOT_KEYS]; /* the hot keys of that window; only ntrack are copied */
};

struct member {
    struct seen *s;   /* its record, in the balancer's seen */
    double       load; /* over the last interval */
    struct shard_hot_key hot[SHARD_MAX_HOT_KEYS];
    double       hot_load[SHARD_MAX_HOT_KEYS]; /* each hot key's share of the worker's last window,
                                                * times the worker's load over the interval */
    double       steady[SHARD_MAX_HOT_KEYS];   /* its load as a move sees it (track.low times the
                                                * mean); 0 for a key not yet steady */
    uint32_t     heavy[SHARD_MAX_HOT_KEYS];    /* track.heavy */
    long         nhot;
    bool         source; /* over the threshold `rounds` intervals in a row: keys may leave it */
};

struct saved_weight {
    char     name[SHARD_NAME_MAX + 1];
    uint32_t weight;
};

/* A round's decisions, applied as one ring edit: one change, one handoff, however many moves. */
struct plan {
    uint32_t    nmoves, nunpins;
    uint64_t    hash[SHARD_MAX_HOT_KEYS];
    const char *to[SHARD_MAX_HOT_KEYS];
    uint64_t    unpin[SHARD_MAX_HOT_KEYS]; /* its oldest own placements, past OWN_MAX, neither isolated
                                             * nor moved by this plan (balance_plan.c's plan_own_bound) */
    /* Isolation: pin isolated_hash on isolate, multiply every other member's weight by
     * ISOLATION_FACTOR; or, restore, set the weights saved when it began. */
    const char *isolate;
    uint64_t    isolated_hash;
    /* A round's plan: its balancer, whose records say what each key it moves or unplaces was when the
     * round copied the ring (its own placement, or none), and the worker isolated_hash was pinned on
     * then (the XXH3 of its name; 0: none). The edit is refused (-EAGAIN) if any of them is no longer
     * so in the ring in force: the user placed or unplaced it since (balance_plan.c's as_planned).
     * NULL in an isolation's end. */
    const struct balancer *b;
    uint64_t    isolated_pin;
    /* Read by the edit, under ctl, where user placements are counted (d->user_places): beginning an
     * isolation, whether no one had placed isolated_hash and the count then; ending one, whether its
     * pin of end_hash on end_worker is still there with no user placement since places_seen, then
     * adopted (*adopt, with end_room) or sent back to the ring. */
    const _Atomic uint64_t *places;
    bool       *isolated_unplaced;
    uint64_t   *isolated_places;
    uint64_t    end_hash, places_seen;
    const char *end_worker;        /* NULL: no isolation ends */
    bool        end_room;
    bool       *adopt;
    const struct saved_weight *restore;
    size_t      nrestore;
};

/* Fields: I set at start; "lock" under lock; every other field the balancer thread's alone. */
struct balancer {
    shard_dispatcher           *d;
    struct shard_balance_config cfg;
    pthread_t                   thread;
    pthread_mutex_t             lock;
    pthread_cond_t              cond;
    bool                        stop;  /* lock */
    /* The keys it placed, oldest first: only these it moves again or unplaces; a user's placement
     * (shard_key_place) is left alone. */
    uint64_t                    own[OWN_MAX + SHARD_MAX_HOT_KEYS];
    uint64_t                    own_to[OWN_MAX + SHARD_MAX_HOT_KEYS]; /* XXH3 of the worker it chose */
    uint32_t                    nown;
    /* An isolation in force: the worker, its key, and every member's weight before it. */
    char                        isolated[SHARD_NAME_MAX + 1]; /* "" when none */
    uint64_t                    isolated_hash;
    bool                        isolated_unplaced; /* its pin is its own once the isolation ends */
    uint64_t                    isolated_places;   /* d->user_places before it began */
    struct saved_weight         saved[MAX_MEMBERS];
    size_t                      nsaved;
    uint32_t                    calm; /* rounds since it last saw an unsplittable key */
    /* The members of the last round, in one of two buffers: each round copies every member's record
     * from the one into the other (by name: the members may have changed), then swaps them. */
    struct seen                *seen, *spare;
    size_t                      nseen;
    uint32_t                    steady; /* I: STEADY, max(cfg.rounds, STEADY_MIN) */
    /* The balancer thread's scratch, with buf: about 1 MiB, only while it is on, of which a round
     * touches a few KiB a member. */
    struct seen                 buf[2][MAX_MEMBERS];
    struct shard_worker_stats   st[MAX_MEMBERS];
    struct member               m[MAX_MEMBERS];
};

/* balance_measure.c. The running members' loads over the interval into m (of the first MAX_MEMBERS
 * workers by name), each with the balancer's record of it carried over. Return: how many; -1 when one
 * is new (no baseline yet: the round is skipped, as with fewer than 2). */
long shard__balance_measure(struct balancer *b, struct member *m);
/* m's hot keys of its last window, their loads (in units of mean) tracked over windows (Noise). */
void shard__balance_read_hot(struct balancer *b, struct member *m, double mean);
/* balance_plan.c. One round: measure, judge, plan, apply as one ring edit, report. Context: the
 * balancer's thread. */
void shard__balance_round(struct balancer *b);

#endif
