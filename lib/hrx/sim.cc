/*
 * sim.cc — hrx-sim: the SIMT executor that runs the hrx kernel sources on host threads
 * (sim.h says what it does for a kernel), and the runtime table of the hrx-sim route (device
 * memory is host memory).
 *
 * Blocks of a launch are tasks of the queue's thread pool (lib/host/pool.c); each host thread
 * has an executor (struct exec) with a fiber record per GPU thread, 32 warp records and a
 * region of fiber stacks. Within a block the scheduler visits the fibers in thread order (or
 * the order OB_HRX_SIM_ORDER names: run_block), pass after pass: a new fiber is started, a
 * waiting one is resumed when what it waits for is complete (its barrier reached by all n
 * threads, its shuffle by all 32 lanes). Counters only grow, so the test is arithmetic: the
 * b-th barrier is complete when the block's arrivals reach n * b; the k-th shuffle of a warp
 * uses slot k % 2 and is complete when arrivals at that parity reach 32 * (k / 2 + 1) — a lane
 * can be at most one shuffle ahead of another, so two slots suffice. A pass in which nothing
 * could run while fibers are left is a kernel bug. A fiber that stops to wait hands over to the
 * next one of the pass itself (next_ready), without a return to the scheduler in between: the
 * same fibers in the same order, one switch a resumption instead of two (a warp shuffle is 32
 * resumptions). The scheduler takes over at the end of a pass, when a fiber returns, and on a
 * kernel bug.
 *
 * The switch: x86-64 assembly saving what the ABI says a callee keeps (rbx, rbp, r12-r15,
 * the stack pointer, MXCSR and the x87 control word) — no system call, a few nanoseconds;
 * elsewhere ucontext (glibc's makes a sigprocmask system call per switch). A finished fiber's
 * stack is reused by the next one, so a kernel without barriers runs on one stack. Stacks have
 * a guard page below them.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "hrx/sim.h"
extern "C" {
#include "host/pool.h"
}

#if defined(__SANITIZE_ADDRESS__)
#define OB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OB_ASAN 1
#endif
#endif
#ifdef OB_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define STACK_BYTES (512u << 10)   /* ASan's redzones make frames larger */
#else
#define STACK_BYTES (64u << 10)
#endif
#define MAX_THREADS 1024           /* threads of a block, as on every GPU */
#define MAX_WARPS (MAX_THREADS / OB_WARP)

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

__thread const ob_sim_thread *ob_sim_self;
__thread uint64_t ob_sim_block_serial;

enum { F_NEW, F_RUN, F_BAR, F_SHFL, F_DONE, F_FAILED };

struct fiber {
    ob_sim_thread t;               /* what the kernel reads through threadIdx & co. */
#if defined(__x86_64__)
    void *sp;                      /* its stack pointer while switched out */
#else
    ucontext_t uc;
#endif
    char *stack;                   /* lowest usable byte of its stack; NULL: none yet */
    unsigned nbar, nshfl;          /* barriers and shuffles entered so far */
    struct {
        void *dst;
        const void *src;
        int n;
    } cp[OB_SIM_CP_MAX];           /* ob_sim_cp_async's copies, until ob_sim_cp_wait */
    int ncp;
    int state, warp, lane;
#ifdef OB_ASAN
    void *fake;
#endif
};

struct warp_state {
    uint32_t slot[2][OB_WARP];
    uint32_t words[2][OB_WARP][OB_SIM_OFFER_MAX];   /* ob_sim_warp_offer's */
    unsigned arrived[2];
    int size;
};

