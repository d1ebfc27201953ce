/*
 * decode-rate.h — what the decode benchmarks (gen.c, spec.c) time the same way: step an engine
 * until it is idle and count the tokens generated after every one of w sequences has its first
 * token, per second of the time from then to the end. n[i] points at sequence i's token count,
 * which its on_token callback raises. Returns tokens/s, or -1 if a step failed.
 */
#ifndef OB_BENCH_DECODE_RATE_H
#define OB_BENCH_DECODE_RATE_H

#include "bench.h"
#include "engine.h"

static inline double decode_rate(struct ob_engine *e, int w, const int *const *n)
{
    double barrier = 0;
    int base = 0;
    while (!ob_engine_idle(e)) {
        if (ob_engine_step(e) < 0)
            return -1;
        if (barrier == 0) {
            int all = 1;
            for (int k = 0; k < w; k++)
                all &= *n[k] > 0;
            if (all) {
                barrier = bench_now();
                for (int k = 0; k < w; k++)
                    base += *n[k];
            }
        }
    }
    double t = bench_now() - barrier;
    int total = 0;
    for (int k = 0; k < w; k++)
        total += *n[k];
    return t > 0 ? (total - base) / t : -1;
}

#endif
