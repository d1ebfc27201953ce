/*
 * hrx-shim.cc — hrx-sim's SIMT executor (lib/hrx/sim.cc) through the shim kernels see
 * (lib/hrx/shim.h), TAP. Kernels of its own, run on a queue of 2 host threads:
 *   - indices: threadIdx, blockIdx, blockDim, gridDim of 3-D grids and blocks, every thread once;
 *   - __syncthreads: rounds of write, barrier, read a neighbour's value, in blocks of 1 to 1024
 *     threads, blocks spread over both host threads;
 *   - shared memory is the block's own (concurrent blocks on two host threads), and each
 *     block finds it all-ones, not what the previous block on its host thread left (OB_SHARED
 *     and OB_SHARED_FILE with OB_SHARED_FRESH);
 *   - warp shuffles: ob_shfl_xor over every mask, ob_shfl from any lane, ob_warp_isum, and
 *     ob_warp_fold32 equal to lib/arith's ob_fold32 in every lane;
 *   - ob_mma_s8, the warp's int8 matrix product (K = 32 and 16), against a plain product: its
 *     fragments filled by PTX's element formulas (written here apart from the shim's), mixed
 *     with shuffles, in 2 warps a block; in a partial warp it is a reported bug as a shuffle is;
 *   - ob_last_block: exactly one last block a group, which sees the others' stores, counters
 *     put back; the blocks of a launch run in a scrambled order;
 *   - a fiber's stack holds a 16 KiB local array;
 *   - OB_HRX_SIM_ORDER: a block's threads start in thread order, in reverse, or scrambled, and
 *     a read racing a neighbour's store sees what that order decides; a bad value is refused;
 *   - kernel bugs are reported, never a hang or a silent answer: a barrier some threads never
 *     reach (returned, or diverged), a shuffle some lanes never reach, a shuffle in a partial
 *     warp, a block of 1025 threads, an empty grid; the message names the kernel and the block,
 *     and the queue runs the next launch normally;
 *   - how long a switch takes (a diagnostic line, not a check).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hrx/shim.h"
#include "arith/arith.h"
#include "tap.h"

static ob_hrx_q *q;

/* ---- kernels ------------------------------------------------------------------------------------ */

/* element i's place in a fragment of mma.m16n8kK .s8 (PTX ISA), lane 4 g + t: A's a_i (16
 * elements for K = 32, 8 for K = 16, 4 a register), B's b_i (8 or 4), C's c_i (4) */
static int mma_a_row(int K, int i, int g) { return (K == 32 ? (i < 4 || (i >= 8 && i < 12)) : i < 4) ? g : g + 8; }
static int mma_a_col(int i, int t) { return t * 4 + (i & 3) + (i >= 8 ? 16 : 0); }
static int mma_b_row(int i, int t) { return t * 4 + (i & 3) + (i >= 4 ? 16 : 0); }

/* warp w of the block: C_w = A_w B_w, A_w 16 x K row-major, B_w K x 8 (b[w][k * 8 + col]); a
 * shuffle before the product and after it */
template <int K>
__global__ static void k_mma(const int8_t *a, const int8_t *b, int *c, int *shf)
{
    int lane = (int)threadIdx.x & 31, w = (int)threadIdx.x / 32, g = lane >> 2, t = lane & 3;
    const int8_t *aw = a + w * 16 * K, *bw = b + w * K * 8;
    uint32_t af[4] = {0, 0, 0, 0}, bf[2] = {0, 0};
    for (int i = 0; i < K / 2; i++)
        af[i / 4] |= (uint32_t)(uint8_t)aw[mma_a_row(K, i, g) * K + mma_a_col(i, t)] << 8 * (i % 4);
    for (int i = 0; i < K / 4; i++)
        bf[i / 4] |= (uint32_t)(uint8_t)bw[mma_b_row(i, t) * 8 + g] << 8 * (i % 4);
    shf[threadIdx.x] = ob_shfl(lane, 31 - lane);
    int r[4];
    ob_mma_s8<K>(af, bf, r);
    shf[threadIdx.x] += 100 * ob_shfl_xor(lane, 5);
    for (int i = 0; i < 4; i++)
        c[w * 128 + (i < 2 ? g : g + 8) * 8 + t * 2 + (i & 1)] = r[i];
}

__global__ static void k_mma_short_warp(int *out)
{
    uint32_t af[4] = {1, 2, 3, 4}, bf[2] = {5, 6};
    int r[4];
    ob_mma_s8<32>(af, bf, r);
    out[threadIdx.x] = r[0];
}