/* the executor of one host thread */
struct exec {
    fiber f[MAX_THREADS];
    warp_state w[MAX_WARPS];
    char *region;                  /* MAX_THREADS stacks with guard pages, carved on demand */
    int carved;
    char *free_stack[MAX_THREADS];
    int n_free;
#if defined(__x86_64__)
    void *sched_sp;
    uint32_t fpenv[2];             /* MXCSR, x87 control word: what a new fiber starts with */
#else
    ucontext_t sched_uc;
#endif
#ifdef OB_ASAN
    void *fake;
    const void *sched_lo;
    size_t sched_size;
    bool from_sched;               /* the fiber being entered comes from the scheduler */
#endif
    fiber *cur;
    int n, live;                   /* threads of the block, of which not returned */
    int pass_j, pass_i, step;      /* the pass: fibers visited, the next one, the stride */
    bool progress;                 /* the pass has run a fiber */
    unsigned bar_arrived;
    ob_sim_body body;
    const void *arg;
    bool failed;
    char msg[400];
};

static __thread exec *t_exec;

/* ---- the switch ------------------------------------------------------------------------------ */

#if defined(__x86_64__)
extern "C" void ob_hrx_sim_swap(void **save_sp, void *load_sp);
asm(".text\n"
    ".p2align 4\n"
    ".globl ob_hrx_sim_swap\n"
    ".hidden ob_hrx_sim_swap\n"
    ".type ob_hrx_sim_swap, @function\n"
    "ob_hrx_sim_swap:\n"
    "    endbr64\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size ob_hrx_sim_swap, .-ob_hrx_sim_swap\n");
#endif

static void fiber_entry();
static void fail_here(exec *x, fiber *f, const char *what);

/* the scheduler (f NULL) or fiber f -> fiber g; returns when the one that switched is resumed */
static void run_fiber(exec *x, fiber *f, fiber *g)
{
    x->cur = g;
    ob_sim_self = &g->t;
#ifdef OB_ASAN
    x->from_sched = !f;
    __sanitizer_start_switch_fiber(f ? &f->fake : &x->fake, g->stack, STACK_BYTES);
#endif
#if defined(__x86_64__)
    ob_hrx_sim_swap(f ? &f->sp : &x->sched_sp, g->sp);
#else
    swapcontext(f ? &f->uc : &x->sched_uc, &g->uc);
#endif
#ifdef OB_ASAN
    __sanitizer_finish_switch_fiber(f ? f->fake : x->fake, NULL, NULL);
#endif
}

/* fiber f -> scheduler; returns when the scheduler resumes f (never when f has ended) */
static void leave(exec *x, fiber *f)
{
#ifdef OB_ASAN
    __sanitizer_start_switch_fiber(f->state == F_DONE ? NULL : &f->fake, x->sched_lo,
                                   x->sched_size);
#endif
#if defined(__x86_64__)
    ob_hrx_sim_swap(&f->sp, x->sched_sp);
#else
    swapcontext(&f->uc, &x->sched_uc);
#endif
#ifdef OB_ASAN
    __sanitizer_finish_switch_fiber(f->fake, NULL, NULL);
#endif
}

static fiber *next_ready(exec *x);

/* fiber f waits (its state says for what): the next fiber of the pass runs, or the scheduler
 * at the pass's end; returns when f is resumed */
static void wait_turn(exec *x, fiber *f)
{
    fiber *g = next_ready(x);
    if (g)
        run_fiber(x, f, g);
    else
        leave(x, f);
}

static void fiber_entry()
{
    exec *x = t_exec;
    fiber *f = x->cur;
#ifdef OB_ASAN
    if (x->from_sched)
        __sanitizer_finish_switch_fiber(NULL, &x->sched_lo, &x->sched_size);
    else
        __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    f->state = F_RUN;
    x->body(x->arg);
    if (f->ncp) {
        char m[160];
        snprintf(m, sizeof m, "thread %d returned with %d asynchronous copies not waited for "
                 "(ob_cp4 without ob_cp_wait)", (int)(f - x->f), f->ncp);
        fail_here(x, f, m);
    }
    f->state = F_DONE;
    x->live--;
    x->free_stack[x->n_free++] = f->stack;   /* reused once this fiber has switched away */
    f->stack = NULL;
    leave(x, f);
    abort();                                 /* a finished fiber is never resumed */
}

