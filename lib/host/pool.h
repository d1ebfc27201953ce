/*
 * pool.h — the thread pool (pool.c) of the host routes (cpu, ref, hrx-sim, npu-sim) and of
 * re-quantisation: n threads, the caller being one of them, run the tasks of one call and
 * return when all have run. Which thread runs which task is not fixed, so a task must compute
 * whole results of its own (never a share of a sum): that is what keeps the bits independent
 * of the thread count. Internal to lib/.
 */
#ifndef OB_HOST_POOL_H
#define OB_HOST_POOL_H

struct ob_pool;
int ob_pool_new(int n_threads, struct ob_pool **out);   /* n_threads includes the caller */
void ob_pool_free(struct ob_pool *p);
int ob_pool_threads(const struct ob_pool *p);           /* 1 for NULL */
/* fn(ctx, i, t) for i < n on the pool's threads (t: 0 = the caller .. n_threads - 1, for
 * per-thread scratch); returns when all ran */
void ob_pool_run(struct ob_pool *p, void (*fn)(void *ctx, int i, int t), void *ctx, int n);

#endif
