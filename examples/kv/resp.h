/* kv_server: the request side of RESP, the Redis protocol. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * A request is an array of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", what redis-cli and
 * redis-benchmark send) or an inline line ("GET k\r\n", what a person types into nc). Pure functions:
 * no allocation, no state between calls; the caller keeps unparsed bytes and calls again with more. */
#ifndef KV_RESP_H
#define KV_RESP_H

#include <stddef.h>

struct resp_arg {
    const char *p;
    size_t      len;
};

struct resp_limits {
    size_t max_request; /* bytes of one request, headers included */
    size_t max_args;    /* arguments of one request; argv must hold this many */
};

/* Parses the first request of buf[0, len). Return: bytes it takes (> 0), with argv[0, *argc) pointing
 * into buf (*argc may be 0 for an empty request, which the caller skips); 0 when buf holds only part
 * of a request; -EPROTO for malformed input; -E2BIG when a request goes over a limit. On a negative
 * return *why says what was wrong, as the text of a Redis error reply. Context: any thread. */
long resp_parse(const char *buf, size_t len, const struct resp_limits *lim, struct resp_arg *argv,
                size_t *argc, const char **why);

#endif
