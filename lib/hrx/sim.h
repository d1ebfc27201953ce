/*
 * sim.h — the SIMT executor of hrx-sim (sim.cc): GPU kernels, compiled as C++ through shim.h,
 * executed on host threads. Included by shim.h for the SIM target only.
 *
 * A launch runs the blocks of its grid on the queue's host threads (each block whole on one
 * thread), in a scrambled order (a GPU promises none). Within a block, every GPU thread is a fiber with a stack of its own; the fibers run
 * in turn and switch only where a GPU thread would wait for others: at __syncthreads() (every
 * thread of the block) and at a warp shuffle (the 32 lanes of its warp). A kernel with neither
 * runs thread after thread with no switch in between.
 *
 * Kernel bugs that a GPU would turn into a hang or a silent wrong answer are reported instead,
 * naming the kernel and the block, and the launch fails (OB_EINTERNAL): a barrier that some
 * thread of the block never reaches (it returned, or waits at another barrier), a shuffle that
 * some lane of the warp never reaches, a shuffle in a warp of fewer than 32 threads, a block
 * of more than 1024 threads.
 */
#ifndef OB_HRX_SIM_H
#define OB_HRX_SIM_H

#include <new>
#include <type_traits>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hrx/hrx.h"

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/* what the running GPU thread sees: its indices and the launch's shape */
struct ob_sim_thread {
    dim3 thread, block, bdim, gdim;
};

/* the running GPU thread of this host thread (set by the executor at every switch) */
extern __thread const ob_sim_thread *ob_sim_self;

/* the block this host thread runs: a number of its own, never 0 (a new block, a new number) */
extern __thread uint64_t ob_sim_block_serial;
/* shim.h's OB_SHARED_FRESH: the first time a thread of a block asks, the n bytes at p become
 * all-ones (a GPU's shared memory holds anything when a block starts); *mark remembers the block */
static inline void ob_sim_fresh(void *p, size_t n, uint64_t *mark)
{
    if (*mark != ob_sim_block_serial) {
        memset(p, 0xff, n);
        *mark = ob_sim_block_serial;
    }
}

void ob_sim_syncthreads();
/* the value v of lane src (0..31) of this thread's warp, once every lane has offered its own */
uint32_t ob_sim_shfl(uint32_t v, int src);
/* a collective of the warp, as a shuffle is: lane l offers n <= OB_SIM_OFFER_MAX words v; once
 * every lane has offered, row l of the result holds lane l's words (for the warp's matrix
 * products: shim.h's ob_mma_s8). Read it before this thread's next shuffle or offer. */
#define OB_SIM_OFFER_MAX 8
const uint32_t (*ob_sim_warp_offer(const uint32_t *v, int n))[OB_SIM_OFFER_MAX];

/* shim.h's ob_cp4 and ob_cp_wait: this thread's copy of n <= 16 bytes, kept until its wait
 * (up to OB_SIM_CP_MAX of them; a further one performs those kept first, as a GPU may) */
#define OB_SIM_CP_MAX 32
void ob_sim_cp_async(void *dst, const void *src, int n);
void ob_sim_cp_wait();

typedef void (*ob_sim_body)(const void *arg);
/* run body(arg) as every thread of grid x block on q's threads; an error is kept in q and
 * returned by ob_hrx_sim_launched */
void ob_sim_run(struct ob_hrx_q *q, const char *kernel, dim3 grid, dim3 block, ob_sim_body body,
                const void *arg);

/* while q records a graph (ob_hrx_sim_rt.graph_begin): keep the launch, its argument a heap
 * copy that the graph owns (NULL: out of memory, the graph fails) */
bool ob_sim_recording(struct ob_hrx_q *q);
void ob_sim_record(struct ob_hrx_q *q, const char *kernel, dim3 grid, dim3 block, ob_sim_body body,
                   void *arg);

template <class F>
static inline void ob_sim_launch(struct ob_hrx_q *q, const char *kernel, dim3 grid, dim3 block,
                                 const F &f)
{
    ob_sim_body body = [](const void *p) { (*(const F *)p)(); };
    if (ob_sim_recording(q)) {
        /* the launch's arguments by value, as a GPU graph keeps them (freed with free()) */
        static_assert(std::is_trivially_destructible<F>::value, "a launch's arguments are plain values");
        void *m = malloc(sizeof(F));
        ob_sim_record(q, kernel, grid, block, body, m ? new (m) F(f) : NULL);
        return;
    }
    ob_sim_run(q, kernel, grid, block, body, &f);
}

#endif
