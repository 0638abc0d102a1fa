/* kv_server: RESP request parser. SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Written by hand: hiredis has a reply parser for clients, not a request parser for servers, and no
 * Debian library parses RESP requests. It reads headers only; bulk bodies are skipped by their length,
 * so parsing a large value that arrives in pieces costs its headers again, not its bytes. */
#include "resp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The longest header line: a type byte, 19 digits (lengths here are far smaller), CR LF. */
#define HEADER_MAX 24
/* What redis-server 7.0 takes at most, and answers "invalid multibulk length" or "invalid bulk
 * length" beyond (INT_MAX arguments; its proto-max-bulk-len by default), before kv_server's own
 * limits, which are smaller, answer otherwise. */
#define REDIS_MAX_ARGS 2147483647ull
#define REDIS_MAX_BULK (512ull * 1024 * 1024)

enum { NEED_MORE = 0 };

/* Reads "<type><digits>\r\n" at buf[*pos]; 1 on success, 0 for need more, -EPROTO if malformed. The
 * digits are a number as Redis's string2ll reads it: no sign, no leading zero ("0" alone). */
static int read_header(const char *buf, size_t len, size_t *pos, char type, uint64_t *out)
{
    size_t i = *pos;
    if (i >= len)
        return NEED_MORE;
    if (buf[i] != type)
        return -EPROTO;
    uint64_t n = 0;
    size_t digits = 0;
    for (i++; i < len && buf[i] >= '0' && buf[i] <= '9'; i++, digits++) {
        if (digits == 18 || (digits == 1 && n == 0))
            return -EPROTO;
        n = n * 10 + (uint64_t)(buf[i] - '0');
    }
    if ((i < len && (digits == 0 || buf[i] != '\r')) || (i + 1 < len && buf[i + 1] != '\n'))
        return -EPROTO;
    if (i + 2 > len)
        return i - *pos >= HEADER_MAX ? -EPROTO : NEED_MORE;
    *out = n;
    *pos = i + 2;
    return 1;
}

static long fail(const char **why, const char *text, long err)
{
    *why = text;
    return err;
}

static long parse_multibulk(const char *buf, size_t len, const struct resp_limits *lim,
                            struct resp_arg *argv, size_t *argc, char *scratch, const char **why)
{
    size_t pos = 0;
    uint64_t n;
    if (len > 1 && buf[1] == '-') {
        /* A negative count (a null array): an empty request, as Redis takes it. */
        pos = 1;
        int r = read_header(buf, len, &pos, '-', &n);
        if (r < 0 || (r == 1 && n == 0)) /* "-0" is not a number to string2ll */
            return fail(why, "ERR Protocol error: invalid multibulk length", -EPROTO);
        if (pos > lim->max_request) /* a header longer than a request may be, as below */
            return fail(why, "ERR Protocol error: request too large", -E2BIG);
        *argc = 0;
        return r == NEED_MORE ? NEED_MORE : (long)pos;
    }
    int r = read_header(buf, len, &pos, '*', &n);
    if (r < 0)
        return fail(why, "ERR Protocol error: invalid multibulk length", r);
    if (r == NEED_MORE)
        return NEED_MORE;
    if (n > REDIS_MAX_ARGS)
        return fail(why, "ERR Protocol error: invalid multibulk length", -EPROTO);
    if (n > lim->max_args)
        return fail(why, "ERR Protocol error: too many arguments", -E2BIG);
    if (pos > lim->max_request) /* a header longer than a request may be (limits of a few bytes) */
        return fail(why, "ERR Protocol error: request too large", -E2BIG);
    for (size_t i = 0; i < n; i++) {
        uint64_t blen;
        r = read_header(buf, len, &pos, '$', &blen);
        if (r < 0 && buf[pos] != '$') {
            /* Redis's words, the byte included (a line break or NUL as a space, so the reply stays
             * one line): *why must outlive this call, and scratch does. */
            char c = buf[pos] == '\r' || buf[pos] == '\n' || buf[pos] == '\0' ? ' ' : buf[pos];
            snprintf(scratch, RESP_INLINE_MAX, "ERR Protocol error: expected '$', got '%c'", c);
            return fail(why, scratch, r);
        }
        if (r < 0 || (r == 1 && blen > REDIS_MAX_BULK))
            return fail(why, "ERR Protocol error: invalid bulk length", -EPROTO);
        if (r == NEED_MORE)
            return pos > lim->max_request ? fail(why, "ERR Protocol error: request too large", -E2BIG)
                                          : NEED_MORE;
        if (blen > lim->max_request || pos + blen + 2 > lim->max_request)
            return fail(why, "ERR Protocol error: request too large", -E2BIG);
        if (pos + blen + 2 > len)
            return NEED_MORE;
        if (buf[pos + blen] != '\r' || buf[pos + blen + 1] != '\n')
            return fail(why, "ERR Protocol error: bulk string not followed by CRLF", -EPROTO);
        argv[i] = (struct resp_arg){ buf + pos, (size_t)blen };
        pos += blen + 2;
    }
    *argc = (size_t)n;
    return (long)pos;
}

