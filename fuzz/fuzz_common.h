/* Helpers of the fuzz targets: an invariant check that aborts (what libFuzzer reports), and a reader
 * that turns the input into bytes, 0 once it runs out. */
#ifndef SHARD_FUZZ_COMMON_H
#define SHARD_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                                                  \
    do {                                                                                          \
        if (!(c)) {                                                                               \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);            \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

struct input {
    const uint8_t *p;
    size_t         n;
};

static inline uint8_t byte(struct input *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

#endif
