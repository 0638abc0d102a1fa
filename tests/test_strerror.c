/* shard_strerror names every code the library returns, in words that fit every call returning it,
 * and never returns NULL. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <shard.h>
#include <stdbool.h>
#include <string.h>

#include "return_codes.h" /* generated from the headers' Return: paragraphs (tests/return_codes.py) */

Test(strerror, every_code_has_its_own_text)
{
    const int codes[] = { 0, -EINVAL, -EEXIST, -ENOENT, -ENAMETOOLONG, -ENOMEM, -EAGAIN, -EBUSY, -E2BIG,
                          -ESHUTDOWN, -EDEADLK, -ERANGE };
    size_t n = sizeof codes / sizeof *codes;
    const char *unknown = shard_strerror(-9999);
    for (size_t i = 0; i < n; i++) {
        const char *s = shard_strerror(codes[i]);
        cr_assert_not_null(s);
        cr_assert_neq(strcmp(s, unknown), 0, "code %d has no text of its own", codes[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_neq(strcmp(s, shard_strerror(codes[j])), 0);
    }
    cr_assert_not_null(shard_strerror(5));
}

/* An errno shard never returns, which a program passes on (bench_pins's -ENOSPC: a worker's share of
 * its keys would not fit a queue), is named as the C library names it, not "unknown error". */
Test(strerror, another_errno_gets_the_c_librarys_words)
{
    cr_assert_str_eq(shard_strerror(-ENOSPC), "No space left on device");
    cr_assert_str_eq(shard_strerror(-EPIPE), "Broken pipe");
    cr_assert_str_eq(shard_strerror(-9999), "unknown error");
    cr_assert_str_eq(shard_strerror(INT_MIN), "unknown error");
    cr_assert_str_eq(shard_strerror(ENOSPC), shard_strerror(5), "a positive value is not a code");
}

/* The list is not written here: a code a header's Return: adds is checked without editing a test. */
Test(strerror, every_code_a_header_returns_has_a_word)
{
    size_t n = sizeof return_codes / sizeof *return_codes;
    cr_assert_gt(RETURN_PARAGRAPHS, 30, "the parser found only %d Return: paragraphs", RETURN_PARAGRAPHS);
    cr_assert_gt(n, 80, "the parser found only %zu codes", n);
    const char *unknown = shard_strerror(-9999);
    for (size_t i = 0; i < n; i++) {
        const struct return_code *c = &return_codes[i];
        const char *s = shard_strerror(c->code);
        cr_expect(s && strcmp(s, unknown) != 0, "%s (%s) returns %s, which shard_strerror calls \"%s\"",
                  c->call, c->header, c->name, s ? s : "(null)");
    }
}

/* A contract that says "Return: as shard_x()" returns shard_x's codes: the table must hold them, also
 * when the name is on the comment's next line and shard_x itself returns as another, or a code only
 * such a call inherits would go unchecked. */
static bool table_has(const char *call, int code)
{
    for (size_t i = 0; i < sizeof return_codes / sizeof *return_codes; i++)
        if (return_codes[i].code == code && strcmp(return_codes[i].call, call) == 0)
            return true;
    return false;
}

Test(strerror, the_table_holds_the_codes_a_call_returns_as_another)
{
    cr_expect(table_has("shard_worker_crash", -EBUSY), "shard_worker_crash returns as shard_worker_remove");
    cr_expect(table_has("shard_try_submit", -EAGAIN), "shard_try_submit returns as shard_submit");
    cr_expect(table_has("shard_submit_multi_each", -E2BIG), "shard_submit_multi_each returns as shard_submit_multi");
    cr_expect(table_has("shard_try_submit_multi_each", -E2BIG),
              "shard_try_submit_multi_each returns as shard_submit_multi_each, which returns as shard_submit_multi");
    cr_expect(table_has("shard_try_submit_multi_each", -ESHUTDOWN), "as above");
}

/* Each reason a Return: gives for a code shared by several calls, and a word its text must hold:
 * one call's reason alone ("cannot remove the last worker") misleads the caller of another. */
Test(strerror, the_words_fit_every_call)
{
    static const struct { int code; const char *call, *word; } reasons[] = {
        { -EBUSY, "shard_worker_remove, shard_worker_crash: the last worker", "last worker" },
        { -EBUSY, "shard_timer_cancel: its job is running", "running" },
        { -ENOENT, "shard_ring_remove, shard_ring_pin: no such member", "member" },
        { -ENOENT, "shard_worker_remove, shard_key_place, shard_worker_hot_keys: no such worker", "worker" },
        { -ENOENT, "shard_ring_unpin: not pinned", "pinned" },
        { -ENOENT, "shard_key_unplace: the key is not placed", "placed" },
        { -ENOENT, "shard_timer_cancel: not pending", "pending timer" },
        { -EAGAIN, "shard_try_submit: queue full", "queue full" },
        { -EAGAIN, "shard_try_submit: key throttled", "throttled" },
        { -EAGAIN, "shard_try_submit, shard_try_submit_multi: its worker full of set-aside jobs during a change",
          "set-aside jobs" },
        { -EAGAIN, "shard_timer_rearm: moving with its key, or its job queued", "timer moving" },
        { -EAGAIN, "shard_dispatcher_create, shard_worker_add: no thread could be started", "thread" },
        { -E2BIG, "shard_ring_pin: SHARD_RING_MAX_PINS pins", "pinned" },
        { -E2BIG, "shard_key_place: SHARD_RING_MAX_PINS keys placed", "placed" },
        { -E2BIG, "shard_submit_multi: n over SHARD_MULTI_MAX_KEYS", "SHARD_MULTI_MAX_KEYS" },
        { -ENOMEM, "most calls: no memory", "memory" },
        { -ENOMEM, "shard_dispatcher_create, shard_worker_add with on_worker_idle: no descriptor left",
          "file descriptors" },
        { -ENOMEM, "shard_submit_after, shard_submit_every: 2^26 timers pending", "timer" },
    };
    for (size_t i = 0; i < sizeof reasons / sizeof *reasons; i++) {
        const char *s = shard_strerror(reasons[i].code);
        cr_expect(strstr(s, reasons[i].word) != NULL, "%s; yet shard_strerror(%d) says \"%s\" (no \"%s\")",
                  reasons[i].call, reasons[i].code, s, reasons[i].word);
    }
}