/* ---- stacks ------------------------------------------------------------------------------------ */

static size_t page_size() { return (size_t)sysconf(_SC_PAGESIZE); }

static char *get_stack(exec *x)
{
    if (x->n_free)
        return x->free_stack[--x->n_free];
    size_t per = STACK_BYTES + page_size();
    if (!x->region) {
        void *r = mmap(NULL, per * MAX_THREADS, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED)
            return NULL;
        x->region = (char *)r;
    }
    if (x->carved == MAX_THREADS)
        return NULL;
    char *lo = x->region + (size_t)x->carved * per + page_size();   /* guard page below */
    if (mprotect(lo, STACK_BYTES, PROT_READ | PROT_WRITE))
        return NULL;
    x->carved++;
    return lo;
}

/* a new fiber's first frame: ob_hrx_sim_swap "returns" into fiber_entry */
static void prepare(exec *x, fiber *f)
{
#ifdef OB_ASAN
    /* a stack comes back with the poisoned redzones of frames that never returned (a
     * fiber's first frame, and every frame of one that failed): clean for the new fiber */
    ASAN_UNPOISON_MEMORY_REGION(f->stack, STACK_BYTES);
#endif
#if defined(__x86_64__)
    uintptr_t *sp = (uintptr_t *)(f->stack + STACK_BYTES);
    *--sp = 0;                               /* fiber_entry's return address: never used */
    *--sp = (uintptr_t)fiber_entry;
    for (int i = 0; i < 6; i++)
        *--sp = 0;                           /* rbp rbx r12 r13 r14 r15 */
    --sp;
    memcpy(sp, x->fpenv, sizeof x->fpenv);
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = STACK_BYTES;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, fiber_entry, 0);
#endif
}

static exec *exec_new()
{
    exec *x = (exec *)calloc(1, sizeof *x);
    if (!x)
        return NULL;
#if defined(__x86_64__)
    asm volatile("stmxcsr %0" : "=m"(x->fpenv[0]));
    asm volatile("fnstcw %0" : "=m"(x->fpenv[1]));
    x->fpenv[1] &= 0xffffu;
#endif
    return x;
}

static void exec_free(exec *x)
{
    if (!x)
        return;
    if (x->region)
        munmap(x->region, (STACK_BYTES + page_size()) * MAX_THREADS);
    free(x);
}

/* ---- barriers and shuffles (called by kernel code, on a fiber) -------------------------------- */

/* a kernel bug found inside a fiber: record it and never come back */
static void fail_here(exec *x, fiber *f, const char *what)
{
    if (!x->failed)
        snprintf(x->msg, sizeof x->msg, "%s", what);
    x->failed = true;
    f->state = F_FAILED;
    leave(x, f);
    abort();
}

void ob_sim_syncthreads()
{
    exec *x = t_exec;
    fiber *f = x->cur;
    f->nbar++;
    if (++x->bar_arrived >= (unsigned)x->n * f->nbar)
        return;                              /* the last one in goes on at once */
    f->state = F_BAR;
    wait_turn(x, f);
    f->state = F_RUN;
}

/* enter the warp's k-th collective (a shuffle or an offer) in slot set k & 1: false if this
 * lane had to wait for the others. Slot set p is written again at collective k + 2, which no
 * lane enters before every lane has left collective k + 1, so each lane has read what it
 * needs of collective k by then. */
static unsigned warp_enter(exec *x, fiber *f, warp_state *w)
{
    if (w->size != OB_WARP) {
        char m[160];
        snprintf(m, sizeof m, "a warp shuffle or matrix product in a warp of %d threads "
                 "(blocks of %u x %u x %u: shuffles need whole warps of 32)", w->size,
                 f->t.bdim.x, f->t.bdim.y, f->t.bdim.z);
        fail_here(x, f, m);
    }
    return f->nshfl++;
}

