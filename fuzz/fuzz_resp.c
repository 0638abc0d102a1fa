/* Fuzz target: the kv_server example's RESP request parser (examples/kv/resp.c) on arbitrary bytes,
 * as a client sending garbage would. The first input byte picks small limits so that they are hit.
 * Invariants: a request is taken only whole (every shorter prefix asks for more or is refused the
 * same way), arguments lie inside the input, no argument list exceeds max_args, the limits hold, and
 * an error always comes with a Redis error text. */
#include <errno.h>
#include <string.h>

#include "fuzz_common.h"
#include "resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = { data, size };
    uint8_t knobs = byte(&in);
    struct resp_limits lim = { .max_request = 16 + (size_t)(knobs & 0x3f) * 8, .max_args = 1 + (knobs >> 6) * 3 };
    struct resp_arg argv[16];
    static char scratch[RESP_INLINE_MAX];
    const char *buf = (const char *)in.p;
    size_t len = in.n, off = 0;
    while (off < len) {
        size_t argc;
        const char *why = NULL;
        long n = resp_parse(buf + off, len - off, &lim, argv, &argc, scratch, &why);
        if (n == 0)
            break;
        if (n < 0) {
            CHECK(n == -EPROTO || n == -E2BIG);
            CHECK(why && strncmp(why, "ERR ", 4) == 0);
            break;
        }
        CHECK((size_t)n <= len - off);
        CHECK(argc <= lim.max_args);
        if (buf[off] == '*')
            CHECK((size_t)n <= lim.max_request);
        /* An array's arguments lie in the request; an inline line's, unquoted, in scratch, one after
         * another, never more bytes than the line. */
        size_t used = 0;
        for (size_t i = 0; i < argc; i++) {
            if (buf[off] == '*')
                CHECK(argv[i].p >= buf + off && argv[i].p + argv[i].len <= buf + off + n);
            else
                CHECK(argv[i].p == scratch + used && (used += argv[i].len) <= (size_t)n);
        }
        /* A request is taken only when whole: one byte less never yields a request. */
        size_t argc2;
        const char *why2;
        long shorter = resp_parse(buf + off, (size_t)n - 1, &lim, argv, &argc2, scratch, &why2);
        CHECK(shorter <= 0);
        off += (size_t)n;
    }
    return 0;
}