__global__ static void k_indices(unsigned *seen)
{
    unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    __atomic_add_fetch(&seen[b * n + t], 1u, __ATOMIC_RELAXED);
}

/* rounds: s[t] = v; barrier; v = s[(t + 1) % n] + round; barrier */
__global__ static void k_rounds(int rounds, int *out)
{
    OB_SHARED(int, s, [1024]);
    int t = (int)threadIdx.x, n = (int)blockDim.x;
    int v = t + 1000 * (int)blockIdx.x;
    for (int r = 0; r < rounds; r++) {
        s[t] = v;
        __syncthreads();
        v = s[(t + 1) % n] + r;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

__global__ static void k_own_shared(int *bad)
{
    OB_SHARED(int, mine, );
    if (threadIdx.x == 0)
        mine = (int)blockIdx.x;
    __syncthreads();
    for (int i = 0; i < 50; i++) {
        if (mine != (int)blockIdx.x)
            __atomic_add_fetch(bad, 1, __ATOMIC_RELAXED);
        __syncthreads();
    }
}

/* each block reads its shared variables before any thread writes them (all-ones bytes, as
 * every block finds them in hrx-sim), then leaves its own values there */
OB_SHARED_FILE(int, file_s, [64]);
__global__ static void k_fresh(int *bad)
{
    OB_SHARED_FRESH(file_s);
    OB_SHARED(int, s, [64]);
    OB_SHARED(float, f, );
    int t = (int)threadIdx.x;
    uint32_t fb;
    memcpy(&fb, &f, 4);
    if (s[t] != -1 || file_s[t] != -1 || fb != 0xffffffffu)
        __atomic_add_fetch(bad, 1, __ATOMIC_RELAXED);
    __syncthreads();
    s[t] = file_s[t] = (int)blockIdx.x;
    if (t == 0)
        f = 1.0f;
}

__global__ static void k_shuffles(int *xor_out, int *src_out, int *isum_out)
{
    int lane = (int)threadIdx.x % 32, w = (int)threadIdx.x / 32, base = (int)threadIdx.x;
    int v = lane * 7 + 100 * w;
    for (int m = 0; m < 32; m++)
        xor_out[base * 32 + m] = ob_shfl_xor(v, m);
    for (int s = 0; s < 32; s++)
        src_out[base * 32 + s] = ob_shfl(v, (s + lane) % 32);
    isum_out[base] = ob_warp_isum(v);
}

__global__ static void k_fold(const float *x, float *out)
{
    out[threadIdx.x] = ob_warp_fold32(x[threadIdx.x]);
}

/* block (x, y) stores 64 values; the last block of row y of the grid sums the row's, thread
 * t its column; thread 0 of each block notes when it ran (order[tick]) */
__global__ static void k_last(unsigned *ctr, int *vals, int *sums, int *lasts, int *order,
                              int *tick)
{
    int x = (int)blockIdx.x, y = (int)blockIdx.y, t = (int)threadIdx.x, gx = (int)gridDim.x;
    if (t == 0)
        order[__atomic_fetch_add(tick, 1, __ATOMIC_RELAXED)] = y * gx + x;
    vals[(y * gx + x) * 64 + t] = 1000 * x + t + 7 * y;
    if (!ob_last_block(ctr + y, (unsigned)gx))
        return;
    if (t == 0)
        __atomic_add_fetch(&lasts[y], 1, __ATOMIC_RELAXED);
    int s = 0;
    for (int i = 0; i < gx; i++)
        s += vals[(y * gx + i) * 64 + t];
    sums[y * 64 + t] = s;
}

/* the order the block's threads start in (first[tick] = t); then, after a barrier, each
 * stores a mark and reads its neighbour's below with no barrier between: what it sees is the
 * order's (read[t]: 1 when the neighbour's store was there) */
__global__ static void k_order(int *first, int *tick, int *read)
{
    OB_SHARED(int, mark, [1024]);
    int t = (int)threadIdx.x;
    first[__atomic_fetch_add(tick, 1, __ATOMIC_RELAXED)] = t;
    mark[t] = 0;
    __syncthreads();
    mark[t] = 1;
    read[t] = t > 0 ? mark[t - 1] : 1;      /* no barrier between: the race the orders tell */
}

__global__ static void k_deep(int *out)
{
    volatile char big[16384];
    for (int i = 0; i < 16384; i++)
        big[i] = (char)(i + (int)threadIdx.x);
    int s = 0;
    for (int i = 0; i < 16384; i += 97)
        s += big[i];
    __syncthreads();
    out[threadIdx.x] = s;
}

__global__ static void k_bar_returned(int *out)
{
    if (threadIdx.x >= 8)
        return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ static void k_bar_diverged(int *out)
{
    if (threadIdx.x % 2)
        __syncthreads();
    out[threadIdx.x] = 1;
    __syncthreads();
}

__global__ static void k_shfl_partial_lanes(int *out)
{
    int v = (int)threadIdx.x;
    if (threadIdx.x % 32 < 16)
        v = ob_shfl_xor(v, 1);
    out[threadIdx.x] = v;
}

__global__ static void k_shfl_short_warp(int *out)
{
    out[threadIdx.x] = ob_shfl_xor((int)threadIdx.x, 1);
}

__global__ static void k_nothing(int *out)
{
    out[threadIdx.x] = (int)threadIdx.x;
}

__global__ static void k_switches(int n, int *out)
{
    int v = (int)threadIdx.x;
    for (int i = 0; i < n; i++)
        __syncthreads();
    out[threadIdx.x] = v;
}

/* ob_cp4 / ob_cp_wait: each thread copies src[t] into the shared word of thread t + 1 (and, in
 * many, 40 words of its own: more than hrx-sim keeps before it performs the first ones) */
__global__ static void k_cp(const uint32_t *src, uint32_t *early, uint32_t *late, int many)
{
    OB_SHARED(uint32_t, buf, [64]);
    OB_SHARED(uint32_t, own, [64 * 40]);
    int t = (int)threadIdx.x, n = (int)blockDim.x;
    buf[t] = 0xdeadu;
    __syncthreads();
    ob_cp4(&buf[(t + 1) % n], &src[t]);
    early[t] = buf[(t + 1) % n];
    for (int i = 0; i < many; i++)
        ob_cp4(&own[t * 40 + i], &src[(t + i) % n]);
    ob_cp_wait();
    __syncthreads();
    late[t] = buf[t];
    for (int i = 0; i < many; i++)
        late[n + t * 40 + i] = own[t * 40 + i];
}

__global__ static void k_cp_unwaited(const uint32_t *src)
{
    OB_SHARED(uint32_t, buf, [64]);
    ob_cp4(&buf[threadIdx.x], &src[threadIdx.x]);
}

/* ---- checks -------------------------------------------------------------------------------------- */

static int launched(const char *k) { return ob_hrx_sim_launched(q, k); }

static void test_indices(void)
{
    dim3 g(3, 2, 2), b(4, 3, 5);
    unsigned n = 12 * 60;
    unsigned *seen = (unsigned *)calloc(n, sizeof *seen);
    OB_LAUNCH(q, k_indices, g, b, seen);
    int e = launched("indices"), bad = 0;
    for (unsigned i = 0; i < n; i++)
        bad += seen[i] != 1;
    ok(!e && !bad, "3-D grid (3,2,2) of 3-D blocks (4,3,5): every thread runs once with its "
       "own indices (%d wrong)", bad);
    free(seen);
}

static void test_barriers(void)
{
    static const int sizes[] = {1, 7, 32, 33, 256, 1000, 1024};
    for (int si = 0; si < 7; si++) {
        int n = sizes[si], blocks = 5, rounds = 9;
        int *out = (int *)malloc(sizeof(int) * n * blocks);
        OB_LAUNCH(q, k_rounds, dim3(blocks), dim3(n), rounds, out);
        int e = launched("rounds"), bad = 0;
        /* the same rounds, serially over the whole block */
        int *vals = (int *)malloc(sizeof(int) * n), *next = (int *)malloc(sizeof(int) * n);
        for (int b = 0; b < blocks; b++) {
            for (int t = 0; t < n; t++)
                vals[t] = t + 1000 * b;
            for (int r = 0; r < rounds; r++) {
                for (int t = 0; t < n; t++)
                    next[t] = vals[(t + 1) % n] + r;
                memcpy(vals, next, sizeof(int) * n);
            }
            for (int t = 0; t < n; t++)
                bad += out[b * n + t] != vals[t];
        }
        ok(!e && !bad, "__syncthreads: %d rounds in %d blocks of %d threads (%d wrong)%s%s",
           rounds, blocks, n, bad, e ? ": " : "", e ? ob_errmsg() : "");
        free(out);
        free(vals);
        free(next);
    }
}

static void test_own_shared(void)
{
    int bad = 0;
    OB_LAUNCH(q, k_own_shared, dim3(64), dim3(96), &bad);
    int e = launched("own_shared");
    ok(!e && !bad, "shared memory is each block's own (64 blocks on 2 host threads: %d "
       "reads of another block's value)", bad);
    bad = 0;
    OB_LAUNCH(q, k_fresh, dim3(64), dim3(64), &bad);
    e = launched("fresh");
    ok(!e && !bad, "each block finds its shared variables all-ones, not the previous block's "
       "values (64 blocks of 64 threads on 2 host threads: %d reads of other bytes)", bad);
}

static void test_shuffles(void)
{
    int n = 128;
    int *xo = (int *)malloc(sizeof(int) * n * 32), *so = (int *)malloc(sizeof(int) * n * 32);
    int *io = (int *)malloc(sizeof(int) * n);
    OB_LAUNCH(q, k_shuffles, dim3(3), dim3(n), xo, so, io);
    int e = launched("shuffles"), bad = 0;
    for (int t = 0; t < n; t++) {
        int lane = t % 32, w = t / 32, sum = 0;
        for (int m = 0; m < 32; m++)
            bad += xo[t * 32 + m] != ((lane ^ m) * 7 + 100 * w);
        for (int s = 0; s < 32; s++)
            bad += so[t * 32 + s] != (((s + lane) % 32) * 7 + 100 * w);
        for (int l = 0; l < 32; l++)
            sum += l * 7 + 100 * w;
        bad += io[t] != sum;
    }
    ok(!e && !bad, "warp shuffles: ob_shfl_xor over every mask, ob_shfl from every lane, "
       "ob_warp_isum, 4 warps a block (%d wrong)", bad);
    free(xo);
    free(so);
    free(io);

    float xs[64], gots[64], p[32], *x = xs, *got = gots;
    uint64_t s = 12345;
    int fbad = 0;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 64; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((int64_t)(s >> 33) - (1ll << 30)) / (float)(1 << (s >> 60));
        }
        OB_LAUNCH(q, k_fold, dim3(1), dim3(64), x, got);
        e |= launched("fold");
        for (int w = 0; w < 2; w++) {
            memcpy(p, x + 32 * w, sizeof p);
            float want = ob_fold32(p);
            for (int l = 0; l < 32; l++)
                fbad += memcmp(&got[32 * w + l], &want, 4) != 0;
        }
    }
    ok(!e && !fbad, "ob_warp_fold32 gives every lane ob_fold32's bits (50 rounds of 2 warps: "
       "%d lanes differ)", fbad);
}

static void test_stack(void)
{
    int outs[64], *out = outs;
    OB_LAUNCH(q, k_deep, dim3(2), dim3(64), out);
    int e = launched("deep");
    ok(!e, "a fiber's stack holds a 16 KiB local array across a barrier%s%s", e ? ": " : "",
       e ? ob_errmsg() : "");
}

/* a bad launch: fails with OB_EINTERNAL, a message naming the kernel and `what` */
static void bad_launch(int e, const char *kernel, const char *what, const char *desc)
{
    const char *m = ob_errmsg();
    ok(e == OB_EINTERNAL && strstr(m, kernel) && strstr(m, what), "%s: reported (%s)", desc, m);
}

static void test_mma(void)
{
    int8_t as[2 * 16 * 32], bs[2 * 32 * 8], *a = as, *b = bs;
    int cs[2 * 128], shs[64], *c = cs, *sh = shs, bad = 0, e = 0;
    uint64_t s = 777;
    for (int round = 0; round < 20; round++)
        for (int K = 16; K <= 32; K += 16) {
            for (int i = 0; i < 2 * 16 * K; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                a[i] = round < 2 ? (int8_t)(round ? 127 : -128) : (int8_t)(s >> 56);
            }
            for (int i = 0; i < 2 * K * 8; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                b[i] = round < 2 ? (int8_t)-128 : (int8_t)(s >> 56);
            }
            if (K == 32)
                OB_LAUNCH(q, k_mma<32>, dim3(1), dim3(64), a, b, c, sh);
            else
                OB_LAUNCH(q, k_mma<16>, dim3(1), dim3(64), a, b, c, sh);
            e |= launched("mma");
            for (int w = 0; w < 2; w++)
                for (int r = 0; r < 16; r++)
                    for (int col = 0; col < 8; col++) {
                        int want = 0;
                        for (int k = 0; k < K; k++)
                            want += a[(w * 16 + r) * K + k] * b[(w * K + k) * 8 + col];
                        bad += c[w * 128 + r * 8 + col] != want;
                    }
            for (int l = 0; l < 64; l++)
                bad += sh[l] != 31 - l % 32 + 100 * ((l % 32) ^ 5);
        }
    ok(!e && !bad, "ob_mma_s8: 16 x 8 int8 products (K 32 and 16, -128 and 127 extremes) by "
       "PTX's fragments, between shuffles, 2 warps a block: %d wrong", bad);
    int outs[48], *out = outs;
    OB_LAUNCH(q, k_mma_short_warp, dim3(1), dim3(48), out);
    bad_launch(launched("x"), "k_mma_short_warp", "warp of 16 threads", "a matrix product in a "
               "warp of 16 threads (a block of 48)");
}

static void test_cp(void)
{
    uint32_t srcs[64], earlys[64], lates[64 + 64 * 40], *src = srcs, *early = earlys, *late = lates;
    int bad = 0, stale = 0, e;
    for (int i = 0; i < 64; i++)
        src[i] = 0x1000u + (uint32_t)i;
    OB_LAUNCH(q, k_cp, dim3(3), dim3(64), (const uint32_t *)src, early, late, 40);
    e = launched("cp");
    for (int t = 0; t < 64; t++) {
        stale += early[t] == 0xdeadu;
        bad += late[t] != src[(t + 63) % 64];
        for (int i = 0; i < 40; i++)
            bad += late[64 + t * 40 + i] != src[(t + i) % 64];
    }
    ok(!e && !bad && stale == 64, "ob_cp4: a copy is in shared memory after the thread's "
       "ob_cp_wait and a barrier, not before (hrx-sim defers it: %d of 64 reads before the wait "
       "saw the old word), 41 copies a thread: %d wrong%s%s", stale, bad, e ? ": " : "",
       e ? ob_errmsg() : "");
    OB_LAUNCH(q, k_cp_unwaited, dim3(1), dim3(64), (const uint32_t *)src);
    bad_launch(launched("x"), "k_cp_unwaited", "not waited for", "a thread that returns with "
               "an asynchronous copy not waited for");
}

/* OB_HRX_SIM_ORDER: the order a pass visits a block's threads in — thread order, the
 * reverse, or scrambled (neighbours far apart) — so that a read of what another thread writes
 * between the same two barriers gives other bits in another order; anything else is refused */
static void test_order(void)
{
    enum { N = 96 };
    static const char *const names[] = {"thread", "reverse", "scramble"};
    for (int o = 0; o < 3; o++) {
        int first[N], read[N], tick = 0, *f = first, *r = read, *tk = &tick, seen[N] = {0};
        int ahead = 0, behind = 0, adjacent = 0, perm = 1, got = 0;
        ob_hrx_q *q2;
        setenv("OB_HRX_SIM_ORDER", names[o], 1);
        int e = ob_hrx_sim_rt.open(0, 1, &q2);
        if (!e) {
            OB_LAUNCH(q2, k_order, dim3(1), dim3(N), f, tk, r);
            e = ob_hrx_sim_launched(q2, "order");
            ob_hrx_sim_rt.close(q2);
        }
        for (int i = 0; i < N && !e; i++) {
            perm &= first[i] >= 0 && first[i] < N && !seen[first[i]]++;
            ahead += first[i] == i;
            behind += first[i] == N - 1 - i;
            adjacent += i > 0 && (first[i] == first[i - 1] + 1 || first[i] == first[i - 1] - 1);
            got += read[i];
        }
        /* after the barrier the last thread in goes on first (95 in thread order, 0 in
         * reverse), then the others in the pass's order */
        bool as_named = o == 0 ? ahead == N && got == N - 1
                      : o == 1 ? behind == N && got == 2
                               : ahead < N / 4 && behind < N / 4 && adjacent == 0 && got > 2 &&
                                     got < N - 1;
        ok(!e && perm && as_named, "OB_HRX_SIM_ORDER=%s: each thread once (%d in thread order, %d "
           "reversed, %d next to a neighbour); %d of %d saw the store of the thread below%s%s",
           names[o], ahead, behind, adjacent, got, N, e ? ": " : "", e ? ob_errmsg() : "");
    }
    setenv("OB_HRX_SIM_ORDER", "backwards", 1);
    ob_hrx_q *q2 = NULL;
    int e = ob_hrx_sim_rt.open(0, 1, &q2);
    ok(e == OB_EUSAGE && !q2 && strstr(ob_errmsg(), "OB_HRX_SIM_ORDER=backwards: not thread, "
       "reverse or scramble"), "OB_HRX_SIM_ORDER=backwards: refused (%s)", ob_errmsg());
    unsetenv("OB_HRX_SIM_ORDER");
}

/* ob_last_block: one block of each group of 37 arrives last, once the others' values are
 * there; the counters are 0 again after the launch (three launches reuse them); the blocks
 * ran in a scrambled order, not the grid's */
static void test_last_block(void)
{
    enum { GX = 37, GY = 5 };
    static int vals[GX * GY * 64], sums[GY * 64], lasts[GY], order[GX * GY];
    int tick = 0, bad = 0, e = 0, nc = 0, rising = 0;
    unsigned *ctr = OB_HRX_FN(counters)(q, &nc);
    for (int run = 0; run < 3 && !e; run++) {
        memset(sums, 0, sizeof sums);
        memset(lasts, 0, sizeof lasts);
        tick = 0;
        OB_LAUNCH(q, k_last, dim3(GX, GY), dim3(64), ctr, vals, sums, lasts, order, &tick);
        if ((e = launched("last")))
            break;
        for (int y = 0; y < GY; y++) {
            bad += lasts[y] != 1 || ctr[y] != 0;
            for (int t = 0; t < 64; t++)
                bad += sums[y * 64 + t] != 1000 * GX * (GX - 1) / 2 + GX * (t + 7 * y);
        }
        for (int i = 1; i < GX * GY; i++)
            rising += order[i] > order[i - 1];
    }
    ok(!e && !bad && nc == OB_HRX_CTRS && rising < 3 * (GX * GY - 1) * 3 / 4,
       "ob_last_block: one last block of each of %d groups of %d sums what the others stored, "
       "and puts its counter back, three launches (%d wrong); blocks in a scrambled order (%d "
       "of %d steps to a higher block)%s%s", GY, GX, bad, rising, 3 * (GX * GY - 1),
       e ? ": " : "", e ? ob_errmsg() : "");
}

static void test_bugs(void)
{
    int outs[2048], *out = outs;
    OB_LAUNCH(q, k_bar_returned, dim3(4), dim3(64), out);
    bad_launch(launched("x"), "k_bar_returned", "returned", "a barrier that threads which "
               "returned never reach");
    OB_LAUNCH(q, k_bar_diverged, dim3(1), dim3(64), out);
    bad_launch(launched("x"), "k_bar_diverged", "wait for each other", "threads at different "
               "barriers");
    OB_LAUNCH(q, k_shfl_partial_lanes, dim3(2), dim3(64), out);
    bad_launch(launched("x"), "k_shfl_partial_lanes", "warp shuffle", "a shuffle half the "
               "lanes of a warp never reach");
    OB_LAUNCH(q, k_shfl_short_warp, dim3(1), dim3(48), out);
    bad_launch(launched("x"), "k_shfl_short_warp", "warp of 16 threads", "a shuffle in a warp "
               "of 16 threads (a block of 48)");
    OB_LAUNCH(q, k_nothing, dim3(1), dim3(1025), out);
    bad_launch(launched("x"), "k_nothing", "1 to 1024 threads", "a block of 1025 threads");
    OB_LAUNCH(q, k_nothing, dim3(0), dim3(32), out);
    bad_launch(launched("x"), "k_nothing", "at least one block", "a grid of no block");
    OB_LAUNCH(q, k_nothing, dim3(2), dim3(1024), out);
    int e = launched("x"), bad = 0;
    for (int i = 0; i < 1024; i++)
        bad += out[i] != i;
    ok(!e && !bad, "after the failed launches the queue runs the next one normally");
}

static void timing(void)
{
    int outs[256], *out = outs, n = 2000;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    OB_LAUNCH(q, k_switches, dim3(1), dim3(256), n, out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("# %d barriers of 256 threads: %.1f ns a thread's wait and resume\n", n,
           s * 1e9 / ((double)n * 256));
    launched("switches");
}

int main(void)
{
    if (ob_hrx_sim_rt.open(0, 2, &q)) {
        printf("Bail out! open: %s\n", ob_errmsg());
        return 1;
    }
    test_indices();
    test_barriers();
    test_own_shared();
    test_shuffles();
    test_mma();
    test_stack();
    test_cp();
    test_last_block();
    test_order();
    test_bugs();
    timing();
    ob_hrx_sim_rt.close(q);
    return tap_done();
}