/* As Redis's sdssplitargs: isspace's bytes are skipped before an argument and must follow a closing
 * quote, but an unquoted argument ends only at a space, tab, CR or LF (a CR inside the line ends one
 * there: "ECHO a\rb" is three arguments; it was a part of "a\rb"; "a\vb" stays one). */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' || c == '\n';
}

static bool ends_arg(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The escape at s[0, end) inside double quotes (s[0] is its backslash), written to *out. Return: the
 * bytes it takes: 4 for \xHH, else 2 (\n \r \t \b \a, or the character itself); 1 for a backslash
 * that ends the line, which stands for itself. */
static size_t unescape(const char *s, size_t end, char *out)
{
    if (end >= 4 && s[1] == 'x' && hex_value(s[2]) >= 0 && hex_value(s[3]) >= 0) {
        *out = (char)(hex_value(s[2]) * 16 + hex_value(s[3]));
        return 4;
    }
    if (end < 2) {
        *out = '\\';
        return 1;
    }
    static const char from[] = "nrtba", to[] = "\n\r\t\b\a";
    const char *e = memchr(from, s[1], sizeof from - 1);
    *out = e ? to[e - from] : s[1];
    return 2;
}

/* One argument of an inline line, from buf[*i] (not a space) up to end, unquoted into out: plain bytes
 * and "..." or '...' runs joined, as Redis's sdssplitargs. Return: its length (never more than the
 * bytes it read), or -1 for a quote left open or a closing quote followed by anything but a space. */
static long inline_arg(const char *buf, size_t end, size_t *i, char *out)
{
    size_t n = 0;
    char quote = 0;
    while (*i < end) {
        char c = buf[*i];
        if (!quote && ends_arg(c))
            break;
        if (!quote && (c == '"' || c == '\'')) {
            quote = c;
            (*i)++;
        } else if (c == quote) {
            (*i)++;
            return *i < end && !is_space(buf[*i]) ? -1 : (long)n;
        } else if (quote == '"' && c == '\\') {
            *i += unescape(buf + *i, end - *i, &out[n++]);
        } else if (quote == '\'' && c == '\\' && *i + 1 < end && buf[*i + 1] == '\'') {
            out[n++] = '\'';
            *i += 2;
        } else {
            out[n++] = c;
            (*i)++;
        }
    }
    return quote ? -1 : (long)n;
}

/* One line of arguments separated by spaces, ended by LF (CR LF tolerated), unquoted into scratch. */
static long parse_inline(const char *buf, size_t len, const struct resp_limits *lim,
                         struct resp_arg *argv, size_t *argc, char *scratch, const char **why)
{
    size_t max = lim->max_request < RESP_INLINE_MAX ? lim->max_request : RESP_INLINE_MAX;
    const char *nl = memchr(buf, '\n', len < max ? len : max);
    if (!nl)
        return len >= max ? fail(why, "ERR Protocol error: too big inline request", -E2BIG) : NEED_MORE;
    size_t end = (size_t)(nl - buf);
    if (end > 0 && buf[end - 1] == '\r')
        end--;
    size_t n = 0, used = 0;
    for (size_t i = 0; i < end;) {
        while (i < end && is_space(buf[i]))
            i++;
        if (i == end)
            break;
        if (n == lim->max_args)
            return fail(why, "ERR Protocol error: too many arguments", -E2BIG);
        long alen = inline_arg(buf, end, &i, scratch + used);
        if (alen < 0)
            return fail(why, "ERR Protocol error: unbalanced quotes in request", -EPROTO);
        argv[n++] = (struct resp_arg){ scratch + used, (size_t)alen };
        used += (size_t)alen;
    }
    *argc = n;
    return (long)(nl - buf) + 1;
}

long resp_parse(const char *buf, size_t len, const struct resp_limits *lim, struct resp_arg *argv,
                size_t *argc, char *scratch, const char **why)
{
    *argc = 0;
    if (len == 0)
        return NEED_MORE;
    if (buf[0] == '*')
        return parse_multibulk(buf, len, lim, argv, argc, scratch, why);
    /* Binary junk is not a command: a request starting with a RESP type byte other than '*' is
     * refused and the connection closed (kv_server's own choice: redis-server 7.0 takes "$4" as an
     * inline command and answers "unknown command '$4'"; a review found this comment claiming
     * otherwise). */
    if (buf[0] == '$' || buf[0] == ':' || buf[0] == '+' || buf[0] == '-' || buf[0] == '\0')
        return fail(why, "ERR Protocol error: expected '*' or an inline command", -EPROTO);
    return parse_inline(buf, len, lim, argv, argc, scratch, why);
}
