/*
 * pool.c — a fixed set of worker threads, created once and reused for every parallel loop.
 *
 * ob_pool_run(pool, fn, ctx, n) calls fn(ctx, i, t) for every task i < n, handing tasks out
 * through an atomic counter, t being the index (0 = the caller) of the thread that runs it, for
 * per-thread scratch space; the calling thread works too, and the call returns when all n are
 * done. Which thread runs which task is not fixed, so a task must compute the same bits
 * whoever runs it: every kernel writes a disjoint output range with no shared accumulation.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "1b.h"
#include "kernels/kernels.h"

struct ob_pool {
    int n_threads;                 /* including the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t generation;           /* bumped for every run */
    int busy;                      /* workers still in the current run */
    bool quit;
    /* the current run */
    void (*fn)(void *, int, int);
    void *ctx;
    int n;
    atomic_int next;
};

static void work(struct ob_pool *p, int t)
{
    for (;;) {
        int i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (i >= p->n)
            return;
        p->fn(p->ctx, i, t);
    }
}

struct worker_arg {
    struct ob_pool *p;
    int t;
};

static void *worker(void *arg)
{
    struct worker_arg wa = *(struct worker_arg *)arg;
    free(arg);
    struct ob_pool *p = wa.p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->generation == seen && !p->quit)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        work(p, wa.t);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int ob_pool_new(int n_threads, struct ob_pool **out)
{
    if (n_threads < 1 || n_threads > 1024)
        return ob_seterr(OB_EUSAGE, "thread count %d out of range [1, 1024]", n_threads);
    struct ob_pool *p = calloc(1, sizeof *p);
    if (!p)
        return ob_seterr(OB_ENOMEM, "out of memory");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->th = calloc((size_t)n_threads, sizeof *p->th);
    if (!p->th) {
        free(p);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa)
            *wa = (struct worker_arg){p, i};
        if (!wa || pthread_create(&p->th[i], NULL, worker, wa) != 0) {
            free(wa);
            p->n_threads = i;
            ob_pool_free(p);
            return ob_seterr(OB_ENOMEM, "cannot start thread %d", i);
        }
    }
    *out = p;
    return 0;
}

void ob_pool_free(struct ob_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->th);
    free(p);
}

int ob_pool_threads(const struct ob_pool *p)
{
    return p ? p->n_threads : 1;
}

void ob_pool_run(struct ob_pool *p, void (*fn)(void *ctx, int i, int t), void *ctx, int n)
{
    if (!p || p->n_threads == 1 || n <= 1) {
        for (int i = 0; i < n; i++)
            fn(ctx, i, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    p->busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    work(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