static void warp_wait(exec *x, fiber *f, warp_state *w, unsigned k)
{
    if (++w->arrived[k & 1] < OB_WARP * (k / 2 + 1)) {
        f->state = F_SHFL;
        wait_turn(x, f);
        f->state = F_RUN;
    }
}

uint32_t ob_sim_shfl(uint32_t v, int src)
{
    exec *x = t_exec;
    fiber *f = x->cur;
    warp_state *w = &x->w[f->warp];
    unsigned k = warp_enter(x, f, w), p = k & 1;
    w->slot[p][f->lane] = v;
    warp_wait(x, f, w, k);
    return w->slot[p][src & (OB_WARP - 1)];
}

const uint32_t (*ob_sim_warp_offer(const uint32_t *v, int n))[OB_SIM_OFFER_MAX]
{
    exec *x = t_exec;
    fiber *f = x->cur;
    warp_state *w = &x->w[f->warp];
    unsigned k = warp_enter(x, f, w), p = k & 1;
    memcpy(w->words[p][f->lane], v, (size_t)(n < OB_SIM_OFFER_MAX ? n : OB_SIM_OFFER_MAX) * 4);
    warp_wait(x, f, w, k);
    return w->words[p];
}

void ob_sim_cp_wait()
{
    fiber *f = t_exec->cur;
    for (int i = 0; i < f->ncp; i++)
        memcpy(f->cp[i].dst, f->cp[i].src, (size_t)f->cp[i].n);
    f->ncp = 0;
}

void ob_sim_cp_async(void *dst, const void *src, int n)
{
    fiber *f = t_exec->cur;
    if (n < 1 || n > 16)
        fail_here(t_exec, f, "an asynchronous copy of fewer than 1 or more than 16 bytes");
    if (f->ncp == OB_SIM_CP_MAX)
        ob_sim_cp_wait();
    f->cp[f->ncp].dst = dst;
    f->cp[f->ncp].src = src;
    f->cp[f->ncp].n = n;
    f->ncp++;
}

/* ---- blocks ------------------------------------------------------------------------------------ */

static void abandon(exec *x)
{
    for (int i = 0; i < x->n; i++)
        if (x->f[i].stack) {
            x->free_stack[x->n_free++] = x->f[i].stack;
            x->f[i].stack = NULL;
        }
}

/* The order in which a pass visits a block's threads (OB_HRX_SIM_ORDER): thread order; the
 * reverse; or scrambled, thread i * p mod n (p coprime to n, near 0.62 n), so that neighbours
 * run far apart. Between two barriers a GPU promises no order among a block's threads, nor
 * among a warp's lanes between two shuffles, so a kernel's bits may depend on none: a read of
 * what another thread writes in the same phase (a missing barrier) gives other bits in another
 * order, and the kernel tests, run in each, see it. */
enum { ORDER_THREAD, ORDER_REVERSE, ORDER_SCRAMBLE };

static uint64_t gcd(uint64_t a, uint64_t b);

/* a number coprime to n near 0.62 n: i * p mod n visits 0 .. n - 1 scrambled */
static uint64_t scramble_step(uint64_t n)
{
    uint64_t p = n * 5 / 8 + 1;
    while (gcd(p, n) != 1)
        p++;
    return p;
}

/* the next fiber of the pass that can run (a new one given its stack), the pass advanced past
 * it; NULL at the pass's end, or when a new fiber gets no stack (x->failed, x->msg) */
