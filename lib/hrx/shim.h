/*
 * shim.h — the one header every hrx kernel file (*.hip) includes: it maps one set of names onto
 * three targets, chosen by the compiler that reads the file:
 *   CUDA  nvcc (__CUDACC__)            names ob_hrx_cuda_*
 *   HIP   hipcc (__HIPCC__)            names ob_hrx_hip_*
 *   SIM   neither: g++ compiling the same file as C++ for hrx-sim (sim.h, sim.cc)
 *                                      names ob_hrx_sim_*
 *
 * What kernel code may use (and nothing else of CUDA or HIP):
 *   __global__ __device__
 *   OB_SHARED(T, name, dims)            a block's shared variable in a kernel or a device
 *                                       function: `__shared__ T name dims` (static sizes only)
 *   OB_SHARED_FILE(T, name, dims)       one at file scope, each kernel that uses it calling
 *   OB_SHARED_FRESH(name)               OB_SHARED_FRESH(name) before anything else (below)
 *   threadIdx blockIdx blockDim gridDim, dim3
 *   __syncthreads()
 *   ob_shfl_xor(v, m), ob_shfl(v, lane)  a 32-lane warp shuffle of an int or a float, in 1-D
 *                                        blocks whose size is a multiple of 32; every lane of
 *                                        the warp takes part (on AMD's 64-wide wavefronts the
 *                                        shuffle has width 32: each half is its own warp, so
 *                                        the 32-partial shape of lib/arith/ holds everywhere)
 *   ob_mma_s8<K>(a, b, c)               the warp's 16 x 8 int8 matrix product (CUDA's tensor
 *                                       cores; hrx-sim; not HIP: OB_HRX_FN(has_mma))
 *   OB_LAUNCH(q, kernel, grid, block, args...)   a launch on queue q (struct ob_hrx_q)
 *   ob_cp4(dst, src), ob_cp_wait()      a copy of a word from device memory into shared memory
 *                                       that completes at the thread's next ob_cp_wait()
 *   ob_last_block(ctr, count)           whether this block arrived last of count (below)
 *   OB_UNROLL                           before a loop of constant count: unroll it (so that a
 *                                       small array indexed by its counter stays in registers)
 *   OB_NOINLINE                         a device function kept out of line (one copy of code
 *                                       that many kernels call)
 *   OB_HRX_FN(name)                     the target's name of a launcher or table
 * and the arithmetic of lib/arith/ (OB_INLINE functions compile for the device too).
 *
 * The SIM target runs each GPU thread of a block as a fiber (sim.cc); a fiber switches only at
 * __syncthreads() and at a shuffle, so a kernel without either runs each thread to its end in
 * turn. Shared memory is `static thread_local` there: the fibers of a block share one host
 * thread, and the blocks a host thread runs come one after another.
 *
 * A GPU gives a block shared memory whose contents are undefined (what an earlier block on the
 * SM left, or anything), where a thread_local would hold the previous block's values, often
 * plausible ones. So hrx-sim fills each shared variable with all-ones bytes (a float's NaN, an
 * int's -1) when the first thread of a block reaches its declaration (OB_SHARED) or the
 * kernel's OB_SHARED_FRESH: a kernel that reads what no thread of its block wrote computes
 * wrong bits in the bitwise tests. A plain __shared__, which would escape this, does not
 * compile for hrx-sim.
 */
#ifndef OB_HRX_SHIM_H
#define OB_HRX_SHIM_H

#include <stdint.h>
#include <string.h>

#include "hrx/hrx.h"

#if defined(__CUDACC__)
/* ---- CUDA (nvcc) ----------------------------------------------------------------------- */
#define OB_HRX_CUDA 1
#include <cuda_runtime.h>
#define OB_HRX_FN(name) ob_hrx_cuda_##name
typedef cudaStream_t ob_gpu_stream_t;
__device__ static inline float ob_shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m, 32); }
__device__ static inline int ob_shfl_xor(int v, int m) { return __shfl_xor_sync(0xffffffffu, v, m, 32); }
__device__ static inline float ob_shfl(float v, int l) { return __shfl_sync(0xffffffffu, v, l, 32); }
__device__ static inline int ob_shfl(int v, int l) { return __shfl_sync(0xffffffffu, v, l, 32); }

#elif defined(__HIPCC__)
/* ---- HIP (hipcc) ----------------------------------------------------------------------- */
#define OB_HRX_HIP 1
#include <hip/hip_runtime.h>
#define OB_HRX_FN(name) ob_hrx_hip_##name
typedef hipStream_t ob_gpu_stream_t;
__device__ static inline float ob_shfl_xor(float v, int m) { return __shfl_xor(v, m, 32); }
__device__ static inline int ob_shfl_xor(int v, int m) { return __shfl_xor(v, m, 32); }
__device__ static inline float ob_shfl(float v, int l) { return __shfl(v, l, 32); }
__device__ static inline int ob_shfl(int v, int l) { return __shfl(v, l, 32); }

