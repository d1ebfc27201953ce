/*
 * mm.hip — matrix products of the hrx routes and the quantisation of their activations.
 *
 *   actq    one thread a block: ob_quantize_q8k (256 values) or ob_quantize_a8 (32 values) of
 *           lib/arith/arith.h, or a copy of the floats — the canonical functions themselves
 *   matmul  y[r][i] = ob_dot_<type>(w row i, xq row r) of lib/arith/dot.h, bit for bit
 *
 * The product. A CUDA block of MM_THREADS threads takes a tile of tn weight rows x tr
 * activation rows, the tile's "pairs" (tr = 1 for a decode step, up to 4 for a wide batch or
 * a prefill). Quantised weights, chunk by chunk of cb blocks:
 *   phase 1  K-quants (256 values a block): the block is split in 8 parts of 32 values, and a
 *            thread computes one part's integer sums — sum over its values of scale x q x a,
 *            and of min x (sum of a) — exact in any order, so any split gives ob_blk_<type>'s
 *            integers; neighbouring threads take neighbouring parts of one row (the weight
 *            row is read in order across the warp);
 *   phase 2  a thread adds a block's 8 parts (exact) and computes its float epilogue
 *            operation by operation as ob_blk_<type> does: r_b. The 32-value formats skip
 *            phase 1: a thread computes r_b = ob_blk_<type>(w block, a block) itself;
 *   phase 3  the thread of a pair adds its chunk's r_b into partial b mod 8, in increasing b,
 *            as ob_dot_<type> does;
 * then ob_fold8 of the 8 partials, and the bias added after (one rounding, as the cpu route's
 * separate ob_add_f32). Float weights (F32, F16, BF16): item (pair, j) is ob_dot_f32's partial
 * j, the fmaf chain over elements j, j + 32, ... in increasing order; the pair's thread folds
 * the 32 partials with ob_fold32. No sum is ever split differently from the reference, so no
 * result depends on the tile, the batch or the device.
 *
 * Tiles: on a GPU small (tn = 8 weight rows: a K-quant row of 1024 values is 32 parts, one
 * warp's worth, and a decode step has many blocks for the SMs); on hrx-sim large (tn * tr =
 * 128 pairs: fewer blocks, fewer fiber switches), unless OB_HRX_SIM_TILES=gpu asks for the
 * GPU's (tests/unit/hrx runs both). The kernels are the same; only the launch differs.
 *
 * On a GPU's geometry the quantised products have kernels of their own: k_mv_q (a warp a
 * weight row, up to 8 activation rows a pass) below GM_MIN_ROWS = 16 activation rows, and
 * from there k_gm_q (tiles of 64 weight rows x 32 or 64 activation rows staged in shared
 * memory); OB_HRX_GEMM=0 keeps k_mv_q for every width, OB_HRX_GEMM=N moves the threshold to
 * N rows. k_gm_q takes its integer sums from the tensor cores (ob_mma_s8: mma.sync's int8
 * 16 x 8 tiles, CUDA from sm_80, and hrx-sim) or, on HIP and under OB_HRX_MMA=0, from dp4a;
 * where its tiles are too few for the GPU, a tile's classes of blocks are split over blocks
 * and their partials folded after (k_gm_fold, OB_HRX_SPLIT). Its stages take the words that
 * need no unpacking (the activations', and Q4_K's raw for the tensor cores) by asynchronous
 * copies (ob_cp4: cp.async from sm_80), unless OB_HRX_ASYNC=0. All compute the bits above:
 * integer sums are exact in any order, and the float sums keep the reference's order.
 */
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>

#include "hrx/shim.h"
#include "hrx/warp.h"
#include "arith/dot.h"

/* the result v into *y: the bias b (if bias), then the epilogue (hrx.h: OB_HRX_EPI_*) with
 * y0, *y as it was, each one rounding as the separate ops (ob_add_f32, ob_swiglu, ob_geglu)
 * would do it; b and y0 read by the caller (ahead of time where it pays) */
__device__ static inline void mm_put_v(float *y, float v, float y0, const float *bias, float b,
                                       int op)
{
    if (bias)
        v = v + b;
    if (op == OB_HRX_EPI_ADD)
        v = y0 + v;
    else if (op == OB_HRX_EPI_SILU)
        v = ob_silu(y0) * v;
    else if (op == OB_HRX_EPI_GELU)
        v = ob_gelu(y0) * v;
    *y = v;
}

/* the same for the result of row i, reading bias[i] and *y now */
__device__ static inline void mm_put(float *y, float v, const float *bias, int i, int op)
{
    mm_put_v(y, v, op != OB_HRX_EPI_STORE ? *y : 0.0f, bias, bias ? bias[i] : 0.0f, op);
}

#define MM_THREADS 128             /* threads of a block; pairs of a tile: at most this */
#define MM_ITEMS 2048              /* a chunk's parts (pairs x blocks x parts) in shared memory */

/* ---- activations ---------------------------------------------------------------------------- */

__global__ static void k_actq(int fmt, const float *x, int n, int k, char *xq, size_t stride)
{
    int bl = fmt == OB_HRX_ACT_Q8K ? 256 : fmt == OB_HRX_ACT_A8 ? 32 : 1;
    long nb = k / bl, i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)n * nb)
        return;
    long r = i / nb, b = i % nb;
    const float *src = x + r * k + b * bl;
    char *dst = xq + (size_t)r * stride;
    if (fmt == OB_HRX_ACT_Q8K)
        ob_quantize_q8k(src, (struct ob_block_q8_k *)dst + b, 256);
    else if (fmt == OB_HRX_ACT_A8)
        ob_quantize_a8(src, (struct ob_act_a8 *)dst + b, 32);
    else
        ((float *)dst)[b] = src[0];
}

/* the same on a GPU, a warp a block (warp.h: ob_warp_actq) */
template <int V>
__global__ static void k_actq_w(const float *x, int n, int k, char *xq, size_t stride)
{
    enum { BL = V * OB_WARP };
    int lane = (int)threadIdx.x & (OB_WARP - 1), nb = k / BL;
    long blk = (long)blockIdx.x * (blockDim.x / OB_WARP) + (long)threadIdx.x / OB_WARP;
    if (blk >= (long)n * nb)
        return;                    /* the whole warp */
    long r = blk / nb, b = blk % nb;
    const float *src = x + r * k + b * BL + lane * V;
    float v[V];
    OB_UNROLL
    for (int i = 0; i < V; i++)
        v[i] = src[i];
    ob_warp_actq<V>(v, lane, xq + (size_t)r * stride, (int)b);
}

extern "C" int OB_HRX_FN(actq)(struct ob_hrx_q *q, int fmt, const float *x, int n, int k,
                               void *xq, size_t stride)
{
    int bl = fmt == OB_HRX_ACT_Q8K ? 256 : fmt == OB_HRX_ACT_A8 ? 32 : 1;
    if (k % bl)
        return ob_seterr(OB_EUSAGE, "hrx actq: a row of %d values is not a multiple of %d", k, bl);
    long items = (long)n * (k / bl);
    if (items <= 0)
        return 0;
    if (fmt != OB_HRX_ACT_F32 && !OB_HRX_FN(big_tiles)(q)) {   /* a warp a block, 4 a launch block */
        dim3 grid((unsigned)((items + 3) / 4)), block(4 * OB_WARP);
        if (fmt == OB_HRX_ACT_Q8K)
            OB_LAUNCH(q, k_actq_w<8>, grid, block, x, n, k, (char *)xq, stride);
        else
            OB_LAUNCH(q, k_actq_w<1>, grid, block, x, n, k, (char *)xq, stride);
        return OB_HRX_FN(launched)(q, "actq");
    }
    OB_LAUNCH(q, k_actq, dim3((unsigned)((items + 127) / 128)), dim3(128), fmt, x, n, k,
              (char *)xq, stride);
    return OB_HRX_FN(launched)(q, "actq");
}

/* ---- quantised weights ------------------------------------------------------------------------ */

/* a K-quant block's epilogue operands: d and dmin of the weight block (fp16 bits; Q3_K and
 * Q6_K have no dmin: 0), d of the activation block */
struct mm_eo {
    uint16_t d, dmin;
    float ad;
};

/*
 * A weight type: its block and activation block, values a block (QK), parts a block (S), and
 *   S == 1:  blk(w, a)                      the canonical block value, ob_blk_<type>;
 *   S == 8:  part(w, a, p, &is, &ms)        the integer sums of part p (32 values, 8 of the
 *                                           16-value sub-blocks of Q2_K, Q3_K, Q6_K: two);
 *            epi(eo(w, a), is, ms)          the block value from the summed parts, the float
 *                                           epilogue of ob_blk_<type> operation by operation;
 *                                           eo reads its operands (the block's d and dmin, the
 *                                           activation's d), so that a kernel may read them
 *                                           with the values, before the parts' shuffles.
 * Each part function is the loop body of its ob_blk_<type> (lib/arith/dot.h) for its own
 * sub-blocks.
 */
#define MM_TYPE32(name, wt)                                                              \
    struct t_##name {                                                                    \
        typedef wt W;                                                                    \
        typedef struct ob_act_a8 A;                                                      \
        enum { QK = 32, S = 1 };                                                         \
        __device__ static float blk(const W *w, const A *a) { return ob_blk_##name(w, a); } \
        __device__ static void part(const W *, const A *, int, int *, int *) {}          \
        __device__ static mm_eo eo(const W *, const A *) { return mm_eo(); }             \
        __device__ static float epi(const mm_eo &, int, int) { return 0.0f; }            \
    };
#define MM_A8(NAME, name, id, blck, bytes, ftype) MM_TYPE32(name, struct ob_block_##name)
OB_TYPES_A8(MM_A8)                 /* the 32-value types of the list (types.h) */
#undef MM_A8
#undef MM_TYPE32

#define MM_TYPEK(name)                                                                   \
    typedef struct ob_block_##name W;                                                    \
    typedef struct ob_block_q8_k A;                                                      \
    enum { QK = 256, S = 8 };                                                            \
    __device__ static float blk(const W *w, const A *a) { return 0.0f; }

/* (d_w d_a) isum - (dmin_w d_a) msum */
__device__ static inline float mm_epi_min(uint16_t d, uint16_t dmin, float ad, int is, int ms)
{
    return (ob_fp16_to_f32(d) * ad) * (float)is - (ob_fp16_to_f32(dmin) * ad) * (float)ms;
}

struct t_q2_k {
    MM_TYPEK(q2_k)
    __device__ static void part(const W *w, const A *a, int p, int *is, int *ms)
    {
        int isum = 0, msum = 0;
        for (int k = 2 * p; k < 2 * p + 2; k++) {
            /* values f = 16 k + i: h = f >> 7, sh = (f >> 5) & 3, l = f & 31, fixed but l's i */
            const uint8_t *q = w->qs + (k >> 3) * 32 + 16 * (k & 1);
            const int8_t *x = a->qs + 16 * k;
            int sh = 2 * ((k >> 1) & 3), s = 0;
            for (int i = 0; i < 16; i++)
                s += ((q[i] >> sh) & 3) * x[i];
            isum += (w->scales[k] & 15) * s;
            msum += (w->scales[k] >> 4) * a->bsums[k];
        }
        *is = isum;
        *ms = msum;
    }
    __device__ static mm_eo eo(const W *w, const A *a) { return mm_eo{w->d, w->dmin, a->d}; }
    __device__ static float epi(const mm_eo &e, int is, int ms)
    {
        return mm_epi_min(e.d, e.dmin, e.ad, is, ms);
    }
};

struct t_q3_k {
    MM_TYPEK(q3_k)
    __device__ static void part(const W *w, const A *a, int p, int *is, int *ms)
    {
        int isum = 0;
        for (int k = 2 * p; k < 2 * p + 2; k++) {
            /* as Q2_K's, and the high bit f >> 5 of hmask[l] */
            const uint8_t *q = w->qs + (k >> 3) * 32 + 16 * (k & 1), *m = w->hmask + 16 * (k & 1);
            const int8_t *x = a->qs + 16 * k;
            int sh = 2 * ((k >> 1) & 3), hb = k >> 1, s = 0;
            for (int i = 0; i < 16; i++)
                s += (((q[i] >> sh) & 3) - (((m[i] >> hb) & 1) ? 0 : 4)) * x[i];
            isum += ob_q3k_scale(k, w->scales) * s;
        }
        *is = isum;
        *ms = 0;
    }
    __device__ static mm_eo eo(const W *w, const A *a) { return mm_eo{w->d, 0, a->d}; }
    __device__ static float epi(const mm_eo &e, int is, int ms)
    {
        return (ob_fp16_to_f32(e.d) * e.ad) * (float)is;
    }
};

