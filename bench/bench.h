/*
 * bench.h — what several benchmarks share: a monotonic clock and a seeded stream of uniform
 * numbers (splitmix64), so that a benchmark's inputs are the same from run to run.
 */
#ifndef OB_BENCH_H
#define OB_BENCH_H

#include <stdint.h>
#include <time.h>

static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* the next uniform number in [0, 1) of the stream *state (seed it with any value) */
static inline double bench_unit(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

#endif