static fiber *next_ready(exec *x)
{
    int n = x->n;
    while (x->pass_j < n) {
        int i = x->pass_i;
        fiber *f = &x->f[i];
        x->pass_j++;
        x->pass_i = i + x->step < n ? i + x->step : i + x->step - n;
        if (f->state == F_NEW) {
            if (!(f->stack = get_stack(x))) {
                if (!x->failed)
                    snprintf(x->msg, sizeof x->msg, "no memory for the stack of thread %d", i);
                x->failed = true;
                return NULL;
            }
            prepare(x, f);
        } else if (f->state == F_BAR) {
            if (x->bar_arrived < (unsigned)n * f->nbar)
                continue;
        } else if (f->state == F_SHFL) {
            unsigned k = f->nshfl - 1;
            if (x->w[f->warp].arrived[k & 1] < OB_WARP * (k / 2 + 1))
                continue;
        } else {
            continue;
        }
        x->progress = true;
        return f;
    }
    return NULL;
}

/* run one block, its threads in order (ORDER_*); false (with x->msg) on a kernel bug */
static bool run_block(exec *x, dim3 grid, dim3 block, dim3 bidx, int order)
{
    int n = (int)(block.x * block.y * block.z);
    /* a pass visits i0, i0 + step, ... mod n */
    int i0 = order == ORDER_REVERSE ? n - 1 : 0;
    x->step = order == ORDER_REVERSE    ? n - 1
            : order == ORDER_SCRAMBLE ? (int)(scramble_step((uint64_t)n) % (uint64_t)n)
                                      : 1;
    x->n = n;
    x->live = n;
    x->bar_arrived = 0;
    ob_sim_block_serial++;         /* its shared variables are filled afresh (shim.h) */
    x->failed = false;
    for (int w = 0; w * OB_WARP < n; w++) {
        x->w[w].arrived[0] = x->w[w].arrived[1] = 0;
        x->w[w].size = n - w * OB_WARP < OB_WARP ? n - w * OB_WARP : OB_WARP;
    }
    for (int i = 0; i < n; i++) {
        fiber *f = &x->f[i];
        f->t.thread = dim3((unsigned)i % block.x, (unsigned)i / block.x % block.y,
                           (unsigned)i / (block.x * block.y));
        f->t.block = bidx;
        f->t.bdim = block;
        f->t.gdim = grid;
        f->nbar = f->nshfl = 0;
        f->ncp = 0;
        f->state = F_NEW;
        f->warp = i / OB_WARP;
        f->lane = i % OB_WARP;
        f->stack = NULL;
    }
    for (;;) {
        x->pass_j = 0;
        x->pass_i = i0;
        x->progress = false;
        /* each fiber entered hands over to the next until the pass ends or one returns */
        fiber *f;
        while (!x->failed && (f = next_ready(x)))
            run_fiber(x, NULL, f);
        if (x->failed) {
            abandon(x);
            return false;
        }
        if (x->live == 0)
            return true;
        if (!x->progress) {
            int bar = 0, shfl = 0, done = n - x->live;
            for (int i = 0; i < n; i++) {
                bar += x->f[i].state == F_BAR;
                shfl += x->f[i].state == F_SHFL;
            }
            snprintf(x->msg, sizeof x->msg, "its threads wait for each other forever: %d at "
                     "__syncthreads, %d at a warp shuffle, %d returned (a barrier or a shuffle "
                     "that not every thread reaches)", bar, shfl, done);
            abandon(x);
            return false;
        }
    }
}

/* ---- queues and launches ---------------------------------------------------------------------- */

/* a recorded launch, and a graph of them (the runtime table's graph_*) */
struct sim_rec {
    const char *kernel;
    dim3 grid, block;
    ob_sim_body body;
    void *arg;
};
struct sim_graph {
    sim_rec *rec;
    size_t n, cap;
    bool failed;                   /* a launch could not be kept (out of memory) */
};

