/* kv_server: the request side of RESP, the Redis protocol. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A request is an array of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", what redis-cli and
 * redis-benchmark send) or an inline line ("GET k\r\n", what a person types into nc), whose arguments
 * may be quoted as Redis's: "..." with the escapes \n \r \t \b \a \\ \" and \xHH, '...' with \', a
 * closing quote followed by a space or the line's end. Pure functions: no allocation, no state
 * between calls; the caller keeps unparsed bytes and calls again with more. */
#ifndef KV_RESP_H
#define KV_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

struct resp_arg {
    const char *p;
    size_t      len;
};

/* Whether argument a is word, in any case (an option's name: COUNT, WITHSCORES...), by its length: an
 * argument with a NUL byte inside is not the word. */
static inline bool resp_arg_is(const struct resp_arg *a, const char *word)
{
    return a->len == strlen(word) && strncasecmp(a->p, word, a->len) == 0;
}

struct resp_limits {
    size_t max_request; /* bytes of one request, headers included */
    size_t max_args;    /* arguments of one request; argv must hold this many */
};

/* The longest inline line, its LF included, as Redis's (or max_request, if smaller): also the room
 * its arguments take, unquoted, in the caller's scratch. */
#define RESP_INLINE_MAX (64 * 1024)

/* Parses the first request of buf[0, len). Return: bytes it takes (> 0), with argv[0, *argc) pointing
 * into buf, or, for an inline request, into scratch (RESP_INLINE_MAX bytes: the arguments unquoted);
 * *argc may be 0 for an empty request, which the caller skips (an empty line; an array of 0, or of a
 * negative count, as Redis ignores); 0 when buf holds only part of a request; -EPROTO for malformed
 * input; -E2BIG when a request goes over a limit. On a negative return *why says what was wrong, as
 * the text of a Redis error reply. Context: any thread. */
long resp_parse(const char *buf, size_t len, const struct resp_limits *lim, struct resp_arg *argv,
                size_t *argc, char *scratch, const char **why);

#endif