#else
/* ---- SIM (g++ for hrx-sim) ---------------------------------------------------------------- */
#define OB_HRX_SIM 1
#include <math.h>                  /* fmaf, sqrtf: nvcc and hipcc declare them themselves */
#include "hrx/sim.h"
#define OB_HRX_FN(name) ob_hrx_sim_##name
#define __global__
#define __device__
#define __host__
/* (shared variables are OB_SHARED's: a plain __shared__ fails to compile) */
#define __shared__ static thread_local __shared___is_OB_SHARED_in_hrx_kernels
#define OB_SHARED_FILE(T, name, dims) \
    static thread_local T name dims;  \
    static thread_local uint64_t name##_ob_block
#define OB_SHARED_FRESH(name) ob_sim_fresh(&name, sizeof name, &name##_ob_block)
#define OB_SHARED(T, name, dims) \
    OB_SHARED_FILE(T, name, dims); \
    OB_SHARED_FRESH(name)
#define threadIdx (ob_sim_self->thread)
#define blockIdx (ob_sim_self->block)
#define blockDim (ob_sim_self->bdim)
#define gridDim (ob_sim_self->gdim)
#define __syncthreads() ob_sim_syncthreads()
static inline float ob_shfl(float v, int l)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    u = ob_sim_shfl(u, l & 31);
    memcpy(&v, &u, 4);
    return v;
}
static inline int ob_shfl(int v, int l) { return (int)ob_sim_shfl((uint32_t)v, l & 31); }
static inline float ob_shfl_xor(float v, int m) { return ob_shfl(v, ((int)threadIdx.x ^ m) & 31); }
static inline int ob_shfl_xor(int v, int m) { return ob_shfl(v, ((int)threadIdx.x ^ m) & 31); }
/* the arguments are evaluated once, at the launch, and passed by value, as a GPU launch does */
#define OB_LAUNCH(q, kernel, grid, block, ...) \
    ob_sim_launch_args(q, #kernel, grid, block, kernel, __VA_ARGS__)
template <class K, class... A>
static inline void ob_sim_launch_args(struct ob_hrx_q *q, const char *name, dim3 grid, dim3 block,
                                      K kernel, A... args)
{
    ob_sim_launch(q, name, grid, block, [=]() { kernel(args...); });
}
#endif

#if !defined(OB_HRX_SIM)
#define OB_SHARED_FILE(T, name, dims) __shared__ T name dims
#define OB_SHARED_FRESH(name) ((void)0)
#define OB_SHARED(T, name, dims) __shared__ T name dims
#endif

#if defined(OB_HRX_SIM)
#define OB_UNROLL _Pragma("GCC unroll 32")
#define OB_NOINLINE __attribute__((noinline))
#else
#define OB_UNROLL _Pragma("unroll")
#define OB_NOINLINE __noinline__
#endif

#if defined(OB_HRX_CUDA) || defined(OB_HRX_HIP)
/* the stream of a GPU queue, its device made current (gpu.hip) */
ob_gpu_stream_t OB_HRX_FN(stream)(struct ob_hrx_q *q);
#define OB_LAUNCH(q, kernel, grid, block, ...) \
    kernel<<<grid, block, 0, OB_HRX_FN(stream)(q)>>>(__VA_ARGS__)
#endif

/* launch geometry: large tiles (hrx-sim, unless OB_HRX_SIM_TILES=gpu: fewer fiber switches)
 * or the GPU's small ones; the kernels compute the same bits with either */
#if defined(OB_HRX_SIM)
bool ob_sim_big_tiles(struct ob_hrx_q *q);
static inline bool OB_HRX_FN(big_tiles)(struct ob_hrx_q *q) { return ob_sim_big_tiles(q); }
static inline bool OB_HRX_FN(profiling)(struct ob_hrx_q *q) { return false; }
#else
static inline bool OB_HRX_FN(big_tiles)(struct ob_hrx_q *q) { return false; }
/* OB_HRX_PROFILE is on for this queue (gpu.hip): launchers may name their launch in detail */
bool OB_HRX_FN(profiling)(struct ob_hrx_q *q);
#endif

/* the queue's workspace (*n floats of device memory, OB_HRX_WS_FLOATS or 0: none) and the
 * device's multiprocessors (SMs or CUs; hrx-sim: a nominal 132, an H100's) */
#if defined(OB_HRX_SIM)
float *ob_sim_workspace(struct ob_hrx_q *q, size_t *n);
static inline float *OB_HRX_FN(workspace)(struct ob_hrx_q *q, size_t *n) { return ob_sim_workspace(q, n); }
static inline int OB_HRX_FN(sms)(struct ob_hrx_q *q) { return 132; }
#else
float *OB_HRX_FN(workspace)(struct ob_hrx_q *q, size_t *n);
int OB_HRX_FN(sms)(struct ob_hrx_q *q);
#endif

/* the queue's arrival counters (*n of them, OB_HRX_CTRS or 0: none), zero between launches
 * (ob_last_block below puts back each one it takes) */
#if defined(OB_HRX_SIM)
unsigned *ob_sim_counters(struct ob_hrx_q *q, int *n);
static inline unsigned *OB_HRX_FN(counters)(struct ob_hrx_q *q, int *n) { return ob_sim_counters(q, n); }
#else
unsigned *OB_HRX_FN(counters)(struct ob_hrx_q *q, int *n);
#endif

/* the warp's int8 matrix product (ob_mma_s8, below) is there: hrx-sim, and a CUDA device of
 * compute capability 8.0 or later (gpu.hip); HIP keeps dp4a */
#if defined(OB_HRX_SIM)
static inline bool OB_HRX_FN(has_mma)(struct ob_hrx_q *q) { return true; }
#elif defined(OB_HRX_CUDA)
bool OB_HRX_FN(has_mma)(struct ob_hrx_q *q);
#else
static inline bool OB_HRX_FN(has_mma)(struct ob_hrx_q *q) { return false; }
#endif

/* after OB_LAUNCH: 0, or the launch's failure (a kernel bug found by hrx-sim, a GPU error) as
 * an OB_E* code with its message set on the calling thread */
extern "C" int OB_HRX_FN(launched)(struct ob_hrx_q *q, const char *kernel);

/* ---- integer helpers (exact: any target, any order gives the same integers) ------------------ */

/* c + the sum of the four products of a's and b's signed bytes (CUDA: the dp4a instruction) */
__device__ static inline int ob_dp4a(int a, int b, int c)
{
#if defined(OB_HRX_CUDA)
    return __dp4a(a, b, c);
#else
    for (int k = 0; k < 32; k += 8)
        c += (int)(int8_t)(uint32_t(a) >> k) * (int)(int8_t)(uint32_t(b) >> k);
    return c;
#endif
}

/* four bytes at p as one little-endian word: p 4-byte aligned (ob_ld4), or only 2-byte aligned
 * (ob_ld4_a2: blocks of an odd number of halfwords, Q6_K's 210 bytes) */
__device__ static inline uint32_t ob_ld4(const void *p)
{
#if defined(OB_HRX_SIM)
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#else
    return *(const uint32_t *)p;
#endif
}
__device__ static inline uint32_t ob_ld4_a2(const void *p)
{
    const uint16_t *h = (const uint16_t *)p;
#if defined(OB_HRX_SIM)
    uint16_t v[2];
    memcpy(v, h, 4);
    return v[0] | (uint32_t)v[1] << 16;
#else
    return h[0] | (uint32_t)h[1] << 16;
#endif
}

/*
 * An asynchronous copy of the 4 bytes at src (device memory) to dst (shared memory), both
 * 4-byte aligned: dst holds them once this thread has called ob_cp_wait(), and another thread
 * sees them after a __syncthreads() that follows that wait. On CUDA from sm_80 it is cp.async,
 * which no register waits for, so every copy of a stage can be in flight at once (a load and
 * a store wait for the load's round trip before the store); elsewhere an ordinary load and
 * store. hrx-sim performs the copies at the wait, in the order given, so a kernel that reads
 * dst before it (a missing or misplaced wait) computes wrong bits in the tests, and a thread
 * that ends with copies not waited for fails the launch.
 */
__device__ static inline void ob_cp4(uint32_t *dst, const void *src)
{
#if defined(OB_HRX_SIM)
    ob_sim_cp_async(dst, src, 4);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;"
                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
#else
    *dst = *(const uint32_t *)src;
#endif
}
__device__ static inline void ob_cp_wait(void)
{
#if defined(OB_HRX_SIM)
    ob_sim_cp_wait();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

/*
 * Whether this block is the last of `count` blocks of the launch to arrive at *ctr: true in
 * every thread of that block (and only of that one), which then sees every write the others
 * made before they arrived, so it may do what needs all of their results (a row's norm, a
 * block's quantisation) in the same launch. Every thread of the block calls it, once (1-D
 * blocks). Each thread's writes are fenced before the block's arrival (one atomic add by thread
 * 0), and the last block fences again before it reads; it puts the counter back to 0 for the
 * next launch, a graph's replay included. hrx-sim runs a launch's blocks in a scrambled order
 * (sim.cc's ob_sim_run), so a group's last block is not the one a count in order would make it.
 * The last block must read the others' results through plain loads: the read-only path (__ldg,
 * or what nvcc makes of a const __restrict__ pointer: ld.global.nc) is not kept coherent with
 * other blocks' stores within a launch, and no fence helps it; none of the kernels uses it
 * (the PTX of mm, attn and norm for sm_90 has no ld.global.nc), and hrx-sim could not tell.
 */
__device__ static inline bool ob_last_block(unsigned *ctr, unsigned count)
{
    OB_SHARED(int, last, );
#if defined(OB_HRX_SIM)
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#else
    __threadfence();
#endif
    __syncthreads();
    if (threadIdx.x == 0) {
#if defined(OB_HRX_SIM)
        unsigned before = __atomic_fetch_add(ctr, 1u, __ATOMIC_ACQ_REL);
#else
        unsigned before = atomicAdd(ctr, 1u);
#endif
        last = before == count - 1;
        if (last)
            *ctr = 0;              /* every other block has arrived: nobody else touches it */
    }
    __syncthreads();
    bool mine = last != 0;
    if (mine) {
#if defined(OB_HRX_SIM)
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
#else
        __threadfence();
#endif
    }
    return mine;
}

/* ---- the warp's integer matrix product (int8 tensor cores; CUDA and hrx-sim) ---------------- */

#if defined(OB_HRX_CUDA) || defined(OB_HRX_SIM)
#define OB_HRX_HAS_MMA 1
/*
 * c[0..3] = the int32 sums of the warp's 16 x 8 tile A B: A 16 rows of K int8 values, B 8
 * columns of K, K = 32 or 16; PTX's mma.m16n8k32 / m16n8k16 .row.col.s32.s8.s8.s32 (sm_80 on)
 * and its fragments. Lane 4 g + t (g = lane / 4, t = lane % 4) holds word t (values 4 t ..
 * 4 t + 3) of A's row g in a[0] and of row g + 8 in a[1]; for K = 32 word t + 4 of the same
 * rows in a[2] and a[3]; word t of B's column g in b[0] (K = 32: word t + 4 in b[1]). It gets
 * rows g (c[0], c[1]) and g + 8 (c[2], c[3]) at columns 2 t and 2 t + 1. Every lane of the
 * warp takes part. Integers: the same sums in any order, so the tensor core gives dp4a's.
 * On a CUDA device below 8.0 the product is not there: OB_HRX_FN(has_mma) says so, and no
 * kernel that calls it is launched.
 */
template <int K>
__device__ static inline void ob_mma_s8(const uint32_t *a, const uint32_t *b, int *c)
{
    static_assert(K == 32 || K == 16, "mma.m16n8kK: K is 32 or 16 for int8");
#if defined(OB_HRX_SIM)
    enum { NA = K / 8, NB = K / 16 };
    uint32_t v[NA + NB];
    for (int i = 0; i < NA; i++)
        v[i] = a[i];
    for (int i = 0; i < NB; i++)
        v[NA + i] = b[i];
    const uint32_t (*all)[OB_SIM_OFFER_MAX] = ob_sim_warp_offer(v, NA + NB);
    int lane = (int)threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + 8 * (i >> 1), col = 2 * t + (i & 1), s = 0;
        for (int kw = 0; kw < K / 4; kw++)
            s = ob_dp4a((int)all[4 * (row & 7) + (kw & 3)][(row >> 3) + 2 * (kw >> 2)],
                        (int)all[4 * col + (kw & 3)][NA + (kw >> 2)], s);
        c[i] = s;
    }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (K == 32)
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};"
            : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
            "{%4, %5}, {%6}, {%7, %7, %7, %7};"
            : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(0));
#else
    c[0] = c[1] = c[2] = c[3] = 0;  /* device code for an arch below sm_80: never launched */
#endif
}
#endif

/* ---- warp reductions with the bits of lib/arith/ -------------------------------------------- */

/*
 * ob_fold32 of the 32 lanes' values (lane j holding p[j]), in every lane: the xor-butterfly
 * p[j] = p[j] + p[j + s] for s = 16, 8, 4, 2, 1. A lane whose partner is the lower index adds
 * the partner's value first, so every lane performs the very additions of ob_fold32 with the
 * operands in its order (the same bits, NaN payloads included, in every lane).
 */
__device__ static inline float ob_warp_fold32(float v)
{
    int lane = (int)threadIdx.x & 31;
    for (int s = 16; s > 0; s >>= 1) {
        float o = ob_shfl_xor(v, s);
        v = (lane & s) ? o + v : v + o;
    }
    return v;
}

/* the sum of the lanes' integers, in every lane (exact in any order) */
__device__ static inline int ob_warp_isum(int v)
{
    for (int s = 16; s > 0; s >>= 1)
        v += ob_shfl_xor(v, s);
    return v;
}

#endif
