/*
 * pool.c — a fixed set of worker threads, created once and reused for every parallel loop.
 *
 * ob_pool_run(pool, fn, ctx, n) calls fn(ctx, i, t) for every task i < n, handing tasks out
 * through an atomic counter, t being the index (0 = the caller) of the thread that runs it, for
 * per-thread scratch space; the calling thread works too, and the call returns when all n are
 * done. Which thread runs which task is not fixed, so a task must compute the same bits
 * whoever runs it: every kernel writes a disjoint output range with no shared accumulation.
 *
 * Waking: a decode step makes a few hundred short parallel calls with a little serial work in
 * between, so a worker that has finished first spins (with pause) on the run word for up to
 * SPIN_NS before it sleeps on a condition variable, and the caller spins likewise before it
 * sleeps waiting for the last task. A task is claimed by a compare-and-swap on one 64-bit word
 * (generation << 32 | next task index), so a worker that wakes late (or was preempted on a busy
 * machine) can only claim tasks of the run that is current, and the caller waits for the tasks
 * that were claimed, never for a worker that claimed none. While the caller writes a run's
 * description the index is SETUP, which no one can claim, so a worker still looking at the
 * previous run never claims against the next one's count. A sleeper announces itself
 * (sleepers / waiting) and re-checks under the mutex, and the other side signals only when
 * someone announced, so a wake-up is never lost (sequentially consistent atomics order the
 * announce and the check).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "1b.h"
#include "host/pool.h"

#define SPIN_NS 50000              /* how long a thread spins before it sleeps */
#define SETUP 0xffffffffu          /* task index while the caller sets a run up */

struct ob_pool {
    int n_threads;                 /* including the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    atomic_uint_fast64_t run;      /* generation << 32 | next task index */
    atomic_int completed;          /* tasks of the current run done */
    atomic_int sleepers;           /* workers asleep (or about to be) on go */
    atomic_int waiting;            /* the caller asleep (or about to be) on done */
    atomic_bool quit;
    /* the current run (written before run is published) */
    void (*fn)(void *, int, int);
    void *ctx;
    atomic_int n;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* one turn of a spin-wait (i counts the turns from 0; *t0 starts at 0): pauses, and says
 * whether the wait has lasted SPIN_NS (the clock is read every 256 turns) */
static bool spun_out(int i, uint64_t *t0)
{
    cpu_relax();
    if ((i & 255) != 255)
        return false;
    uint64_t t = now_ns();
    if (!*t0)
        *t0 = t;
    return t - *t0 > SPIN_NS;
}

/* run tasks of generation g until none is left (or another generation is current) */
static void work(struct ob_pool *p, uint64_t g, int t)
{
    uint64_t v = atomic_load_explicit(&p->run, memory_order_acquire);
    for (;;) {
        if (v >> 32 != g)
            return;
        uint32_t i = (uint32_t)v;
        if (i == SETUP) {          /* the caller is still describing run g */
            cpu_relax();
            v = atomic_load_explicit(&p->run, memory_order_acquire);
            continue;
        }
        if (i >= (uint32_t)atomic_load_explicit(&p->n, memory_order_relaxed))
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->run, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        /* task i of run g is ours: the run cannot end (nor fn, ctx change) before it is done */
        p->fn(p->ctx, (int)i, t);
        int n = atomic_load_explicit(&p->n, memory_order_relaxed);
        if (atomic_fetch_add(&p->completed, 1) + 1 == n && t && atomic_load(&p->waiting)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
        v = atomic_load_explicit(&p->run, memory_order_acquire);
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
    for (;;) {
        /* wait for a new generation: spin, then sleep */
        uint64_t g, t0 = 0;
        for (int i = 0;; i++) {
            g = atomic_load_explicit(&p->run, memory_order_acquire) >> 32;
            if (g != seen)
                break;
            if (spun_out(i, &t0)) {
                pthread_mutex_lock(&p->mu);
                atomic_fetch_add(&p->sleepers, 1);
                while ((g = atomic_load(&p->run) >> 32) == seen && !atomic_load(&p->quit))
                    pthread_cond_wait(&p->go, &p->mu);
                atomic_fetch_sub(&p->sleepers, 1);
                pthread_mutex_unlock(&p->mu);
                break;
            }
        }
        if (atomic_load(&p->quit))
            break;
        seen = g;
        work(p, g, wa.t);
    }
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
    atomic_init(&p->run, 0);
    atomic_init(&p->completed, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->waiting, 0);
    atomic_init(&p->quit, false);
    atomic_init(&p->n, 0);
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
    atomic_store(&p->quit, true);
    atomic_fetch_add(&p->run, (uint64_t)1 << 32);
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
    /* close the old generation first (index SETUP claims nothing), so that a worker still
     * looking at the old one can never claim a task against the new n, fn or ctx; then the
     * run's description; then index 0 opens it */
    uint64_t g = (atomic_load(&p->run) >> 32) + 1;
    atomic_store(&p->run, g << 32 | SETUP);
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->n, n, memory_order_relaxed);
    atomic_store_explicit(&p->completed, 0, memory_order_relaxed);
    atomic_store(&p->run, g << 32);
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
    }
    work(p, g, 0);
    /* wait for the tasks the workers claimed: spin, then sleep */
    uint64_t t0 = 0;
    for (int i = 0; atomic_load_explicit(&p->completed, memory_order_acquire) < n; i++) {
        if (spun_out(i, &t0)) {
            pthread_mutex_lock(&p->mu);
            atomic_store(&p->waiting, 1);
            while (atomic_load(&p->completed) < n)
                pthread_cond_wait(&p->done, &p->mu);
            atomic_store(&p->waiting, 0);
            pthread_mutex_unlock(&p->mu);
            break;
        }
    }
}
