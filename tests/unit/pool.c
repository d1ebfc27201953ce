/*
 * pool.c — the thread pool under stress (TAP).
 *
 * Many back-to-back runs of random sizes (0, 1, fewer tasks than threads, many more), with a
 * different task function and context on alternate runs, on pools of 2, 3 and 7 threads (more
 * threads than this machine has cores, so workers are preempted and wake late): every task of
 * every run executes exactly once, against the context of its own run, with a thread index in
 * range, and the run has finished every task when ob_pool_run returns.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels/kernels.h"
#include "tap.h"

#define MAXN 300

struct run {
    int id;                        /* which run this context belongs to */
    int threads;
    atomic_int hits[MAXN];
    atomic_int bad;                /* tasks that saw a foreign run or a bad thread index */
};

static void task_a(void *ctx, int i, int t)
{
    struct run *r = ctx;
    if (i < 0 || i >= MAXN || t < 0 || t >= r->threads)
        atomic_fetch_add(&r->bad, 1);
    else
        atomic_fetch_add(&r->hits[i], 1);
}

static void task_b(void *ctx, int i, int t)
{
    struct run *r = ctx;
    /* a little work so that runs overlap with late wake-ups */
    volatile unsigned x = (unsigned)i;
    for (int k = 0; k < (i % 7) * 50; k++)
        x = x * 1664525u + 1013904223u;
    task_a(r, i, t);
}

int main(void)
{
    tap_seed(7);
    const int sizes[] = {2, 3, 7};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        struct ob_pool *pool;
        ok(ob_pool_new(sizes[s], &pool) == 0, "a pool of %d threads", sizes[s]);
        ok(ob_pool_threads(pool) == sizes[s], "it reports %d threads", ob_pool_threads(pool));
        static struct run runs[2];
        int bad_runs = 0, first_bad = -1;
        const int n_runs = 20000;
        for (int it = 0; it < n_runs; it++) {
            struct run *r = &runs[it & 1];
            memset(r, 0, sizeof *r);
            r->id = it;
            r->threads = sizes[s];
            uint64_t u = tap_rand();
            int n = u % 4 == 0 ? (int)(u >> 8) % 4 : (int)(u >> 8) % MAXN;
            ob_pool_run(pool, it & 1 ? task_b : task_a, r, n);
            int wrong = atomic_load(&r->bad);
            for (int i = 0; i < MAXN; i++)
                wrong += atomic_load(&r->hits[i]) != (i < n);
            if (wrong && !bad_runs++)
                first_bad = it;
        }
        ok(bad_runs == 0, "%d threads: %d runs, every task exactly once before the run returns "
           "(%d bad runs, first %d)", sizes[s], n_runs, bad_runs, first_bad);
        ob_pool_free(pool);
    }
    ok(ob_pool_threads(NULL) == 1, "no pool counts as one thread");
    int hits[5] = {0};
    struct run one = {.threads = 1};
    ob_pool_run(NULL, task_a, &one, 5);
    for (int i = 0; i < 5; i++)
        hits[i] = atomic_load(&one.hits[i]);
    ok(hits[0] == 1 && hits[4] == 1 && !atomic_load(&one.bad), "no pool runs the tasks inline");
    return tap_done();
}