struct ob_hrx_q {
    sim_graph *rec;                /* the graph being recorded, or NULL */
    struct ob_pool *pool;
    int n_threads;
    exec **ex;                     /* [n_threads], made when a thread first runs a block */
    pthread_mutex_t mu;
    bool big_tiles;                /* launch geometry (shim.h): not OB_HRX_SIM_TILES=gpu */
    bool trace;                    /* OB_HRX_SIM_TRACE=1: a line on stderr a launch run */
    int order;                     /* OB_HRX_SIM_ORDER: the threads' order in a block */
    float *ws;                     /* the workspace (shim.h), made when first asked for */
    bool ws_failed;
    unsigned ctr[OB_HRX_CTRS];     /* the arrival counters (shim.h's ob_last_block) */
    uint64_t perm;                 /* the launch's order of blocks (ob_sim_run) */
    int err;                       /* the first failure of the last launch */
    char msg[512];
    /* the launch being run */
    const char *kernel;
    dim3 grid, block;
    ob_sim_body body;
    const void *arg;
};

static void q_fail(ob_hrx_q *q, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void q_fail(ob_hrx_q *q, int err, const char *fmt, ...)
{
    pthread_mutex_lock(&q->mu);
    if (!q->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(q->msg, sizeof q->msg, fmt, ap);
        va_end(ap);
        q->err = err;
    }
    pthread_mutex_unlock(&q->mu);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static void block_task(void *ctx, int i, int t)
{
    ob_hrx_q *q = (ob_hrx_q *)ctx;
    if (q->err)
        return;                    /* one report per launch */
    exec *x = q->ex[t];
    if (!x && !(x = q->ex[t] = exec_new())) {
        q_fail(q, OB_ENOMEM, "hrx-sim: out of memory for an executor");
        return;
    }
    t_exec = x;
    x->body = q->body;
    x->arg = q->arg;
    unsigned gx = q->grid.x, gy = q->grid.y;
    i = (int)((uint64_t)i * q->perm % ((uint64_t)gx * gy * q->grid.z));
    dim3 b((unsigned)i % gx, (unsigned)i / gx % gy, (unsigned)i / (gx * gy));
    if (!run_block(x, q->grid, q->block, b, q->order))
        q_fail(q, OB_EINTERNAL, "hrx-sim: kernel %s, block (%u,%u,%u) of (%u,%u,%u) x (%u,%u,%u) "
               "threads: %s", q->kernel, b.x, b.y, b.z, q->grid.x, q->grid.y, q->grid.z,
               q->block.x, q->block.y, q->block.z, x->msg);
    ob_sim_self = NULL;
}

void ob_sim_run(ob_hrx_q *q, const char *kernel, dim3 grid, dim3 block, ob_sim_body body,
                const void *arg)
{
    uint64_t nb = (uint64_t)grid.x * grid.y * grid.z, nt = (uint64_t)block.x * block.y * block.z;
    if (q->err)
        return;                    /* an earlier launch failed: nothing runs until reported */
    if (nb == 0 || nb > INT32_MAX || nt == 0 || nt > MAX_THREADS) {
        q_fail(q, OB_EINTERNAL, "hrx-sim: kernel %s launched with a grid of (%u,%u,%u) blocks "
               "of (%u,%u,%u) threads (1 to 1024 threads a block, at least one block)", kernel,
               grid.x, grid.y, grid.z, block.x, block.y, block.z);
        return;
    }
    /* The blocks in a scrambled order: task i runs block i * perm mod nb (perm near 0.62 nb,
     * coprime to it), so neighbours run far apart. A GPU promises no order, so a kernel may
     * assume none: a last block to arrive (ob_last_block) is then neither the highest nor
     * the lowest of its group, and a group's blocks arrive among other groups'. */
    q->perm = scramble_step(nb);
    if (q->trace)
        fprintf(stderr, "hrx-sim: launch %s (%u,%u,%u) x (%u,%u,%u)\n", kernel, grid.x, grid.y,
                grid.z, block.x, block.y, block.z);
    q->kernel = kernel;
    q->grid = grid;
    q->block = block;
    q->body = body;
    q->arg = arg;
    ob_pool_run(q->pool, block_task, q, (int)nb);
}

bool ob_sim_big_tiles(ob_hrx_q *q) { return q->big_tiles; }

float *ob_sim_workspace(ob_hrx_q *q, size_t *n)
{
    if (!q->ws && !q->ws_failed && !(q->ws = (float *)malloc(OB_HRX_WS_FLOATS * sizeof(float))))
        q->ws_failed = true;       /* no workspace: products are not split */
    *n = q->ws ? OB_HRX_WS_FLOATS : 0;
    return q->ws;
}

unsigned *ob_sim_counters(ob_hrx_q *q, int *n)
{
    *n = OB_HRX_CTRS;
    return q->ctr;
}

bool ob_sim_recording(ob_hrx_q *q) { return q->rec != NULL; }

void ob_sim_record(ob_hrx_q *q, const char *kernel, dim3 grid, dim3 block, ob_sim_body body,
                   void *arg)
{
    sim_graph *g = q->rec;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 256;
        sim_rec *r = (sim_rec *)realloc(g->rec, cap * sizeof *r);
        if (!r) {
            free(arg);
            g->failed = true;
            return;
        }
        g->rec = r;
        g->cap = cap;
    }
    if (!arg)
        g->failed = true;
    g->rec[g->n++] = sim_rec{kernel, grid, block, body, arg};
}

extern "C" int ob_hrx_sim_launched(ob_hrx_q *q, const char *kernel)
{
    if (!q->err)
        return 0;
    int e = ob_seterr(q->err, "%s", q->msg);
    q->err = 0;
    memset(q->ctr, 0, sizeof q->ctr);   /* a failed launch's blocks may not all have arrived */
    return e;
}

/* ---- the runtime table of hrx-sim --------------------------------------------------------------- */

static int sim_count(void) { return 1; }

static int sim_info(int index, ob_hrx_devinfo *out)
{
    if (index != 0)
        return ob_seterr(OB_EDEVICE, "device %d: hrx-sim has one device, 0", index);
    struct sysinfo si;
    memset(out, 0, sizeof *out);
#if defined(__x86_64__)
    snprintf(out->name, sizeof out->name, "hrx-sim on the host (x86-64)");
#else
    snprintf(out->name, sizeof out->name, "hrx-sim on the host");
#endif
    if (sysinfo(&si) == 0) {
        out->mem_bytes = (uint64_t)si.totalram * si.mem_unit;
        out->free_bytes = (uint64_t)si.freeram * si.mem_unit;
    }
    return 0;
}

static void sim_graph_free(ob_hrx_q *q, void *graph);

static void sim_close(ob_hrx_q *q)
{
    if (!q)
        return;
    sim_graph_free(q, q->rec);
    free(q->ws);
    ob_pool_free(q->pool);
    for (int i = 0; i < q->n_threads; i++)
        exec_free(q->ex[i]);
    free(q->ex);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

static int sim_open(int index, int n_threads, ob_hrx_q **out)
{
    ob_hrx_devinfo info;
    int e, order;
    if ((e = sim_info(index, &info)))
        return e;
    const char *o = getenv("OB_HRX_SIM_ORDER");
    if (!o || !*o || !strcmp(o, "thread"))
        order = ORDER_THREAD;
    else if (!strcmp(o, "reverse"))
        order = ORDER_REVERSE;
    else if (!strcmp(o, "scramble"))
        order = ORDER_SCRAMBLE;
    else
        return ob_seterr(OB_EUSAGE, "OB_HRX_SIM_ORDER=%s: not thread, reverse or scramble", o);
    ob_hrx_q *q = (ob_hrx_q *)calloc(1, sizeof *q);
    if (!q)
        return ob_seterr(OB_ENOMEM, "out of memory");
    pthread_mutex_init(&q->mu, NULL);
    const char *tiles = getenv("OB_HRX_SIM_TILES");
    q->big_tiles = !tiles || strcmp(tiles, "gpu") != 0;
    const char *trace = getenv("OB_HRX_SIM_TRACE");
    q->trace = trace && *trace && strcmp(trace, "0") != 0;
    q->order = order;
    q->n_threads = n_threads < 1 ? 1 : n_threads;
    if (!(q->ex = (exec **)calloc((size_t)q->n_threads, sizeof *q->ex))) {
        sim_close(q);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    if ((e = ob_pool_new(q->n_threads, &q->pool))) {
        sim_close(q);
        return e;
    }
    *out = q;
    return 0;
}

/* Fresh device memory holds all-ones bytes (NaN as floats), never zeros: a kernel that reads
 * what nothing wrote gives NaN instead of a plausible number, and the bitwise tests see it.
 * Allocations above FILL_MAX (large KV caches) are left untouched, as the cpu route leaves
 * its caches, so that their pages are only taken when written. */
#define FILL_MAX ((size_t)256 << 20)
static int sim_alloc(ob_hrx_q *q, size_t bytes, void **out)
{
    void *p = NULL;
    if (posix_memalign(&p, 256, bytes ? bytes : 1))
        return ob_seterr(OB_ENOMEM, "hrx-sim: out of memory for %zu bytes", bytes);
    if (bytes <= FILL_MAX)
        memset(p, 0xff, bytes);
    *out = p;
    return 0;
}

static void sim_free(ob_hrx_q *q, void *p) { free(p); }

/* a copy or a wait between graph_begin and graph_end: a GPU's capture would take the copy into
 * the graph (or fail), not run it now; hrx-sim refuses both, so that the tests see the bug */
static int not_recording(ob_hrx_q *q, const char *what)
{
    if (q->rec)
        return ob_seterr(OB_EINTERNAL, "hrx-sim: %s while a graph is being recorded", what);
    return 0;
}

static int sim_copy(ob_hrx_q *q, void *dst, const void *src, size_t bytes)
{
    if (int e = not_recording(q, "a copy"))
        return e;
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

static int sim_sync(ob_hrx_q *q) { return not_recording(q, "a sync"); }

/* ---- graphs: the launches kept in order and run again, each with its recorded arguments ---- */

static void sim_graph_free(ob_hrx_q *q, void *graph)
{
    sim_graph *g = (sim_graph *)graph;
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        free(g->rec[i].arg);
    free(g->rec);
    free(g);
}

static int sim_graph_begin(ob_hrx_q *q)
{
    if (q->rec)
        return ob_seterr(OB_EINTERNAL, "hrx-sim: a graph is already being recorded");
    if (!(q->rec = (sim_graph *)calloc(1, sizeof *q->rec)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    return 0;
}

static int sim_graph_end(ob_hrx_q *q, void **graph)
{
    sim_graph *g = q->rec;
    *graph = NULL;
    if (!g)
        return ob_seterr(OB_EINTERNAL, "hrx-sim: no graph is being recorded");
    q->rec = NULL;
    if (g->failed) {
        sim_graph_free(q, g);
        return ob_seterr(OB_ENOMEM, "hrx-sim: out of memory for a graph's launches");
    }
    *graph = g;
    return 0;
}

static int sim_graph_launch(ob_hrx_q *q, void *graph)
{
    sim_graph *g = (sim_graph *)graph;
    for (size_t i = 0; i < g->n && !q->err; i++)
        ob_sim_run(q, g->rec[i].kernel, g->rec[i].grid, g->rec[i].block, g->rec[i].body,
                   g->rec[i].arg);
    return ob_hrx_sim_launched(q, "graph");
}

extern "C" const ob_hrx_rt ob_hrx_sim_rt = {
    "sim", sim_count, sim_info, sim_open, sim_close, sim_alloc, sim_free,
    sim_copy, sim_copy, sim_copy, sim_sync,
    sim_graph_begin, sim_graph_end, sim_graph_launch, sim_graph_free,
    true, &ob_hrx_sim_kernels,
};