struct t_q4_k {
    MM_TYPEK(q4_k)
    __device__ static void part(const W *w, const A *a, int j, int *is, int *ms)
    {
        uint8_t sc, m;
        ob_k4_scale_min(j, w->scales, &sc, &m);
        /* values f = 32 j + l: the nibble 4 hi (hi = (f >> 5) & 1) of qs[(f >> 6) 32 + l] */
        const uint8_t *q = w->qs + (j >> 1) * 32;
        const int8_t *x = a->qs + 32 * j;
        int sh = 4 * (j & 1), s = 0;
        for (int l = 0; l < 32; l++)
            s += ((q[l] >> sh) & 15) * x[l];
        *is = sc * s;
        *ms = m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    __device__ static mm_eo eo(const W *w, const A *a) { return mm_eo{w->d, w->dmin, a->d}; }
    __device__ static float epi(const mm_eo &e, int is, int ms)
    {
        return mm_epi_min(e.d, e.dmin, e.ad, is, ms);
    }
};

struct t_q5_k {
    MM_TYPEK(q5_k)
    __device__ static void part(const W *w, const A *a, int j, int *is, int *ms)
    {
        uint8_t sc, m;
        ob_k4_scale_min(j, w->scales, &sc, &m);
        /* as Q4_K's, and the fifth bit j of qh[l] */
        const uint8_t *q = w->qs + (j >> 1) * 32;
        const int8_t *x = a->qs + 32 * j;
        int sh = 4 * (j & 1), s = 0;
        for (int l = 0; l < 32; l++)
            s += (((q[l] >> sh) & 15) + 16 * ((w->qh[l] >> j) & 1)) * x[l];
        *is = sc * s;
        *ms = m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    __device__ static mm_eo eo(const W *w, const A *a) { return mm_eo{w->d, w->dmin, a->d}; }
    __device__ static float epi(const mm_eo &e, int is, int ms)
    {
        return mm_epi_min(e.d, e.dmin, e.ad, is, ms);
    }
};

struct t_q6_k {
    MM_TYPEK(q6_k)
    __device__ static void part(const W *w, const A *a, int p, int *is, int *ms)
    {
        int isum = 0;
        for (int k = 2 * p; k < 2 * p + 2; k++) {
            /* values f = 16 k + i, h = f >> 7, r = f & 127: the low nibble 4 (r >> 6) of
             * ql[64 h + (r & 63)], the high bits 2 (r >> 5) of qh[32 h + (r & 31)] */
            const uint8_t *ql = w->ql + (k >> 3) * 64 + 16 * (k & 3);
            const uint8_t *qh = w->qh + (k >> 3) * 32 + 16 * (k & 1);
            const int8_t *x = a->qs + 16 * k;
            int sl = 4 * ((k >> 2) & 1), sh = 2 * ((k >> 1) & 3), s = 0;
            for (int i = 0; i < 16; i++)
                s += (((ql[i] >> sl) & 15) + 16 * ((qh[i] >> sh) & 3) - 32) * x[i];
            isum += w->scales[k] * s;
        }
        *is = isum;
        *ms = 0;
    }
    __device__ static mm_eo eo(const W *w, const A *a) { return mm_eo{w->d, 0, a->d}; }
    __device__ static float epi(const mm_eo &e, int is, int ms)
    {
        return (ob_fp16_to_f32(e.d) * e.ad) * (float)is;
    }
};
#undef MM_TYPEK

/* tile geometry: tn weight rows x tr activation rows, cb blocks a chunk; tn and cb are powers
 * of two, ltn and lcb their logarithms (an item's indices are then shifts and masks, not
 * divisions, which cost a host core most of k_mm_q's time outside the sums) */
struct mm_tile {
    int tn, tr, cb, ltn, lcb;
};

template <class T>
__global__ static void k_mm_q(struct ob_hrx_mat w, const char *xq, size_t stride, int n,
                              const float *bias, float *y, size_t ldy, int op, struct mm_tile g)
{
    OB_SHARED(int, part_is, [MM_ITEMS]);
    OB_SHARED(int, part_ms, [MM_ITEMS]);
    OB_SHARED(float, rb, [MM_ITEMS]);
    OB_SHARED(float, acc, [MM_THREADS][8]);
    int t = (int)threadIdx.x, pairs = g.tn * g.tr, cb = g.cb, nb = w.k / T::QK;
    int n0 = (int)blockIdx.x * g.tn, r0 = (int)blockIdx.y * g.tr;
    if (t < pairs)
        for (int u = 0; u < 8; u++)
            acc[t][u] = 0.0f;
    for (int b0 = 0; b0 < nb; b0 += cb) {
        int nc = nb - b0 < cb ? nb - b0 : cb;
        if (T::S > 1) {
            for (int it = t; it < pairs * cb * T::S; it += MM_THREADS) {
                int pr = (it / T::S) >> g.lcb, j = (it / T::S) & (cb - 1), p = it % T::S;
                int wn = n0 + (pr & (g.tn - 1)), ar = r0 + (pr >> g.ltn);
                if (j < nc && wn < w.n && ar < n)
                    T::part((const typename T::W *)((const char *)w.data + (size_t)wn * w.row_bytes) + b0 + j,
                            (const typename T::A *)(xq + (size_t)ar * stride) + b0 + j, p,
                            &part_is[it], &part_ms[it]);
            }
            __syncthreads();
        }
        for (int it = t; it < pairs * cb; it += MM_THREADS) {
            int pr = it >> g.lcb, j = it & (cb - 1);
            int wn = n0 + (pr & (g.tn - 1)), ar = r0 + (pr >> g.ltn);
            if (j >= nc || wn >= w.n || ar >= n)
                continue;
            const typename T::W *wb =
                (const typename T::W *)((const char *)w.data + (size_t)wn * w.row_bytes) + b0 + j;
            const typename T::A *ab = (const typename T::A *)(xq + (size_t)ar * stride) + b0 + j;
            if (T::S == 1) {
                rb[it] = T::blk(wb, ab);
            } else {
                int is = 0, ms = 0;
                for (int p = 0; p < T::S; p++) {
                    is += part_is[it * T::S + p];
                    ms += part_ms[it * T::S + p];
                }
                rb[it] = T::epi(T::eo(wb, ab), is, ms);
            }
        }
        __syncthreads();
        if (t < pairs)
            for (int j = 0; j < nc; j++)
                acc[t][(b0 + j) & 7] = acc[t][(b0 + j) & 7] + rb[t * cb + j];
        __syncthreads();
    }
    int my_n = n0 + t % g.tn, my_r = r0 + t / g.tn;
    if (t < pairs && my_n < w.n && my_r < n) {
        float p[8];
        for (int u = 0; u < 8; u++)
            p[u] = acc[t][u];
        float v = ob_fold8(p);
        mm_put(&y[(size_t)my_r * ldy + my_n], v, bias, my_n, op);
    }
}

/* ---- quantised weights on a GPU: a warp a weight row ------------------------------------------------ */

/*
 * The integer sums of part p of a block (mm's phase 1) for TR activation rows at once: the
 * weight's values are read once, as words, and meet each row's activations four bytes at a
 * time (ob_dp4a). The integers are those of T::part (exact in any order); types without a
 * word form below use T::part itself, row by row.
 */
template <class T, int TR>
struct mv_part {
    __device__ static void run(const typename T::W *w, const typename T::A *const *a, int p,
                               int *is, int *ms)
    {
        OB_UNROLL
        for (int r = 0; r < TR; r++)
            T::part(w, a[r], p, &is[r], &ms[r]);
    }
};

/* Q4_K part j: the nibbles (j & 1) of qs[(j >> 1) * 32 ..] against a->qs[32 j ..]; sc and m
 * from ob_k4_scale_min(j) */
template <int TR>
struct mv_part<t_q4_k, TR> {
    __device__ static void run(const struct ob_block_q4_k *w, const struct ob_block_q8_k *const *a,
                               int j, int *is, int *ms)
    {
        uint8_t sc, m;
        ob_k4_scale_min(j, w->scales, &sc, &m);
        const uint8_t *qs = w->qs + (j >> 1) * 32;
        int sh = 4 * (j & 1);
        uint32_t q[8];
        OB_UNROLL
        for (int k = 0; k < 8; k++)
            q[k] = (ob_ld4(qs + 4 * k) >> sh) & 0x0F0F0F0Fu;
        OB_UNROLL
        for (int r = 0; r < TR; r++) {
            const int8_t *x = a[r]->qs + 32 * j;
            int s = 0;
            OB_UNROLL
            for (int k = 0; k < 8; k++)
                s = ob_dp4a((int)q[k], (int)ob_ld4(x + 4 * k), s);
            is[r] = sc * s;
            ms[r] = m * (a[r]->bsums[2 * j] + a[r]->bsums[2 * j + 1]);
        }
    }
};

/* Q6_K part p: values 32 p .. 32 p + 31, sub-blocks 2p and 2p + 1; q = lo + 16 hi in 0..63, so
 * sum (q - 32) a = sum q a - 32 bsums (the block is 210 bytes: halfword-aligned words) */
template <int TR>
struct mv_part<t_q6_k, TR> {
    __device__ static void run(const struct ob_block_q6_k *w, const struct ob_block_q8_k *const *a,
                               int p, int *is, int *ms)
    {
        const uint8_t *ql = w->ql + (p >> 2) * 64 + 32 * (p & 1), *qh = w->qh + (p >> 2) * 32;
        int shl = 4 * ((p >> 1) & 1), shh = 2 * (p & 3);
        uint32_t q[8];
        OB_UNROLL
        for (int k = 0; k < 8; k++)
            q[k] = ((ob_ld4_a2(ql + 4 * k) >> shl) & 0x0F0F0F0Fu) |
                   (((ob_ld4_a2(qh + 4 * k) >> shh) & 0x03030303u) << 4);
        int sc0 = w->scales[2 * p], sc1 = w->scales[2 * p + 1];
        OB_UNROLL
        for (int r = 0; r < TR; r++) {
            const int8_t *x = a[r]->qs + 32 * p;
            int s0 = 0, s1 = 0;
            OB_UNROLL
            for (int k = 0; k < 4; k++) {
                s0 = ob_dp4a((int)q[k], (int)ob_ld4(x + 4 * k), s0);
                s1 = ob_dp4a((int)q[k + 4], (int)ob_ld4(x + 16 + 4 * k), s1);
            }
            is[r] = sc0 * (s0 - 32 * a[r]->bsums[2 * p]) + sc1 * (s1 - 32 * a[r]->bsums[2 * p + 1]);
            ms[r] = 0;
        }
    }
};

/*
 * y[r][i] for TR activation rows r0 .. r0 + TR - 1 (rows past n repeat row n - 1 and are not
 * stored): a warp takes weight row i, MV_WARPS warps a block. In a round the warp covers
 * 32 / S blocks: lane l takes part l % S of block l / S (K-quants: 8 parts of 32 values, so 4
 * blocks; 32-value formats: a block a lane, r_b = ob_blk_<type>). A block's parts are summed
 * by shuffles within their 8 lanes (exact integers), then the epilogue gives r_b (T::epi,
 * ob_blk_<type>'s float operations in its order). Lane u < 8 holds partial u and adds the r_b
 * with b mod 8 = u in increasing b; lane 0 folds the 8 partials (ob_fold8) and adds the bias:
 * ob_dot_<type>'s operations, each with its operands, so the bits of every row are the
 * reference's.
 */
#define MV_WARPS 4

/* ---- what a product's last block does after it (hrx.h: struct ob_hrx_then) ------------------ */

/* ob_hrx_then as the kernels take it: op NONE where the launcher runs it as a launch of its own */
struct mm_then {
    int op;
    unsigned *ctr;                 /* the queue's arrival counters */
    const float *w;
    float eps;
    float *ny;
    int fmt;
    char *xq;
    size_t stride;
};

#define MM_THEN_COLS 256           /* ACTQ: the columns of a group (a Q8_K block, 8 A8 blocks) */

/*
 * NORM_Q at the end of a k_mv_q launch: the last of the gridDim.x blocks of row group
 * blockIdx.y (rows r0 .. r0 + tr - 1 below n) to arrive does rmsnorm_q of those rows of y
 * (k values a row), a warp a row (warp.h's, k_rmsnorm_q's bits). Every thread of the block
 * calls it. Not inlined: one copy, not one in each of k_mv_q's instances.
 */
__device__ static OB_NOINLINE void mm_then_norm(struct mm_then t, const float *y, int k, int r0,
                                                int tr, int n)
{
    if (!ob_last_block(t.ctr + blockIdx.y, gridDim.x))
        return;
    for (int r = (int)threadIdx.x / OB_WARP; r < tr && r0 + r < n; r += MV_WARPS) {
        size_t row = (size_t)(r0 + r);
        if (t.fmt == OB_HRX_ACT_Q8K)
            ob_warp_rmsnorm_q<8>(y + row * k, k, t.w, t.eps, t.ny + row * k, t.xq + row * t.stride);
        else
            ob_warp_rmsnorm_q<1>(y + row * k, k, t.w, t.eps, t.ny + row * k, t.xq + row * t.stride);
    }
}

/*
 * ACTQ at the end of a gated k_mv_multi launch: the last of the blocks that write columns c0 ..
 * c0 + 255 of rows r0 .. r0 + tr - 1 (`per` blocks; counter blockIdx.y * groups + c0 / 256)
 * quantises those columns of those rows of y (rows ldy apart) into xq: one Q8_K block a row,
 * or 8 A8 blocks, a warp a block (ob_warp_actq: k_actq_w's bits). Every thread calls it.
 */
__device__ static OB_NOINLINE void mm_then_actq(struct mm_then t, const float *y, size_t ldy,
                                                int groups, int c0, int per, int r0, int tr,
                                                int n)
{
    if (!ob_last_block(t.ctr + blockIdx.y * (unsigned)groups + (unsigned)(c0 / MM_THEN_COLS),
                       (unsigned)per))
        return;
    int lane = (int)threadIdx.x & (OB_WARP - 1), sub = t.fmt == OB_HRX_ACT_Q8K ? 1 : 8;
    for (int task = (int)threadIdx.x / OB_WARP; task < tr * sub; task += MV_WARPS) {
        int r = task / sub, s = task % sub;
        if (r0 + r >= n)
            break;                 /* the warp's later tasks are later rows */
        const float *src = y + (size_t)(r0 + r) * ldy + c0;
        char *row = t.xq + (size_t)(r0 + r) * t.stride;
        if (t.fmt == OB_HRX_ACT_Q8K) {
            float v[8];
            OB_UNROLL
            for (int i = 0; i < 8; i++)
                v[i] = src[lane * 8 + i];
            ob_warp_actq<8>(v, lane, row, c0 / 256);
        } else {
            float v[1] = {src[32 * s + lane]};
            ob_warp_actq<1>(v, lane, row, c0 / 32 + s);
        }
    }
}

/* the loop of k_mv_q: weight row wr (nb blocks) against activation rows ar[0 .. TR); lane u < 8
 * ends with partial u of each row in acc[r] (every lane of the warp must call it) */
template <class T, int TR>
__device__ static inline void mv_acc(const typename T::W *wr, int nb,
                                     const typename T::A *const *ar, int lane, float *acc)
{
    typedef typename T::A A;
    enum { S = T::S, BPR = OB_WARP / T::S };
    int g = lane / S, p = lane % S;
    OB_UNROLL
    for (int r = 0; r < TR; r++)
        acc[r] = 0.0f;
    for (int b0 = 0; b0 < nb; b0 += BPR) {
        int b = b0 + g;
        bool live = b < nb;
        float rb[TR];
        if (S == 1) {
            OB_UNROLL
            for (int r = 0; r < TR; r++)
                rb[r] = live ? T::blk(wr + b, ar[r] + b) : 0.0f;
        } else {
            int is[TR], ms[TR];
            mm_eo e[TR];
            if (live) {
                const A *ab[TR];
                OB_UNROLL
                for (int r = 0; r < TR; r++) {
                    ab[r] = ar[r] + b;
                    e[r] = T::eo(wr + b, ab[r]);   /* read with the values, not after the shuffles */
                }
                mv_part<T, TR>::run(wr + b, ab, p, is, ms);
            } else {
                OB_UNROLL
                for (int r = 0; r < TR; r++)
                    is[r] = ms[r] = 0;
            }
            OB_UNROLL
            for (int r = 0; r < TR; r++) {
                OB_UNROLL
                for (int s = 1; s < S; s <<= 1) {
                    is[r] += ob_shfl_xor(is[r], s);
                    ms[r] += ob_shfl_xor(ms[r], s);
                }
                rb[r] = live ? T::epi(e[r], is[r], ms[r]) : 0.0f;
            }
        }
        /* partial u (lane u < 8) takes this round's blocks b = u mod 8, in increasing b */
        if (S == 1) {               /* 32 blocks: u, u + 8, u + 16, u + 24 */
            OB_UNROLL
            for (int m8 = 0; m8 < 4; m8++) {
                int src = (lane & 7) + 8 * m8;
                OB_UNROLL
                for (int r = 0; r < TR; r++) {
                    float v = ob_shfl(rb[r], src);
                    if (lane < 8 && b0 + src < nb)
                        acc[r] = acc[r] + v;
                }
            }
        } else {                    /* 4 blocks, b0 a multiple of 4: partials (b0 & 7) .. + 3 */
            int src = lane & 3;
            bool mine = lane < 8 && (lane >> 2) == ((b0 >> 2) & 1) && b0 + src < nb;
            OB_UNROLL
            for (int r = 0; r < TR; r++) {
                float v = ob_shfl(rb[r], src * S);
                if (mine)
                    acc[r] = acc[r] + v;
            }
        }
    }
}

template <class T, int TR>
__device__ static inline void mv_row(const struct ob_hrx_mat &w, const char *xq, size_t stride,
                                     int n, const float *bias, float *y, size_t ldy, int op,
                                     int wn, int r0)
{
    typedef typename T::W W;
    typedef typename T::A A;
    int lane = (int)threadIdx.x & (OB_WARP - 1);
    int nb = w.k / T::QK;
    const W *wr = (const W *)((const char *)w.data + (size_t)wn * w.row_bytes);
    const A *ar[TR];
    float acc[TR], b0 = 0.0f, y0[TR];
    OB_UNROLL
    for (int r = 0; r < TR; r++)
        ar[r] = (const A *)(xq + (size_t)(r0 + r < n ? r0 + r : n - 1) * stride);
    /* lane 0's bias and y (for the epilogue op) read now, beside the weights, rather than
     * after the row's shuffles: one wait for memory less a launch (decode's are mostly that) */
    OB_UNROLL
    for (int r = 0; r < TR; r++)
        y0[r] = lane == 0 && op != OB_HRX_EPI_STORE && r0 + r < n ? y[(size_t)(r0 + r) * ldy + wn]
                                                               : 0.0f;
    if (lane == 0 && bias)
        b0 = bias[wn];
    mv_acc<T, TR>(wr, nb, ar, lane, acc);
    OB_UNROLL
    for (int r = 0; r < TR; r++) {
        float pp[8];
        OB_UNROLL
        for (int u = 0; u < 8; u++)
            pp[u] = ob_shfl(acc[r], u);
        if (lane == 0 && r0 + r < n) {
            float v = ob_fold8(pp);
            mm_put_v(&y[(size_t)(r0 + r) * ldy + wn], v, y0[r], bias, b0, op);
        }
    }
}

template <class T, int TR>
__global__ static void k_mv_q(struct ob_hrx_mat w, const char *xq, size_t stride, int n,
                              const float *bias, float *y, size_t ldy, int op, struct mm_then t)
{
    int wn = (int)blockIdx.x * MV_WARPS + (int)threadIdx.x / OB_WARP, r0 = (int)blockIdx.y * TR;
    if (wn < w.n)                  /* the whole warp: no shuffle is left half-reached */
        mv_row<T, TR>(w, xq, stride, n, bias, y, ldy, op, wn, r0);
    if (t.op == OB_HRX_THEN_NORM_Q)
        mm_then_norm(t, y, w.n, r0, TR, n);
}

/* a quantised type: one k_mv_q and k_gm_q take */
static bool mm_quant(uint32_t type)
{
    switch (type) {
#define MM_Q(NAME, name, id, blck, bytes, ftype) case OB_##NAME: return true;
    OB_TYPES_QUANT(MM_Q)
#undef MM_Q
    }
    return false;
}

/* activation rows a pass of k_mv_q and k_mv_multi */
static int mv_tr(int n) { return n >= 5 ? 8 : n >= 3 ? 4 : n; }

template <class T>
static void mv_launch(struct ob_hrx_q *q, struct ob_hrx_mat w, const char *x, size_t stride,
                      int n, const float *b, float *y, size_t ldy, int op, struct mm_then t)
{
    int tr = mv_tr(n);
    dim3 grid((unsigned)((w.n + MV_WARPS - 1) / MV_WARPS), (unsigned)((n + tr - 1) / tr));
    dim3 block(MV_WARPS * OB_WARP);
#define MV_K(T, TR) k_mv_q<T, TR>  /* one macro argument for the template's two */
    switch (tr) {
    case 1: OB_LAUNCH(q, MV_K(T, 1), grid, block, w, x, stride, n, b, y, ldy, op, t); break;
    case 2: OB_LAUNCH(q, MV_K(T, 2), grid, block, w, x, stride, n, b, y, ldy, op, t); break;
    case 4: OB_LAUNCH(q, MV_K(T, 4), grid, block, w, x, stride, n, b, y, ldy, op, t); break;
    default: OB_LAUNCH(q, MV_K(T, 8), grid, block, w, x, stride, n, b, y, ldy, op, t); break;
    }
#undef MV_K
}

/*
 * `then` as a kernel takes it where its launch of `groups` counters can do it: a GPU's
 * geometry, the queue's counters there and enough of them, rows (k values) in whole units of
 * `unit` columns; else op NONE, and then_after runs it as a launch of its own.
 */
static struct mm_then then_in(struct ob_hrx_q *q, const struct ob_hrx_then *then, int k,
                              long groups, int unit)
{
    struct mm_then t = {OB_HRX_THEN_NONE, NULL, NULL, 0.0f, NULL, 0, NULL, 0};
    int nc = 0;
    unsigned *ctr = OB_HRX_FN(counters)(q, &nc);
    if (!then || then->op == OB_HRX_THEN_NONE || !ctr || groups > nc ||
        OB_HRX_FN(big_tiles)(q) || k % unit ||
        (then->fmt != OB_HRX_ACT_Q8K && then->fmt != OB_HRX_ACT_A8))
        return t;
    t.op = then->op;
    t.ctr = ctr;
    t.w = then->w;
    t.eps = then->eps;
    t.ny = then->ny;
    t.fmt = then->fmt;
    t.xq = (char *)then->xq;
    t.stride = then->stride;
    return t;
}

/* `then` after a product whose launch did not do it: y's n rows of k values */
static int then_after(struct ob_hrx_q *q, const struct ob_hrx_then *then, float *y, int n, int k)
{
    if (then->op == OB_HRX_THEN_NORM_Q)
        return OB_HRX_FN(rmsnorm_q)(q, y, n, k, then->w, then->eps, then->ny, then->fmt,
                                    then->xq, then->stride);
    return OB_HRX_FN(actq)(q, then->fmt, y, n, k, then->xq, then->stride);
}

/* `then` is one these products can take: y's rows k values apart; NORM_Q after the
 * residual add only where `norm` */
static int then_check(const char *fn, const struct ob_hrx_then *then, size_t ldy, int k,
                      bool norm)
{
    if (!then || then->op == OB_HRX_THEN_NONE)
        return 0;
    if ((then->op != OB_HRX_THEN_NORM_Q && then->op != OB_HRX_THEN_ACTQ) ||
        (then->op == OB_HRX_THEN_NORM_Q && !norm) || ldy != (size_t)k)
        return ob_seterr(OB_EUSAGE, "hrx %s: then %d after rows %zu apart of %d values", fn,
                         then->op, ldy, k);
    return 0;
}

/* the name of a product's launch in OB_HRX_PROFILE's table, with what its last block did */
static const char *then_tag(struct mm_then t)
{
    return t.op == OB_HRX_THEN_NORM_Q ? " +norm_q" : t.op == OB_HRX_THEN_ACTQ ? " +actq" : "";
}

/* ---- several matrices of one launch (matmul_multi) ------------------------------------------ */

/*
 * Up to 3 matrices of one type and k against the same activation rows (hrx.h: matmul_multi):
 * each warp takes one weight row of one matrix and computes it as k_mv_q does (mv_acc, then
 * ob_fold8 and the bias), so every value has a matmul launch's bits.
 *   op STORE   the warps of a launch run over the rows of w[0], then w[1], then w[2]; a warp
 *              finds its matrix from its row index and stores as k_mv_q does
 *   op SILU, GELU  (gate w[0], up w[1], the same n) a block's warps 0 and 1 take gate rows
 *              i, i + 1, warps 2 and 3 the same rows of up; the up warp's value (bias added)
 *              goes through shared memory, and the gate warp stores act(gate) * up into y[0]:
 *              the roundings of matmul(gate, STORE) then matmul(up, op) (mm_put)
 * Rows past n repeat row n - 1 and are not stored, as in k_mv_q.
 */
#define MV_MULTI_ROWS 16           /* wider batches: a matmul launch a matrix (matmul's dispatch) */

template <class X>
__device__ static inline X mv_pick(int j, X a, X b, X c)
{
    return j == 0 ? a : j == 1 ? b : c;
}

/* ROPE_KV (hrx.h's ob_hrx_then) as k_mv_multi takes it: on 0 where another launch does it */
struct mm_rope {
    int on;
    unsigned *ctr;
    int heads[OB_HRX_MULTI];       /* heads of each matrix (n / hd) */
    int nheads;                    /* of all of them */
    int role[OB_HRX_MULTI];        /* 0 q, 1 k, 2 v */
    struct ob_hrx_rope r;
    const int32_t *pos, *seq;
    int n_ctx;
    uint16_t *kc, *vc;
};

/* head `head` (counting through the matrices in order) of row i by one warp: rope_kv's work
 * for it (warp.h: ob_warp_rope, ob_warp_fp16); every lane calls it */
__device__ static inline void mm_rope_head(const struct ob_hrx_multi &m, const struct mm_rope &p,
                                           int head, int i, int lane)
{
    int j = 0, hd = p.r.hd;
    while (j < m.count - 1 && head >= p.heads[j])
        head -= p.heads[j++];
    float *x = mv_pick(j, m.y[0], m.y[1], m.y[2]) + (size_t)i * mv_pick(j, m.ldy[0], m.ldy[1], m.ldy[2]) +
               (size_t)head * hd;
    size_t at = ((size_t)p.seq[i] * p.n_ctx + (size_t)p.pos[i]) * (size_t)(p.r.n_head_kv * hd) +
                (size_t)head * hd;
    int role = mv_pick(j, p.role[0], p.role[1], p.role[2]);
    if (role == 2)
        ob_warp_fp16(x, p.vc + at, hd, lane);
    else
        ob_warp_rope(p.r, x, role ? p.r.k_norm : p.r.q_norm, p.pos[i], role ? p.kc + at : NULL,
                     lane);
}

/* ROPE_KV at the end of a k_mv_multi launch: the last of a head's hd / 4 blocks (counter
 * blockIdx.y * nheads + head) does rows r0 .. r0 + tr - 1 of that head, a warp a row */
__device__ static OB_NOINLINE void mm_then_rope(struct ob_hrx_multi m, struct mm_rope p, int r0,
                                                int tr, int n)
{
    int head = (int)blockIdx.x * MV_WARPS / p.r.hd;
    if (!ob_last_block(p.ctr + blockIdx.y * (unsigned)p.nheads + (unsigned)head,
                       (unsigned)(p.r.hd / MV_WARPS)))
        return;
    for (int r = (int)threadIdx.x / OB_WARP; r < tr && r0 + r < n; r += MV_WARPS)
        mm_rope_head(m, p, head, r0 + r, (int)threadIdx.x & (OB_WARP - 1));
}

/* the same as a launch of its own, a warp a (row, head) (the products made elsewhere) */
__global__ static void k_rope_heads(struct ob_hrx_multi m, struct mm_rope p, int n)
{
    long wi = (long)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP;
    if (wi >= (long)n * p.nheads)
        return;                    /* the whole warp */
    mm_rope_head(m, p, (int)(wi % p.nheads), (int)(wi / p.nheads), (int)threadIdx.x & (OB_WARP - 1));
}

template <class T, int TR>
__global__ static void k_mv_multi(struct ob_hrx_multi m, const char *xq, size_t stride, int n,
                                  int op, struct mm_then t, struct mm_rope rp)
{
    typedef typename T::W W;
    typedef typename T::A A;
    enum { HALF = MV_WARPS / 2 };
    OB_SHARED(float, up, [HALF][TR]);
    int lane = (int)threadIdx.x & (OB_WARP - 1), warp = (int)threadIdx.x / OB_WARP;
    int r0 = (int)blockIdx.y * TR, i, j;
    if (op == OB_HRX_EPI_STORE) {
        i = (int)blockIdx.x * MV_WARPS + warp;
        for (j = 0; j < m.count - 1 && i >= mv_pick(j, m.w[0].n, m.w[1].n, m.w[2].n); j++)
            i -= mv_pick(j, m.w[0].n, m.w[1].n, m.w[2].n);
    } else {
        i = (int)blockIdx.x * HALF + warp % HALF;
        j = warp / HALF;
    }
    struct ob_hrx_mat w = mv_pick(j, m.w[0], m.w[1], m.w[2]);
    const float *bias = mv_pick(j, m.b[0], m.b[1], m.b[2]);
    bool live = i < w.n;           /* else the whole warp skips the product: no shuffle is
                                    * left half-reached, and the block's barriers are */
    float v[TR];                   /* row i's values (a dead warp of a gated launch: none) */
    OB_UNROLL
    for (int r = 0; r < TR; r++)
        v[r] = 0.0f;
    if (live) {
        const W *wr = (const W *)((const char *)w.data + (size_t)i * w.row_bytes);
        const A *ar[TR];
        float acc[TR];
        OB_UNROLL
        for (int r = 0; r < TR; r++)
            ar[r] = (const A *)(xq + (size_t)(r0 + r < n ? r0 + r : n - 1) * stride);
        mv_acc<T, TR>(wr, w.k / T::QK, ar, lane, acc);
        OB_UNROLL
        for (int r = 0; r < TR; r++) {
            float pp[8];
            OB_UNROLL
            for (int u = 0; u < 8; u++)
                pp[u] = ob_shfl(acc[r], u);
            v[r] = ob_fold8(pp);
            if (bias)
                v[r] = v[r] + bias[i];
        }
    }
    if (op == OB_HRX_EPI_STORE) {
        float *y = mv_pick(j, m.y[0], m.y[1], m.y[2]);
        size_t ldy = mv_pick(j, m.ldy[0], m.ldy[1], m.ldy[2]);
        OB_UNROLL
        for (int r = 0; r < TR; r++)
            if (live && lane == 0 && r0 + r < n)
                y[(size_t)(r0 + r) * ldy + i] = v[r];
        if (rp.on)
            mm_then_rope(m, rp, r0, TR, n);
        return;
    }
    if (live && j == 1 && lane == 0) {
        OB_UNROLL
        for (int r = 0; r < TR; r++)
            up[warp % HALF][r] = v[r];
    }
    __syncthreads();
    if (live && j == 0 && lane == 0) {
        OB_UNROLL
        for (int r = 0; r < TR; r++) {
            float g = v[r], u = up[warp % HALF][r];     /* mm_put's act(*y) * v */
            if (r0 + r < n)
                m.y[0][(size_t)(r0 + r) * m.ldy[0] + i] =
                    op == OB_HRX_EPI_SILU ? ob_silu(g) * u : ob_gelu(g) * u;
        }
    }
    if (t.op == OB_HRX_THEN_ACTQ)
        mm_then_actq(t, m.y[0], m.ldy[0], m.w[0].n / MM_THEN_COLS,
                     (int)blockIdx.x * HALF / MM_THEN_COLS * MM_THEN_COLS, MM_THEN_COLS / HALF,
                     r0, TR, n);
}

/*
 * ROPE_KV's `then` as k_mv_multi takes it (*p; *e an error for a `then` that does not fit m):
 * on where the launch of `groups` row groups can do it (`one`: a launch of k_mv_multi; the
 * queue's counters, enough of them; heads of a multiple of 4 rows, so that no block takes
 * two), else off and rope_after runs it
 */
static struct mm_rope rope_in(struct ob_hrx_q *q, const struct ob_hrx_then *then,
                              const struct ob_hrx_multi &m, bool one, long groups, int *e)
{
    struct mm_rope p;
    memset(&p, 0, sizeof p);
    p.r = then->r;
    p.pos = then->pos;
    p.seq = then->seq;
    p.n_ctx = then->n_ctx;
    p.kc = then->kc;
    p.vc = then->vc;
    *e = 0;
    for (int j = 0; j < m.count; j++) {
        int role = then->role[j], heads = role == 0 ? p.r.n_head : p.r.n_head_kv;
        if (role < 0 || role > 2 || p.r.hd <= 0 || m.w[j].n != heads * p.r.hd) {
            *e = ob_seterr(OB_EUSAGE, "hrx matmul_multi: matrix %d of %d rows is not the heads "
                           "of role %d (%d values a head)", j, m.w[j].n, role, p.r.hd);
            return p;
        }
        p.role[j] = role;
        p.heads[j] = heads;
        p.nheads += heads;
    }
    int nc = 0;
    unsigned *ctr = OB_HRX_FN(counters)(q, &nc);
    if (one && ctr && groups * p.nheads <= nc && p.r.hd % MV_WARPS == 0) {
        p.on = 1;
        p.ctr = ctr;
    }
    return p;
}

/* ROPE_KV after products that did not do it: a launch of its own, a warp a (row, head) */
static int rope_after(struct ob_hrx_q *q, const struct ob_hrx_multi &m, struct mm_rope p, int n)
{
    long warps = (long)n * p.nheads;
    p.on = 0;
    OB_LAUNCH(q, k_rope_heads, dim3((unsigned)((warps + MV_WARPS - 1) / MV_WARPS)),
              dim3(MV_WARPS * OB_WARP), m, p, n);
    return OB_HRX_FN(launched)(q, "rope_kv");
}

template <class T>
static void mvm_launch(struct ob_hrx_q *q, const struct ob_hrx_multi &m, const char *x,
                       size_t stride, int n, int op, struct mm_then t, struct mm_rope rp)
{
    int tr = mv_tr(n);
    long rows = op == OB_HRX_EPI_STORE ? 0 : m.w[0].n;
    if (op == OB_HRX_EPI_STORE)
        for (int j = 0; j < m.count; j++)
            rows += m.w[j].n;
    int per = op == OB_HRX_EPI_STORE ? MV_WARPS : MV_WARPS / 2;
    dim3 grid((unsigned)((rows + per - 1) / per), (unsigned)((n + tr - 1) / tr));
    dim3 block(MV_WARPS * OB_WARP);
#define MVM_K(T, TR) k_mv_multi<T, TR>
    switch (tr) {
    case 1: OB_LAUNCH(q, MVM_K(T, 1), grid, block, m, x, stride, n, op, t, rp); break;
    case 2: OB_LAUNCH(q, MVM_K(T, 2), grid, block, m, x, stride, n, op, t, rp); break;
    case 4: OB_LAUNCH(q, MVM_K(T, 4), grid, block, m, x, stride, n, op, t, rp); break;
    default: OB_LAUNCH(q, MVM_K(T, 8), grid, block, m, x, stride, n, op, t, rp); break;
    }
#undef MVM_K
}

extern "C" int OB_HRX_FN(matmul_multi)(struct ob_hrx_q *q, struct ob_hrx_multi m,
                                       const void *xq, size_t stride, int n, int op,
                                       const struct ob_hrx_then *then)
{
    bool glu = op == OB_HRX_EPI_SILU || op == OB_HRX_EPI_GELU;
    if (m.count < 1 || m.count > OB_HRX_MULTI || (op != OB_HRX_EPI_STORE && !glu) ||
        (glu && (m.count != 2 || m.w[0].n != m.w[1].n)))
        return ob_seterr(OB_EUSAGE, "hrx matmul_multi: %d matrices, op %d", m.count, op);
    bool rope = then && then->op == OB_HRX_THEN_ROPE_KV;
    bool after = then && then->op != OB_HRX_THEN_NONE && !rope;
    if ((after && !glu) || (rope && glu))
        return ob_seterr(OB_EUSAGE, "hrx matmul_multi: then %d with op %d", then->op, op);
    int e = rope ? 0 : then_check("matmul_multi", then, m.ldy[0], m.w[0].n, false);
    if (e)
        return e;
    int rows = 0;
    for (int j = 0; j < m.count; j++)
        rows += m.w[j].n;
    bool one = !OB_HRX_FN(big_tiles)(q) && n <= MV_MULTI_ROWS && mm_quant(m.w[0].type);
    for (int j = 1; j < m.count; j++)
        one = one && m.w[j].type == m.w[0].type && m.w[j].k == m.w[0].k;
    int tr = mv_tr(n);
    struct mm_rope rp;
    memset(&rp, 0, sizeof rp);
    if (rope) {
        rp = rope_in(q, then, m, one, (long)((n + tr - 1) / tr), &e);
        if (e)
            return e;
    }
    if (n <= 0 || rows <= 0)
        return 0;
    if (!one) {                    /* a matmul launch a matrix, as the ops one by one */
        for (int j = 0; j < m.count && !e; j++)
            e = OB_HRX_FN(matmul)(q, m.w[j], xq, stride, n, m.b[j], glu ? m.y[0] : m.y[j],
                                  glu ? m.ldy[0] : m.ldy[j], glu && j ? op : OB_HRX_EPI_STORE,
                                  NULL);
        if (e)
            return e;
        return after ? then_after(q, then, m.y[0], n, m.w[0].n)
               : rope ? rope_after(q, m, rp, n)
                      : 0;
    }
    const char *x = (const char *)xq;
    struct mm_then t = then_in(q, after ? then : NULL, m.w[0].n,
                               (long)((n + tr - 1) / tr) * (m.w[0].n / MM_THEN_COLS), MM_THEN_COLS);
    switch (m.w[0].type) {
#define MM_Q(NAME, name, id, blck, bytes, ftype)                                        \
    case OB_##NAME: mvm_launch<t_##name>(q, m, x, stride, n, op, t, rp); break;
    OB_TYPES_QUANT(MM_Q)
#undef MM_Q
    }
    if (!OB_HRX_FN(profiling)(q)) {
        e = OB_HRX_FN(launched)(q, glu ? "matmul_glu" : "matmul_multi");
    } else {
        char name[64];             /* its own line in OB_HRX_PROFILE's table */
        snprintf(name, sizeof name, "matmul %s %s %dx%d %s%s", glu ? "glu" : "multi",
                 ob_type_name(m.w[0].type), rows, m.w[0].k,
                 n == 1 ? "w1" : n <= 8 ? "w2-8" : "w9+", rp.on ? " +rope_kv" : then_tag(t));
        e = OB_HRX_FN(launched)(q, name);
    }
    if (e)
        return e;
    if (after && !t.op)            /* not done by the launch's last blocks: a launch after */
        return then_after(q, then, m.y[0], n, m.w[0].n);
    return rope && !rp.on ? rope_after(q, m, rp, n) : 0;
}

/* ---- quantised weights on a GPU, many activation rows: tiles in shared memory ---------------- */

/*
 * y[r][i] for GM_MIN_ROWS or more activation rows (matmul, below): a block of GM_THREADS threads
 * takes GM_TN = 64 weight rows x TR = 16 J activation rows (J = 2 or 4), thread (tx, ty) =
 * (t % 16, t / 16) the 4 x J outputs of weight rows tx + 16 i and activation rows ty + 16 j.
 *
 * Stages of 256 values: one block of a K-quant, or 8 blocks of a 32-value format. The block
 * loads a stage of its 64 weight rows and TR activation rows into shared memory (neighbouring
 * threads read neighbouring words of a row), the weights unpacked to one int8 a value (Q4_K's
 * nibbles, Q6_K's q - 32, ...: the very integers of ob_blk_<type>) beside each block's scales,
 * mins and d; activations as they are (Q8_K or A8 quants, bsums or sum, d). A thread's integer
 * sums then take each value word once for its 4 x J pairs through ob_dp4a (exact in any order:
 * ob_blk_<type>'s isum and msum), and the float epilogue is ob_blk_<type>'s, operation by
 * operation: r_b.
 *
 * The order of the floats is ob_dot_<type>'s. Block b goes to partial b mod 8 in increasing b,
 * and the stages run class by class, u = 0, 4, 2, 6, 1, 5, 3, 7, each class's blocks in
 * increasing b, so that a thread holds one running partial P and three folded values a pair
 * (not eight partials): ob_fold8 adds p0 + p4, p2 + p6, their sum, p1 + p5, p3 + p7, their
 * sum, and the two sums, in that order and with those operands, and each is added as soon as
 * its operands are complete (gm_fold). An empty class is a partial of 0.0f, as the
 * reference's. The bias and the epilogue op follow (mm_put).
 *
 * Rows past the matrix or the batch read the last row (clamped) and are not stored. Shared
 * rows are GM_LD = 65 words, so the 16 weight rows a warp reads and its 2 activation rows
 * fall in distinct banks.
 */
#define GM_TN 64                   /* weight rows a block */
#define GM_THREADS 256             /* 16 x 16 threads */
#define GM_WORDS 64                /* a stage: 256 int8 values a row, 64 words */
#define GM_LD (GM_WORDS + 1)       /* words of a row in shared memory: dp4a's */
#define GM_LDM (GM_WORDS + 4)      /* the same for the tensor cores' fragments */
#define GM_OLD (GM_TN + 4)         /* a row of a tile's results in shared memory */
#define GM_MIN_ROWS 16             /* matmul takes these tiles from this many activation rows */

/*
 * A type's unpacking (G):
 *   T                     its mm traits (W, A)
 *   CB                    blocks a stage (256 / QK)
 *   NG, SC                scale groups a block (of 256 / CB / NG values each); SC: a group
 *                         multiplies its sum by its scale (K-quants), else NG = 1 and no scale
 *   NM                    min groups a block (K-quants with a min: their msum), else 0
 *   UNITS, unpack(w, u, o)  unit u (0 .. UNITS - 1) of block w into the block's value words o
 *   wmeta(w, c, m)        block c of the stage's scales, mins and floats into m[slot * GM_TN]
 *   ameta(a, c, m, ld)    activation block c's sums and d into m[slot * ld]
 *   epi(dw, mw, ad, is, ms)  r_b from the block's floats and integers, ob_blk_<type>'s order
 * Meta slots: K-quants: weights g = scale g, 16 = d, 17 = dmin, 18 + e = mins 4 e .. 4 e + 3
 * as int8 bytes; activations: the bsums of min group g (Q4_K, Q5_K: of its two sub-blocks),
 * bs_g = 128 hi_g + lo_g with lo_g in 0..127 (and hi_g in -32..32: a sum of at most 32 int8
 * quants), as bytes: e = hi of groups 4 e .., 4 + e = lo (so msum = 128 dp4a(m, hi) +
 * dp4a(m, lo), the same integer), 16 = d. 32-value formats: weights c = d, 8 + c = m of
 * block c; activations c = sum, 8 + c = d of block c. Floats as their bits.
 */
#define GM_WSLOTS 22
#define GM_ASLOTS 17

__device__ static inline uint32_t gm_pack(int v0, int v1, int v2, int v3)
{
    return (uint32_t)(v0 & 255) | (uint32_t)(v1 & 255) << 8 | (uint32_t)(v2 & 255) << 16 |
           (uint32_t)(v3 & 255) << 24;
}

/* the generic unit: one word, 4 values from G::val */
template <class G>
__device__ static inline void gm_unpack_val(const typename G::T::W *w, int u, uint32_t *o)
{
    o[u] = gm_pack(G::val(w, 4 * u), G::val(w, 4 * u + 1), G::val(w, 4 * u + 2),
                   G::val(w, 4 * u + 3));
}

/* K-quants: one block a stage */
#define GM_K(name, ng, nm)                                                               \
    typedef t_##name T;                                                                  \
    typedef T::W W;                                                                      \
    enum { CB = 1, NG = ng, SC = 1, NM = nm };                                           \
    __device__ static int wd_slot(int) { return 16; }                                    \
    __device__ static int wm_slot(int) { return 17; }                                    \
    __device__ static int ad_slot(int) { return 16; }                                    \
    __device__ static void ameta(const struct ob_block_q8_k *a, int, uint32_t *m, int ld) \
    {                                                                                    \
        for (int q = 0; q < NM / 4; q++) {                                               \
            int hi[4], lo[4];                                                            \
            for (int e = 0; e < 4; e++) {                                                \
                int g = 4 * q + e, bs = NM == 8 ? a->bsums[2 * g] + a->bsums[2 * g + 1]  \
                                                : a->bsums[g];                           \
                lo[e] = bs & 127;                                                        \
                hi[e] = (bs - lo[e]) / 128;                                              \
            }                                                                            \
            m[q * ld] = gm_pack(hi[0], hi[1], hi[2], hi[3]);                             \
            m[(4 + q) * ld] = gm_pack(lo[0], lo[1], lo[2], lo[3]);                       \
        }                                                                                \
        m[16 * ld] = ob_f32_bits(a->d);                                                  \
    }                                                                                    \
    __device__ static float epi(float dw, float mw, float ad, int is, int ms)            \
    {                                                                                    \
        if (NM != 0)                                                                     \
            return (dw * ad) * (float)is - (mw * ad) * (float)ms;                        \
        return (dw * ad) * (float)is;                                                    \
    }

__device__ static inline void gm_kmeta(const int *sc, const int *mn, int ng, uint16_t d,
                                       uint16_t dmin, uint32_t *m)
{
    for (int g = 0; g < ng; g++)
        m[g * GM_TN] = (uint32_t)sc[g];
    for (int q = 0; q < ng / 4; q++)
        m[(18 + q) * GM_TN] = gm_pack(mn[4 * q], mn[4 * q + 1], mn[4 * q + 2], mn[4 * q + 3]);
    m[16 * GM_TN] = ob_f32_bits(ob_fp16_to_f32(d));
    m[17 * GM_TN] = ob_f32_bits(ob_fp16_to_f32(dmin));
}

struct gm_q2_k {
    GM_K(q2_k, 16, 16)
    __device__ static int val(const W *w, int f)
    {
        return (w->qs[(f >> 7) * 32 + (f & 31)] >> (2 * ((f >> 5) & 3))) & 3;
    }
    enum { UNITS = GM_WORDS };
    __device__ static void unpack(const W *w, int u, uint32_t *o) { gm_unpack_val<gm_q2_k>(w, u, o); }
    __device__ static void wmeta(const W *w, int, uint32_t *m)
    {
        int sc[16], mn[16];
        for (int g = 0; g < 16; g++) {
            sc[g] = w->scales[g] & 15;
            mn[g] = w->scales[g] >> 4;
        }
        gm_kmeta(sc, mn, 16, w->d, w->dmin, m);
    }
};

struct gm_q3_k {
    GM_K(q3_k, 16, 0)
    __device__ static int val(const W *w, int f)
    {
        int l = f & 31;
        return ((w->qs[(f >> 7) * 32 + l] >> (2 * ((f >> 5) & 3))) & 3) -
               (((w->hmask[l] >> (f >> 5)) & 1) ? 0 : 4);
    }
    enum { UNITS = GM_WORDS };
    __device__ static void unpack(const W *w, int u, uint32_t *o) { gm_unpack_val<gm_q3_k>(w, u, o); }
    __device__ static void wmeta(const W *w, int, uint32_t *m)
    {
        int sc[16], mn[16];
        for (int g = 0; g < 16; g++) {
            sc[g] = ob_q3k_scale(g, w->scales);
            mn[g] = 0;
        }
        gm_kmeta(sc, mn, 16, w->d, 0, m);
    }
};

/* Q4_K and Q5_K: 8 groups of 32 values, scale and min from ob_k4_scale_min */
__device__ static inline void gm_k4meta(const uint8_t *scales, uint16_t d, uint16_t dmin,
                                        uint32_t *m)
{
    int sc[8], mn[8];
    for (int g = 0; g < 8; g++) {
        uint8_t s, n;
        ob_k4_scale_min(g, scales, &s, &n);
        sc[g] = s;
        mn[g] = n;
    }
    gm_kmeta(sc, mn, 8, d, dmin, m);
}

/* Q4_K: unit u, the word of qs[32 c + 4 l'] (c = u / 8, l' = u % 8): its low nibbles are values
 * 64 c + 4 l' .., its high ones 64 c + 32 + 4 l' .. */
struct gm_q4_k {
    GM_K(q4_k, 8, 8)
    enum { UNITS = 32 };
    __device__ static void unpack(const W *w, int u, uint32_t *o)
    {
        int c = u >> 3, l = u & 7;
        uint32_t x = ob_ld4(w->qs + 32 * c + 4 * l);
        o[16 * c + l] = x & 0x0F0F0F0Fu;
        o[16 * c + 8 + l] = (x >> 4) & 0x0F0F0F0Fu;
    }
    __device__ static void wmeta(const W *w, int, uint32_t *m) { gm_k4meta(w->scales, w->d, w->dmin, m); }
};

/*
 * A type whose stage may hold its weight words raw (gm_raw<G>::V), as they are in memory, so
 * that they go by ob_cp4 like the activations and no thread unpacks them: WORDS words a
 * block, word rw from src(w, rw); get(row, wd) is then word wd of the unpacked block, as
 * G::unpack would have stored it. The tensor cores' kernels take this (the unpacking costs a
 * shift and a mask a fragment word); dp4a's reads each word 4 J times, so it keeps unpack.
 * Q4_K: unpacked word wd = 16 c + 8 h + l is the low (h = 0) or high nibbles of raw word
 * 8 c + l (gm_q4_k::unpack).
 */
template <class G>
struct gm_raw {
    enum { V = 0, WORDS = 0 };
    __device__ static const void *src(const typename G::W *w, int rw) { return w; }
    __device__ static uint32_t get(const uint32_t *row, int wd) { return row[wd]; }
};
template <>
struct gm_raw<gm_q4_k> {
    enum { V = 1, WORDS = 32 };
    __device__ static const void *src(const gm_q4_k::W *w, int rw) { return w->qs + 4 * rw; }
    __device__ static uint32_t get(const uint32_t *row, int wd)
    {
        return row[(wd >> 4) * 8 + (wd & 7)] >> (4 * ((wd >> 3) & 1)) & 0x0F0F0F0Fu;
    }
};

struct gm_q5_k {
    GM_K(q5_k, 8, 8)
    __device__ static int val(const W *w, int f)
    {
        int j = f >> 5, l = f & 31;
        return ((w->qs[(f >> 6) * 32 + l] >> (4 * (j & 1))) & 15) + 16 * ((w->qh[l] >> j) & 1);
    }
    enum { UNITS = GM_WORDS };
    __device__ static void unpack(const W *w, int u, uint32_t *o) { gm_unpack_val<gm_q5_k>(w, u, o); }
    __device__ static void wmeta(const W *w, int, uint32_t *m) { gm_k4meta(w->scales, w->d, w->dmin, m); }
};

/* Q6_K: unit u = (h, l') = (u / 8, u % 8): the words of ql[64 h + 4 l'], ql[64 h + 32 + 4 l']
 * and qh[32 h + 4 l'] give values 128 h + 32 s + 4 l' .. (s = 0..3); q - 32 as an int8 is
 * (q ^ 0x20) with bit 5's complement copied into bits 6 and 7 (the block is 210 bytes:
 * halfword-aligned words) */
struct gm_q6_k {
    GM_K(q6_k, 16, 0)
    enum { UNITS = 16 };
    __device__ static uint32_t q32(uint32_t lo, uint32_t hi)
    {
        uint32_t q = (lo & 0x0F0F0F0Fu) | (hi & 0x03030303u) << 4, t = ~q & 0x20202020u;
        return (q ^ 0x20202020u) | t << 1 | t << 2;
    }
    __device__ static void unpack(const W *w, int u, uint32_t *o)
    {
        int h = u >> 3, l = u & 7;
        uint32_t a = ob_ld4_a2(w->ql + 64 * h + 4 * l), b = ob_ld4_a2(w->ql + 64 * h + 32 + 4 * l);
        uint32_t c = ob_ld4_a2(w->qh + 32 * h + 4 * l);
        o[32 * h + l] = q32(a, c);
        o[32 * h + 8 + l] = q32(b, c >> 2);
        o[32 * h + 16 + l] = q32(a >> 4, c >> 4);
        o[32 * h + 24 + l] = q32(b >> 4, c >> 6);
    }
    __device__ static void wmeta(const W *w, int, uint32_t *m)
    {
        int sc[16], mn[16];
        for (int g = 0; g < 16; g++) {
            sc[g] = w->scales[g];
            mn[g] = 0;
        }
        gm_kmeta(sc, mn, 16, w->d, 0, m);
    }
};
#undef GM_K

/* the 32-value formats: 8 blocks of one class a stage, one group of 32 values a block (no
 * scale); val is the value ob_blk_<type> multiplies, ml: the format has m (+ (m d_a) sum_a) */
#define GM_A8(name, ml, v)                                                               \
    struct gm_##name {                                                                   \
        typedef t_##name T;                                                              \
        typedef T::W W;                                                                  \
        enum { CB = 8, NG = 1, SC = 0, NM = 0, UNITS = 8 };                              \
        __device__ static int val(const W *w, int f) { return v; }                       \
        __device__ static void unpack(const W *w, int u, uint32_t *o) { gm_unpack_val<gm_##name>(w, u, o); } \
        __device__ static int wd_slot(int c) { return c; }                               \
        __device__ static int wm_slot(int c) { return 8 + c; }                           \
        __device__ static int ad_slot(int c) { return 8 + c; }                           \
        __device__ static void wmeta(const W *w, int c, uint32_t *m)                     \
        {                                                                                \
            m[c * GM_TN] = ob_f32_bits(ob_fp16_to_f32(w->d));                            \
            m[(8 + c) * GM_TN] = ml ? ob_f32_bits(gm_m(w)) : 0;                          \
        }                                                                                \
        __device__ static void ameta(const struct ob_act_a8 *a, int c, uint32_t *m, int ld) \
        {                                                                                \
            m[c * ld] = (uint32_t)a->sum;                                                \
            m[(8 + c) * ld] = ob_f32_bits(a->d);                                         \
        }                                                                                \
        __device__ static float epi(float dw, float mw, float ad, int is, int sa)        \
        {                                                                                \
            if (ml != 0)                                                                 \
                return (dw * ad) * (float)is + (mw * ad) * (float)sa;                    \
            return (dw * ad) * (float)is;                                                \
        }                                                                                \
    };
template <class W>
__device__ static inline float gm_m(const W *w) { return ob_fp16_to_f32(w->m); }
template <>
__device__ inline float gm_m(const struct ob_block_q4_0 *) { return 0.0f; }
template <>
__device__ inline float gm_m(const struct ob_block_q5_0 *) { return 0.0f; }
template <>
__device__ inline float gm_m(const struct ob_block_q8_0 *) { return 0.0f; }
GM_A8(q4_0, 0, ob_q4_nib(w->qs, f) - 8)
GM_A8(q4_1, 1, ob_q4_nib(w->qs, f))
GM_A8(q5_0, 0, ob_q4_nib(w->qs, f) + 16 * ob_q5_bit(w->qh, f) - 16)
GM_A8(q5_1, 1, ob_q4_nib(w->qs, f) + 16 * ob_q5_bit(w->qh, f))
GM_A8(q8_0, 0, w->qs[f])
#undef GM_A8

/* the stage in shared memory (one set for every instantiation, k_gm_q's; hrx-sim keeps shared
 * memory per host thread): gm_sv holds GM_TN weight rows, then 64 activation rows, of LD words
 * each (LD is the kernel's: GM_LD for dp4a, GM_LDM for the tensor cores) */
OB_SHARED_FILE(uint32_t, gm_sv, [(GM_TN + 64) * GM_LDM]);
OB_SHARED_FILE(uint32_t, gm_wm, [GM_WSLOTS][GM_TN]);
OB_SHARED_FILE(uint32_t, gm_am, [GM_ASLOTS][64]);

/* a class's partial P joins the fold (the class order of the comment above: o = 0 .. 7) */
__device__ static inline void gm_fold(int o, float p, float *a, float *b, float *c)
{
    switch (o) {
    case 0: *a = p; break;                          /* p0 */
    case 1: *a = *a + p; break;                     /* p0 + p4 */
    case 2: *b = p; break;                          /* p2 */
    case 3: *b = *b + p; *a = *a + *b; break;       /* (p0 + p4) + (p2 + p6) */
    case 4: *b = p; break;                          /* p1 */
    case 5: *b = *b + p; break;                     /* p1 + p5 */
    case 6: *c = p; break;                          /* p3 */
    default: *c = *c + p; *b = *b + *c; *a = *a + *b; break;   /* ... + ((p1 + p5) + (p3 + p7)) */
    }
}

/*
 * The stage of blocks u + 8 (c0 + c), c < CB, of class u's nc (past the class: its last block)
 * for the tile's GM_TN weight rows from n0 and TR activation rows from r0: values into sw and
 * sa (rows of LD words; with RAW the weights' words as they are, gm_raw), scales, mins, sums
 * and d into gm_wm and gm_am. With async the words that need no unpacking (the activations',
 * raw weights) go by ob_cp4 (the caller waits with ob_cp_wait before its __syncthreads()): on
 * a GPU with cp.async they are in flight while the thread reads what it must unpack, where a
 * load and a store a word took a round trip to memory per few words (the SASS of sm_90: 16
 * words a thread in four rounds for TR = 64). The activations' sums go to the threads from
 * GM_THREADS / 2 on, the weights' scales and mins (64 of them for a K-quant) to those from 0,
 * so that no warp waits for both.
 */
template <class G, int TR, int LD, bool RAW>
__device__ static inline void gm_stage(const struct ob_hrx_mat &w, const char *xq, size_t stride,
                                       int n, int n0, int r0, int u, int c0, int nc,
                                       uint32_t (*sw)[LD], uint32_t (*sa)[LD], bool async)
{
    typedef typename G::W W;
    typedef typename G::T::A A;
    enum { CB = G::CB, WPB = GM_WORDS / CB, RW = gm_raw<G>::WORDS };
    int t = (int)threadIdx.x;
    if constexpr (RAW) {           /* raw words (gm_raw; none where RW is 0) */
        for (int it = t; it < GM_TN * CB * RW; it += GM_THREADS) {
            int i = it / (CB * RW), c = it / RW % CB, rw = it % RW;
            int wn = n0 + i < w.n ? n0 + i : w.n - 1, bc = c0 + c < nc ? c0 + c : nc - 1;
            const W *wr = (const W *)((const char *)w.data + (size_t)wn * w.row_bytes);
            const void *p = gm_raw<G>::src(wr + u + 8 * bc, rw);
            if (async)
                ob_cp4(&sw[i][c * WPB + rw], p);
            else
                sw[i][c * WPB + rw] = ob_ld4(p);
        }
    }
    for (int it = t; !RAW && it < GM_TN * CB * G::UNITS; it += GM_THREADS) {
        int i = it / (CB * G::UNITS), c = it / G::UNITS % CB, un = it % G::UNITS;
        int wn = n0 + i < w.n ? n0 + i : w.n - 1, bc = c0 + c < nc ? c0 + c : nc - 1;
        const W *wr = (const W *)((const char *)w.data + (size_t)wn * w.row_bytes);
        G::unpack(wr + u + 8 * bc, un, &sw[i][c * WPB]);
    }
    for (int it = t; it < GM_TN * CB; it += GM_THREADS) {
        int i = it / CB, c = it % CB;
        int wn = n0 + i < w.n ? n0 + i : w.n - 1, bc = c0 + c < nc ? c0 + c : nc - 1;
        const W *wr = (const W *)((const char *)w.data + (size_t)wn * w.row_bytes);
        G::wmeta(wr + u + 8 * bc, c, &gm_wm[0][i]);
    }
    for (int it = t; it < TR * GM_WORDS; it += GM_THREADS) {
        int r = it / GM_WORDS, wd = it % GM_WORDS, c = wd / WPB;
        int ar = r0 + r < n ? r0 + r : n - 1, bc = c0 + c < nc ? c0 + c : nc - 1;
        const A *ab = (const A *)(xq + (size_t)ar * stride) + u + 8 * bc;
        if (async)
            ob_cp4(&sa[r][wd], ab->qs + 4 * (wd % WPB));
        else
            sa[r][wd] = ob_ld4(ab->qs + 4 * (wd % WPB));
    }
    for (int it = (t + GM_THREADS / 2) % GM_THREADS; it < TR * CB; it += GM_THREADS) {
        int r = it / CB, c = it % CB;
        int ar = r0 + r < n ? r0 + r : n - 1, bc = c0 + c < nc ? c0 + c : nc - 1;
        const A *ab = (const A *)(xq + (size_t)ar * stride) + u + 8 * bc;
        G::ameta(ab, c, &gm_am[0][r], 64);
    }
}

/* r_b of the stage's block c for the tile's weight row wi and activation row ai, from their
 * integer sum is: ob_blk_<type>'s epilogue, operation by operation */
template <class G>
__device__ static inline float gm_rb(int c, int wi, int ai, int is)
{
    float dw = ob_f32_from_bits(gm_wm[G::wd_slot(c)][wi]);
    float mw = ob_f32_from_bits(gm_wm[G::wm_slot(c)][wi]);
    int ms = 0;
    if (G::NM != 0) {              /* sum of m_g (128 hi_g + lo_g) */
        int mh = 0, ml = 0;
        OB_UNROLL
        for (int e = 0; e < G::NM / 4; e++) {
            int m = (int)gm_wm[18 + e][wi];
            mh = ob_dp4a(m, (int)gm_am[e][ai], mh);
            ml = ob_dp4a(m, (int)gm_am[4 + e][ai], ml);
        }
        ms = 128 * mh + ml;
    } else if (G::SC == 0) {       /* the format's sum_a, for its m */
        ms = (int)gm_am[c][ai];
    }
    float ad = ob_f32_from_bits(gm_am[G::ad_slot(c)][ai]);
    return G::epi(dw, mw, ad, is, ms);
}

/* at most 128 registers a thread on CUDA: two blocks an SM */
#if defined(OB_HRX_CUDA)
#define GM_BOUNDS __launch_bounds__(GM_THREADS, 2)
#elif defined(OB_HRX_HIP)
#define GM_BOUNDS __launch_bounds__(GM_THREADS)
#else
#define GM_BOUNDS
#endif

/* word wd of a staged weight row: unpacked, or from the raw words (gm_raw) */
template <class G, bool RAW>
__device__ static inline uint32_t gm_wword(const uint32_t *row, int wd)
{
    return RAW ? gm_raw<G>::get(row, wd) : row[wd];
}

/*
 * The integer sums of block c of the stage, group by group times its scale (K-quants), for the
 * thread's NI x NJ pairs: weight rows wi0 + WIS i, activation rows gm_ai<MMA>(ai0, j), of the
 * tile. dp4a (MMA false): thread (tx, ty) of 16 x 16 takes wi0 = tx, WIS = 16, ai0 = ty (4 x J
 * pairs), a word of each row at a time. The tensor cores (MMA): warp v takes weight rows
 * 16 (v % 4) .. + 15 against J tiles of 8 activation rows from an0 = 8 J (v / 4), a group's
 * sums one ob_mma_s8 a tile (K: the group's 32 or 16 values); lane 4 g + t's fragment of the
 * result is the pairs of weight rows 16 (v % 4) + g + 8 i (WIS = 8) and activation rows
 * an0 + 8 (j / 2) + 2 t + j % 2 (2 x 2 J pairs). The same integers either way.
 */
template <bool MMA>
__device__ static inline int gm_ai(int ai0, int j)
{
    return MMA ? ai0 + 8 * (j >> 1) + (j & 1) : ai0 + 16 * j;
}

template <class G, int J, bool MMA, bool RAW, int LD, int NI, int NJ>
__device__ static inline void gm_isums(const uint32_t (*sw)[LD], const uint32_t (*sa)[LD], int c,
                                       int wi0, int ai0, int an0, int (*is)[NJ])
{
    enum { WPB = GM_WORDS / G::CB, WPG = WPB / G::NG, WIS = MMA ? 8 : 16 };
    OB_UNROLL
    for (int i = 0; i < NI; i++)
        OB_UNROLL
        for (int j = 0; j < NJ; j++)
            is[i][j] = 0;
    for (int g = 0; g < G::NG; g++) {
        int kb = c * WPB + g * WPG, s[NI][NJ];
        if (!MMA) {
            OB_UNROLL
            for (int i = 0; i < NI; i++)
                OB_UNROLL
                for (int j = 0; j < NJ; j++)
                    s[i][j] = 0;
            OB_UNROLL
            for (int k = 0; k < WPG; k++) {
                uint32_t wv[NI], av[NJ];
                OB_UNROLL
                for (int i = 0; i < NI; i++)
                    wv[i] = gm_wword<G, RAW>(sw[wi0 + WIS * i], kb + k);
                OB_UNROLL
                for (int j = 0; j < NJ; j++)
                    av[j] = sa[gm_ai<MMA>(ai0, j)][kb + k];
                OB_UNROLL
                for (int i = 0; i < NI; i++)
                    OB_UNROLL
                    for (int j = 0; j < NJ; j++)
                        s[i][j] = ob_dp4a((int)wv[i], (int)av[j], s[i][j]);
            }
        }
#if defined(OB_HRX_HAS_MMA)
        else {
            int tq = (int)threadIdx.x & 3, gr = ((int)threadIdx.x & 31) >> 2;
            uint32_t af[4], bf[2];
            af[0] = gm_wword<G, RAW>(sw[wi0], kb + tq);
            af[1] = gm_wword<G, RAW>(sw[wi0 + 8], kb + tq);
            af[2] = WPG == 8 ? gm_wword<G, RAW>(sw[wi0], kb + tq + 4) : 0;
            af[3] = WPG == 8 ? gm_wword<G, RAW>(sw[wi0 + 8], kb + tq + 4) : 0;
            OB_UNROLL
            for (int jt = 0; jt < NJ / 2; jt++) {
                int c4[4];
                bf[0] = sa[an0 + 8 * jt + gr][kb + tq];
                bf[1] = WPG == 8 ? sa[an0 + 8 * jt + gr][kb + tq + 4] : 0;
                ob_mma_s8<4 * WPG>(af, bf, c4);
                s[0][2 * jt] = c4[0];
                s[0][2 * jt + 1] = c4[1];
                s[1][2 * jt] = c4[2];
                s[1][2 * jt + 1] = c4[3];
            }
        }
#endif
        OB_UNROLL
        for (int i = 0; i < NI; i++) {
            int sc = G::SC != 0 ? (int)gm_wm[g][wi0 + WIS * i] : 1;
            OB_UNROLL
            for (int j = 0; j < NJ; j++)
                is[i][j] += G::SC != 0 ? sc * s[i][j] : s[i][j];
        }
    }
}

/*
 * A tile's classes may be split over S = gridDim.z blocks (S = 1, 2, 4, 8): block z runs
 * classes o = 8 z / S .. 8 (z + 1) / S - 1 of the order above, which make one node of
 * ob_fold8's tree (p0 + p4; (p0 + p4) + (p2 + p6); ...), and stores that node's value in
 * ws[z][row][weight row] (P for one class, the fold's a, b or c for two or four: each range
 * starts with an assignment in gm_fold). k_gm_fold adds the S nodes as the tree does, then the
 * bias and the op: the bits of one block running all eight classes.
 */
template <class G, int J, bool MMA>
__global__ static void GM_BOUNDS k_gm_q(struct ob_hrx_mat w, const char *xq, size_t stride, int n,
                              const float *bias, float *y, size_t ldy, int op, float *ws,
                              int async)
{
    enum { TR = 16 * J, CB = G::CB, LD = MMA ? GM_LDM : GM_LD, NI = MMA ? 2 : 4,
           NJ = MMA ? 2 * J : J, WIS = MMA ? 8 : 16, RAW = MMA && gm_raw<G>::V };
    OB_SHARED_FRESH(gm_sv);
    OB_SHARED_FRESH(gm_wm);
    OB_SHARED_FRESH(gm_am);
    uint32_t (*sw)[LD] = (uint32_t (*)[LD])gm_sv;
    uint32_t (*sa)[LD] = (uint32_t (*)[LD])(gm_sv + GM_TN * LD);
    int t = (int)threadIdx.x, v = t >> 5, lane = t & 31;
    int wi0 = MMA ? 16 * (v & 3) + (lane >> 2) : t & 15;
    int an0 = 8 * J * (v >> 2), ai0 = MMA ? an0 + 2 * (lane & 3) : t >> 4;
    int n0 = (int)blockIdx.x * GM_TN, r0 = (int)blockIdx.y * TR, nb = w.k / G::T::QK;
    float P[NI][NJ], FA[NI][NJ], FB[NI][NJ], FC[NI][NJ];
    OB_UNROLL
    for (int i = 0; i < NI; i++)
        OB_UNROLL
        for (int j = 0; j < NJ; j++)
            P[i][j] = FA[i][j] = FB[i][j] = FC[i][j] = 0.0f;
    int S = (int)gridDim.z, z = (int)blockIdx.z, o0 = 8 * z / S, o1 = 8 * (z + 1) / S;
    for (int o = o0; o < o1; o++) {
        int u = (o & 1) * 4 + (o & 2) + (o >> 2);   /* 0, 4, 2, 6, 1, 5, 3, 7 */
        int nc = nb > u ? (nb - u + 7) / 8 : 0;     /* blocks of class u */
        OB_UNROLL
        for (int i = 0; i < NI; i++)
            OB_UNROLL
            for (int j = 0; j < NJ; j++)
                P[i][j] = 0.0f;
        for (int c0 = 0; c0 < nc; c0 += CB) {
            /* dp4a's kernels copy plainly: its spare registers went to the copies' addresses
             * (ptxas sm_90, 64 rows: Q4_K spilled 168 / 164 bytes with them, 68 / 64
             * without), and dp4a is the product of GPUs without cp.async (HIP, CUDA below
             * sm_80) */
            gm_stage<G, TR, LD, RAW>(w, xq, stride, n, n0, r0, u, c0, nc, sw, sa,
                                     MMA && async != 0);
            ob_cp_wait();
            __syncthreads();
            for (int c = 0; c < CB && c0 + c < nc; c++) {
                int is[NI][NJ];
                gm_isums<G, J, MMA, RAW, LD, NI, NJ>(sw, sa, c, wi0, ai0, an0, is);
                OB_UNROLL
                for (int i = 0; i < NI; i++)
                    OB_UNROLL
                    for (int j = 0; j < NJ; j++)
                        P[i][j] = P[i][j] + gm_rb<G>(c, wi0 + WIS * i, gm_ai<MMA>(ai0, j),
                                                     is[i][j]);
            }
            __syncthreads();
        }
        OB_UNROLL
        for (int i = 0; i < NI; i++)
            OB_UNROLL
            for (int j = 0; j < NJ; j++)
                gm_fold(o, P[i][j], &FA[i][j], &FB[i][j], &FC[i][j]);
    }
    /* the tile's results through shared memory (the stage is free: every read of it came
     * before the last __syncthreads() above), then out along y's rows: one epilogue in the
     * kernel's code (inlined at each of a thread's pairs, ob_gelu's exp was most of it) */
    static_assert(TR * GM_OLD <= (GM_TN + 64) * GM_LDM, "a tile's results fit the stage");
    float *out = (float *)gm_sv;
    OB_UNROLL
    for (int i = 0; i < NI; i++)
        OB_UNROLL
        for (int j = 0; j < NJ; j++)
            out[gm_ai<MMA>(ai0, j) * GM_OLD + wi0 + WIS * i] =
                o1 - o0 == 1 ? P[i][j] : o0 == 0 ? FA[i][j] : o0 == 6 ? FC[i][j] : FB[i][j];
    __syncthreads();
    for (int it = t; it < TR * GM_TN; it += GM_THREADS) {
        int r = it / GM_TN, i = it % GM_TN, wn = n0 + i, ar = r0 + r;
        if (wn >= w.n || ar >= n)
            continue;
        if (S == 1)
            mm_put(&y[(size_t)ar * ldy + wn], out[r * GM_OLD + i], bias, wn, op);
        else
            ws[((size_t)z * n + ar) * w.n + wn] = out[r * GM_OLD + i];
    }
}

/* y[r][i] from the S nodes of a split product (k_gm_q above): ob_fold8's tree over them, then
 * the bias and the op; a thread an output */
__global__ static void k_gm_fold(const float *ws, int S, int n, int wn, const float *bias,
                                 float *y, size_t ldy, int op)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x, per = (size_t)n * wn;
    if (id >= per)
        return;
    float v[8];
    for (int z = 0; z < S; z++)
        v[z] = ws[z * per + id];
    for (int h = 1; h < S; h *= 2)           /* (v0 + v1), (v2 + v3), ...; then their sums */
        for (int z = 0; z + h < S; z += 2 * h)
            v[z] = v[z] + v[z + h];
    int r = (int)(id / (size_t)wn), i = (int)(id % (size_t)wn);
    mm_put(&y[(size_t)r * ldy + i], v[0], bias, i, op);
}

/* the tensor cores' product for the tiles: where the target has it (OB_HRX_FN(has_mma)) and
 * OB_HRX_MMA is not 0; a function of the device and the environment, as a graph needs */
static bool gm_mma(struct ob_hrx_q *q)
{
    const char *e = getenv("OB_HRX_MMA");
    return OB_HRX_FN(has_mma)(q) && !(e && !strcmp(e, "0"));
}

/* the stage's words that need no unpacking by asynchronous copies (gm_stage's async) unless
 * OB_HRX_ASYNC is 0: the same bits either way; the knob lets a device check time both */
static int gm_async(void)
{
    const char *e = getenv("OB_HRX_ASYNC");
    return !(e && !strcmp(e, "0"));
}

/*
 * Into how many blocks a tile's classes are split (k_gm_q): OB_HRX_SPLIT's 1, 2, 4 or 8, or
 * the fewest that give the launch two blocks a multiprocessor, at most 8 and at most the
 * blocks of a row (nb, so that no block is left without one); halved until the nodes fit
 * the queue's workspace. Any split gives the same bits; this picks the speed. A function of
 * the shapes, the device and the environment, as a graph needs.
 */
static int gm_split(struct ob_hrx_q *q, int blocks, int nb, size_t per, size_t ws_n)
{
    const char *e = getenv("OB_HRX_SPLIT");
    int S = 1;
    if (e && (!strcmp(e, "1") || !strcmp(e, "2") || !strcmp(e, "4") || !strcmp(e, "8")))
        S = atoi(e);
    else
        while (S < 8 && blocks * S < 2 * OB_HRX_FN(sms)(q) && 2 * S <= nb)
            S *= 2;
    while (S > 1 && (size_t)S * per > ws_n)
        S /= 2;
    return S;
}

/* k_gm_q<G, J, MMA> for tr activation rows a tile: J = 2 up to 32, else 4 */
template <class G, bool MMA>
static void gm_go(struct ob_hrx_q *q, int tr, dim3 grid, struct ob_hrx_mat w, const char *x,
                  size_t stride, int n, const float *b, float *y, size_t ldy, int op, float *part,
                  int async)
{
#define GM_KN(J) k_gm_q<G, J, MMA>   /* one macro argument for the template's three */
    if (tr == 32)
        OB_LAUNCH(q, GM_KN(2), grid, dim3(GM_THREADS), w, x, stride, n, b, y, ldy, op, part,
                  async);
    else
        OB_LAUNCH(q, GM_KN(4), grid, dim3(GM_THREADS), w, x, stride, n, b, y, ldy, op, part,
                  async);
#undef GM_KN
}

/* the tiles for n >= GM_MIN_ROWS rows: TR = 32 up to 32 rows, else 64; split over S blocks
 * a tile and folded by k_gm_fold where the tiles alone leave multiprocessors idle */
template <class G>
static void gm_launch(struct ob_hrx_q *q, struct ob_hrx_mat w, const char *x, size_t stride,
                      int n, const float *b, float *y, size_t ldy, int op)
{
    int tr = n <= 32 ? 32 : 64;
    size_t ws_n, per = (size_t)n * (size_t)w.n;
    float *ws = OB_HRX_FN(workspace)(q, &ws_n);
    unsigned gx = (unsigned)((w.n + GM_TN - 1) / GM_TN), gy = (unsigned)((n + tr - 1) / tr);
    int S = gm_split(q, (int)(gx * gy), w.k / G::T::QK, per, ws_n);
    dim3 grid(gx, gy, (unsigned)S);
    float *part = S > 1 ? ws : NULL;
#if defined(OB_HRX_HAS_MMA)
    if (gm_mma(q))
        gm_go<G, true>(q, tr, grid, w, x, stride, n, b, y, ldy, op, part, gm_async());
    else
#endif
        gm_go<G, false>(q, tr, grid, w, x, stride, n, b, y, ldy, op, part, gm_async());
    if (S > 1)
        OB_LAUNCH(q, k_gm_fold, dim3((unsigned)((per + 255) / 256)), dim3(256), (const float *)ws,
                  S, n, w.n, b, y, ldy, op);
}

/*
 * The fewest activation rows that take the tiles: GM_MIN_ROWS, or OB_HRX_GEMM's number (0:
 * none, k_mv_q for every width; 1: every width, so that a device check can find the widths
 * where the tiles pay). Asked at each call: a lookup, and no state shared between threads;
 * a function of the environment, so a recorded graph launches what a launch would.
 */
static int gm_min_rows(void)
{
    const char *e = getenv("OB_HRX_GEMM");
    char *end = NULL;
    long v = e && *e ? strtol(e, &end, 10) : -1;
    if (v < 0 || *end || v > INT_MAX)
        return GM_MIN_ROWS;
    return v == 0 ? INT_MAX : (int)v;
}

/* ---- float weights ------------------------------------------------------------------------------ */

template <int TYPE>
__device__ static inline float mm_wval(const void *row, int i)
{
    if (TYPE == OB_F16)
        return ob_fp16_to_f32(((const uint16_t *)row)[i]);
    if (TYPE == OB_BF16)
        return ob_bf16_to_f32(((const uint16_t *)row)[i]);
    return ((const float *)row)[i];
}

template <int TYPE>
__global__ static void k_mm_f(struct ob_hrx_mat w, const char *xq, size_t stride, int n,
                              const float *bias, float *y, size_t ldy, int op, struct mm_tile g)
{
    OB_SHARED(float, part, [MM_THREADS][OB_WARP + 1]);
    int tn = g.tn, t = (int)threadIdx.x, pairs = g.tn * g.tr;
    int n0 = (int)blockIdx.x * tn, r0 = (int)blockIdx.y * g.tr;
    for (int it = t; it < pairs * OB_WARP; it += MM_THREADS) {
        int pr = it / OB_WARP, j = it % OB_WARP;
        int wn = n0 + pr % tn, ar = r0 + pr / tn;
        if (wn < w.n && ar < n) {
            const void *wr = (const char *)w.data + (size_t)wn * w.row_bytes;
            const float *x = (const float *)(xq + (size_t)ar * stride);
            float acc = 0.0f;
            for (int i = j; i < w.k; i += OB_WARP)
                acc = fmaf(mm_wval<TYPE>(wr, i), x[i], acc);
            part[pr][j] = acc;
        }
    }
    __syncthreads();
    int my_n = n0 + t % tn, my_r = r0 + t / tn;
    if (t < pairs && my_n < w.n && my_r < n) {
        float p[OB_WARP];
        for (int j = 0; j < OB_WARP; j++)
            p[j] = part[t][j];
        float v = ob_fold32(p);
        mm_put(&y[(size_t)my_r * ldy + my_n], v, bias, my_n, op);
    }
}

extern "C" int OB_HRX_FN(matmul)(struct ob_hrx_q *q, struct ob_hrx_mat w, const void *xq,
                                 size_t stride, int n, const float *b, float *y, size_t ldy,
                                 int op, const struct ob_hrx_then *then)
{
    int e = then_check("matmul", then, ldy, w.n, true);
    if (e)
        return e;
    if (n <= 0 || w.n <= 0)
        return 0;
    int S = ob_type_blck(w.type) == 256 ? 8 : 1;
    struct mm_tile g;
    g.tr = n >= 4 ? 4 : n >= 2 ? 2 : 1;
    g.tn = OB_HRX_FN(big_tiles)(q) ? MM_THREADS / g.tr : 8;
    g.cb = MM_ITEMS / (g.tn * g.tr * S);
    g.ltn = __builtin_ctz((unsigned)g.tn);
    g.lcb = __builtin_ctz((unsigned)g.cb);
    dim3 grid((unsigned)((w.n + g.tn - 1) / g.tn), (unsigned)((n + g.tr - 1) / g.tr));
    dim3 block(MM_THREADS);
    const char *x = (const char *)xq;
    bool tiles = OB_HRX_FN(big_tiles)(q);   /* hrx-sim's own geometry: the tiled kernel */
    bool mv = mm_quant(w.type) && !tiles && n < gm_min_rows();
    /* NORM_Q by k_mv_q's last block of each row group (rows whole blocks of the format) */
    struct mm_then t = then_in(q, mv && then && then->op == OB_HRX_THEN_NORM_Q ? then : NULL,
                               w.n, (n + mv_tr(n) - 1) / mv_tr(n),
                               then && then->fmt == OB_HRX_ACT_Q8K ? 256 : 32);
    switch (w.type) {
#define MM_Q(NAME, name, id, blck, bytes, ftype)                                        \
    case OB_##NAME:                                                                     \
        if (tiles)                                                                      \
            OB_LAUNCH(q, k_mm_q<t_##name>, grid, block, w, x, stride, n, b, y, ldy, op,  \
                      g);                                                               \
        else if (!mv)                                                                   \
            gm_launch<gm_##name>(q, w, x, stride, n, b, y, ldy, op);                    \
        else                                                                            \
            mv_launch<t_##name>(q, w, x, stride, n, b, y, ldy, op, t);                  \
        break;
    OB_TYPES_QUANT(MM_Q)
#undef MM_Q
#define MM_F(NAME, name, id, blck, bytes, ftype)                                        \
    case OB_##NAME:                                                                     \
        OB_LAUNCH(q, k_mm_f<OB_##NAME>, grid, block, w, x, stride, n, b, y, ldy, op, g); \
        break;
    OB_TYPES_FLOAT(MM_F)
#undef MM_F
    default:
        return ob_seterr(OB_EUNSUPP, "hrx: no kernel for %s weights", ob_type_name(w.type));
    }
    if (!OB_HRX_FN(profiling)(q)) {
        e = OB_HRX_FN(launched)(q, "matmul");
    } else {
        char name[64];             /* the matmul's own line in OB_HRX_PROFILE's table */
        snprintf(name, sizeof name, "matmul %s %dx%d %s%s%s", ob_type_name(w.type), w.n, w.k,
                 n == 1 ? "w1" : n <= 8 ? "w2-8" : n < GM_MIN_ROWS ? "w9-15" : "w16+",
                 n >= gm_min_rows() && gm_mma(q) ? " mma" : "", then_tag(t));
        e = OB_HRX_FN(launched)(q, name);
    }
    if (e || !then || then->op == OB_HRX_THEN_NONE || t.op)
        return e;
    return then_after(q, then, y, n, w.n);   /* not done by the launch's last blocks */
}
