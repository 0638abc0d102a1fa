/* kv_server: the glob patterns of KEYS, SCAN MATCH and CONFIG GET, as Redis matches them.
 * SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Not fnmatch(3): a key is bytes and may hold NUL, which a C string cannot; and the dialects differ at
 * the edges. Redis's (util.c, stringmatchlen): '*' any run, '?' any byte, '[abc]' '[a-z]' (a reversed
 * range counts as its forward one) and '[^x]' (only '^' negates; '!' is an ordinary byte), '\' quotes
 * the next byte outside and inside brackets, an unterminated '[' ends the pattern as if closed, and
 * there are no character classes ([:alpha:]), no special '/' or leading '.'. glibc's fnmatch with no
 * flags takes '[!x]', and '[^x]' only while POSIXLY_CORRECT is unset, and knows classes and
 * collating elements.
 *
 * Backtracking goes to the last '*' only, with the subject one byte further each time: a later '*'
 * can absorb whatever an earlier one would have, so that finds a match if there is one, in
 * O(pattern * subject) time and no recursion (Redis bounds its recursion instead). */
#include <stddef.h>

#include "server.h"

static unsigned char fold(unsigned char c, bool nocase)
{
    return nocase && c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* Whether the bracket expression at pat[0] == '[' takes byte c; *used receives its length. */
static bool bracket(const unsigned char *pat, size_t plen, unsigned char c, bool nocase, size_t *used)
{
    size_t i = 1;
    bool negate = i < plen && pat[i] == '^', hit = false;
    i += negate;
    c = fold(c, nocase);
    for (; i < plen && pat[i] != ']'; i++) {
        if (pat[i] == '\\' && i + 1 < plen) {
            i++;
            hit |= fold(pat[i], nocase) == c;
        } else if (i + 2 < plen && pat[i + 1] == '-') { /* "[a-]" too: a to ']', as Redis */
            unsigned char lo = fold(pat[i], nocase), hi = fold(pat[i + 2], nocase);
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            hit |= c >= lo && c <= hi;
            i += 2;
        } else {
            hit |= fold(pat[i], nocase) == c;
        }
    }
    *used = i < plen ? i + 1 : plen; /* past the ']', or the whole rest when there is none */
    return hit != negate;
}

bool glob_match(const char *pattern, size_t plen, const char *subject, size_t slen, bool nocase)
{
    /* The empty key, as redis-server 7.0 matches it: stringmatchlen's loop runs while both pattern
     * and subject are left, so an empty subject matches the empty pattern alone ("**" and "*?" do
     * not), and "*" only because KEYS and SCAN take "*" as no pattern at all. */
    if (slen == 0)
        return plen == 0 || (plen == 1 && pattern[0] == '*');
    const unsigned char *pat = (const unsigned char *)pattern, *s = (const unsigned char *)subject;
    size_t p = 0, i = 0;
    size_t star = SIZE_MAX, star_i = 0; /* after the last '*' seen, and where its run would end */
    for (;;) {
        if (p < plen && pat[p] == '*') {
            while (p < plen && pat[p] == '*')
                p++;
            if (p == plen)
                return true;
            star = p;
            star_i = i;
            continue;
        }
        if (i == slen && p == plen)
            return true;
        bool ok = false;
        size_t used = 1;
        if (i < slen && p < plen) {
            if (pat[p] == '?')
                ok = true;
            else if (pat[p] == '[')
                ok = bracket(pat + p, plen - p, s[i], nocase, &used);
            else if (pat[p] == '\\' && p + 1 < plen) {
                ok = fold(pat[p + 1], nocase) == fold(s[i], nocase);
                used = 2;
            } else
                ok = fold(pat[p], nocase) == fold(s[i], nocase);
        }
        if (ok) {
            p += used;
            i++;
            continue;
        }
        if (star == SIZE_MAX || star_i >= slen)
            return false;
        p = star;
        i = ++star_i;
    }
}
