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
 */
#include <stdio.h>

#include "hrx/shim.h"
#include "hrx/warp.h"
#include "arith/dot.h"

/* the result of row i, v, into *y: the bias, then the epilogue (hrx.h: OB_HRX_EPI_*), each
 * one rounding as the separate ops (ob_add_f32, ob_swiglu, ob_geglu) would do it */
__device__ static inline void mm_put(float *y, float v, const float *bias, int i, int op)
{
    if (bias)
        v = v + bias[i];
    if (op == OB_HRX_EPI_ADD)
        v = *y + v;
    else if (op == OB_HRX_EPI_SILU)
        v = ob_silu(*y) * v;
    else if (op == OB_HRX_EPI_GELU)
        v = ob_gelu(*y) * v;
    *y = v;
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

/*
 * A weight type: its block and activation block, values a block (QK), parts a block (S), and
 *   S == 1:  blk(w, a)                      the canonical block value, ob_blk_<type>;
 *   S == 8:  part(w, a, p, &is, &ms)        the integer sums of part p (32 values, 8 of the
 *                                           16-value sub-blocks of Q2_K, Q3_K, Q6_K: two);
 *            epi(w, a, is, ms)              the block value from the summed parts, the float
 *                                           epilogue of ob_blk_<type> operation by operation.
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
        __device__ static float epi(const W *, const A *, int, int) { return 0.0f; }     \
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
            int s = 0;
            for (int i = 0; i < 16; i++) {
                int f = 16 * k + i, h = f >> 7, sh = (f >> 5) & 3, l = f & 31;
                s += ((w->qs[h * 32 + l] >> (2 * sh)) & 3) * a->qs[f];
            }
            isum += (w->scales[k] & 15) * s;
            msum += (w->scales[k] >> 4) * a->bsums[k];
        }
        *is = isum;
        *ms = msum;
    }
    __device__ static float epi(const W *w, const A *a, int is, int ms)
    {
        return mm_epi_min(w->d, w->dmin, a->d, is, ms);
    }
};

struct t_q3_k {
    MM_TYPEK(q3_k)
    __device__ static void part(const W *w, const A *a, int p, int *is, int *ms)
    {
        int isum = 0;
        for (int k = 2 * p; k < 2 * p + 2; k++) {
            int s = 0;
            for (int i = 0; i < 16; i++) {
                int f = 16 * k + i, h = f >> 7, sh = (f >> 5) & 3, l = f & 31;
                int q = ((w->qs[h * 32 + l] >> (2 * sh)) & 3) - (((w->hmask[l] >> (f >> 5)) & 1) ? 0 : 4);
                s += q * a->qs[f];
            }
            isum += ob_q3k_scale(k, w->scales) * s;
        }
        *is = isum;
        *ms = 0;
    }
    __device__ static float epi(const W *w, const A *a, int is, int ms)
    {
        return (ob_fp16_to_f32(w->d) * a->d) * (float)is;
    }
};

struct t_q4_k {
    MM_TYPEK(q4_k)
    __device__ static void part(const W *w, const A *a, int j, int *is, int *ms)
    {
        uint8_t sc, m;
        ob_k4_scale_min(j, w->scales, &sc, &m);
        int s = 0;
        for (int l = 0; l < 32; l++) {
            int f = 32 * j + l, c = f >> 6, hi = (f >> 5) & 1;
            s += ((w->qs[c * 32 + l] >> (4 * hi)) & 15) * a->qs[f];
        }
        *is = sc * s;
        *ms = m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    __device__ static float epi(const W *w, const A *a, int is, int ms)
    {
        return mm_epi_min(w->d, w->dmin, a->d, is, ms);
    }
};

struct t_q5_k {
    MM_TYPEK(q5_k)
    __device__ static void part(const W *w, const A *a, int j, int *is, int *ms)
    {
        uint8_t sc, m;
        ob_k4_scale_min(j, w->scales, &sc, &m);
        int s = 0;
        for (int l = 0; l < 32; l++) {
            int f = 32 * j + l, c = f >> 6, hi = (f >> 5) & 1;
            int q = ((w->qs[c * 32 + l] >> (4 * hi)) & 15) + 16 * ((w->qh[l] >> j) & 1);
            s += q * a->qs[f];
        }
        *is = sc * s;
        *ms = m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    __device__ static float epi(const W *w, const A *a, int is, int ms)
    {
        return mm_epi_min(w->d, w->dmin, a->d, is, ms);
    }
};

struct t_q6_k {
    MM_TYPEK(q6_k)
    __device__ static void part(const W *w, const A *a, int p, int *is, int *ms)
    {
        int isum = 0;
        for (int k = 2 * p; k < 2 * p + 2; k++) {
            int s = 0;
            for (int i = 0; i < 16; i++) {
                int f = 16 * k + i, h = f >> 7, r = f & 127;
                int lo = (w->ql[h * 64 + (r & 63)] >> (4 * (r >> 6))) & 15;
                int hi = (w->qh[h * 32 + (r & 31)] >> (2 * (r >> 5))) & 3;
                s += (lo + 16 * hi - 32) * a->qs[f];
            }
            isum += w->scales[k] * s;
        }
        *is = isum;
        *ms = 0;
    }
    __device__ static float epi(const W *w, const A *a, int is, int ms)
    {
        return (ob_fp16_to_f32(w->d) * a->d) * (float)is;
    }
};
#undef MM_TYPEK

/* tile geometry: tn weight rows x tr activation rows, cb blocks a chunk */
struct mm_tile {
    int tn, tr, cb;
};

template <class T>
__global__ static void k_mm_q(struct ob_hrx_mat w, const char *xq, size_t stride, int n,
                              const float *bias, float *y, size_t ldy, int op, struct mm_tile g)
{
    __shared__ int part_is[MM_ITEMS], part_ms[MM_ITEMS];
    __shared__ float rb[MM_ITEMS], acc[MM_THREADS][8];
    int t = (int)threadIdx.x, pairs = g.tn * g.tr, cb = g.cb, nb = w.k / T::QK;
    int n0 = (int)blockIdx.x * g.tn, r0 = (int)blockIdx.y * g.tr;
    if (t < pairs)
        for (int u = 0; u < 8; u++)
            acc[t][u] = 0.0f;
    for (int b0 = 0; b0 < nb; b0 += cb) {
        int nc = nb - b0 < cb ? nb - b0 : cb;
        if (T::S > 1) {
            for (int it = t; it < pairs * cb * T::S; it += MM_THREADS) {
                int pr = it / (cb * T::S), j = it / T::S % cb, p = it % T::S;
                int wn = n0 + pr % g.tn, ar = r0 + pr / g.tn;
                if (j < nc && wn < w.n && ar < n)
                    T::part((const typename T::W *)((const char *)w.data + (size_t)wn * w.row_bytes) + b0 + j,
                            (const typename T::A *)(xq + (size_t)ar * stride) + b0 + j, p,
                            &part_is[it], &part_ms[it]);
            }
            __syncthreads();
        }
        for (int it = t; it < pairs * cb; it += MM_THREADS) {
            int pr = it / cb, j = it % cb;
            int wn = n0 + pr % g.tn, ar = r0 + pr / g.tn;
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
                rb[it] = T::epi(wb, ab, is, ms);
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
            if (live) {
                const A *ab[TR];
                OB_UNROLL
                for (int r = 0; r < TR; r++)
                    ab[r] = ar[r] + b;
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
                rb[r] = live ? T::epi(wr + b, ar[r] + b, is[r], ms[r]) : 0.0f;
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
__global__ static void k_mv_q(struct ob_hrx_mat w, const char *xq, size_t stride, int n,
                              const float *bias, float *y, size_t ldy, int op)
{
    typedef typename T::W W;
    typedef typename T::A A;
    int lane = (int)threadIdx.x & (OB_WARP - 1);
    int wn = (int)blockIdx.x * MV_WARPS + (int)threadIdx.x / OB_WARP, r0 = (int)blockIdx.y * TR;
    int nb = w.k / T::QK;
    if (wn >= w.n)
        return;                    /* the whole warp: no shuffle is left half-reached */
    const W *wr = (const W *)((const char *)w.data + (size_t)wn * w.row_bytes);
    const A *ar[TR];
    float acc[TR];
    OB_UNROLL
    for (int r = 0; r < TR; r++)
        ar[r] = (const A *)(xq + (size_t)(r0 + r < n ? r0 + r : n - 1) * stride);
    mv_acc<T, TR>(wr, nb, ar, lane, acc);
    OB_UNROLL
    for (int r = 0; r < TR; r++) {
        float pp[8];
        OB_UNROLL
        for (int u = 0; u < 8; u++)
            pp[u] = ob_shfl(acc[r], u);
        if (lane == 0 && r0 + r < n) {
            float v = ob_fold8(pp);
            mm_put(&y[(size_t)(r0 + r) * ldy + wn], v, bias, wn, op);
        }
    }
}

template <class T>
static void mv_launch(struct ob_hrx_q *q, struct ob_hrx_mat w, const char *x, size_t stride,
                      int n, const float *b, float *y, size_t ldy, int op)
{
    int tr = n >= 5 ? 8 : n >= 3 ? 4 : n;
    dim3 grid((unsigned)((w.n + MV_WARPS - 1) / MV_WARPS), (unsigned)((n + tr - 1) / tr));
    dim3 block(MV_WARPS * OB_WARP);
#define MV_K(T, TR) k_mv_q<T, TR>  /* one macro argument for the template's two */
    switch (tr) {
    case 1: OB_LAUNCH(q, MV_K(T, 1), grid, block, w, x, stride, n, b, y, ldy, op); break;
    case 2: OB_LAUNCH(q, MV_K(T, 2), grid, block, w, x, stride, n, b, y, ldy, op); break;
    case 4: OB_LAUNCH(q, MV_K(T, 4), grid, block, w, x, stride, n, b, y, ldy, op); break;
    default: OB_LAUNCH(q, MV_K(T, 8), grid, block, w, x, stride, n, b, y, ldy, op); break;
    }
#undef MV_K
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

template <class T, int TR>
__global__ static void k_mv_multi(struct ob_hrx_multi m, const char *xq, size_t stride, int n,
                                  int op)
{
    typedef typename T::W W;
    typedef typename T::A A;
    enum { HALF = MV_WARPS / 2 };
    __shared__ float up[HALF][TR];
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
    bool live = i < w.n;
    if (op == OB_HRX_EPI_STORE && !live)
        return;                    /* the whole warp: no shuffle is left half-reached */
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
            if (lane == 0 && r0 + r < n)
                y[(size_t)(r0 + r) * ldy + i] = v[r];
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
}

template <class T>
static void mvm_launch(struct ob_hrx_q *q, const struct ob_hrx_multi &m, const char *x,
                       size_t stride, int n, int op)
{
    int tr = n >= 5 ? 8 : n >= 3 ? 4 : n;
    long rows = op == OB_HRX_EPI_STORE ? 0 : m.w[0].n;
    if (op == OB_HRX_EPI_STORE)
        for (int j = 0; j < m.count; j++)
            rows += m.w[j].n;
    int per = op == OB_HRX_EPI_STORE ? MV_WARPS : MV_WARPS / 2;
    dim3 grid((unsigned)((rows + per - 1) / per), (unsigned)((n + tr - 1) / tr));
    dim3 block(MV_WARPS * OB_WARP);
#define MVM_K(T, TR) k_mv_multi<T, TR>
    switch (tr) {
    case 1: OB_LAUNCH(q, MVM_K(T, 1), grid, block, m, x, stride, n, op); break;
    case 2: OB_LAUNCH(q, MVM_K(T, 2), grid, block, m, x, stride, n, op); break;
    case 4: OB_LAUNCH(q, MVM_K(T, 4), grid, block, m, x, stride, n, op); break;
    default: OB_LAUNCH(q, MVM_K(T, 8), grid, block, m, x, stride, n, op); break;
    }
#undef MVM_K
}

extern "C" int OB_HRX_FN(matmul_multi)(struct ob_hrx_q *q, struct ob_hrx_multi m,
                                       const void *xq, size_t stride, int n, int op)
{
    bool glu = op == OB_HRX_EPI_SILU || op == OB_HRX_EPI_GELU;
    if (m.count < 1 || m.count > OB_HRX_MULTI || (op != OB_HRX_EPI_STORE && !glu) ||
        (glu && (m.count != 2 || m.w[0].n != m.w[1].n)))
        return ob_seterr(OB_EUSAGE, "hrx matmul_multi: %d matrices, op %d", m.count, op);
    int rows = 0;
    for (int j = 0; j < m.count; j++)
        rows += m.w[j].n;
    if (n <= 0 || rows <= 0)
        return 0;
    bool one = !OB_HRX_FN(big_tiles)(q) && n <= MV_MULTI_ROWS, quant = false;
    for (int j = 1; j < m.count; j++)
        one = one && m.w[j].type == m.w[0].type && m.w[j].k == m.w[0].k;
    switch (m.w[0].type) {
#define MM_Q(NAME, name, id, blck, bytes, ftype) case OB_##NAME: quant = true; break;
    OB_TYPES_QUANT(MM_Q)
#undef MM_Q
    }
    if (!one || !quant) {          /* a matmul launch a matrix, as the ops one by one */
        int e = 0;
        for (int j = 0; j < m.count && !e; j++)
            e = OB_HRX_FN(matmul)(q, m.w[j], xq, stride, n, m.b[j], glu ? m.y[0] : m.y[j],
                                  glu ? m.ldy[0] : m.ldy[j], glu && j ? op : OB_HRX_EPI_STORE);
        return e;
    }
    const char *x = (const char *)xq;
    switch (m.w[0].type) {
#define MM_Q(NAME, name, id, blck, bytes, ftype)                                        \
    case OB_##NAME: mvm_launch<t_##name>(q, m, x, stride, n, op); break;
    OB_TYPES_QUANT(MM_Q)
#undef MM_Q
    }
    if (!OB_HRX_FN(profiling)(q))
        return OB_HRX_FN(launched)(q, glu ? "matmul_glu" : "matmul_multi");
    char name[56];                 /* its own line in OB_HRX_PROFILE's table */
    snprintf(name, sizeof name, "matmul %s %s %dx%d %s", glu ? "glu" : "multi",
             ob_type_name(m.w[0].type), rows, m.w[0].k,
             n == 1 ? "w1" : n <= 8 ? "w2-8" : "w9+");
    return OB_HRX_FN(launched)(q, name);
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
    __shared__ float part[MM_THREADS][OB_WARP + 1];
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
                                 int op)
{
    if (n <= 0 || w.n <= 0)
        return 0;
    int S = ob_type_blck(w.type) == 256 ? 8 : 1;
    struct mm_tile g;
    g.tr = n >= 4 ? 4 : n >= 2 ? 2 : 1;
    g.tn = OB_HRX_FN(big_tiles)(q) ? MM_THREADS / g.tr : 8;
    g.cb = MM_ITEMS / (g.tn * g.tr * S);
    dim3 grid((unsigned)((w.n + g.tn - 1) / g.tn), (unsigned)((n + g.tr - 1) / g.tr));
    dim3 block(MM_THREADS);
    const char *x = (const char *)xq;
    bool tiles = OB_HRX_FN(big_tiles)(q);   /* hrx-sim's own geometry: the tiled kernel */
    switch (w.type) {
#define MM_Q(NAME, name, id, blck, bytes, ftype)                                        \
    case OB_##NAME:                                                                     \
        if (tiles)                                                                      \
            OB_LAUNCH(q, k_mm_q<t_##name>, grid, block, w, x, stride, n, b, y, ldy, op,  \
                      g);                                                               \
        else                                                                            \
            mv_launch<t_##name>(q, w, x, stride, n, b, y, ldy, op);                     \
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
    if (!OB_HRX_FN(profiling)(q))
        return OB_HRX_FN(launched)(q, "matmul");
    char name[56];                 /* the matmul's own line in OB_HRX_PROFILE's table */
    snprintf(name, sizeof name, "matmul %s %dx%d %s", ob_type_name(w.type), w.n, w.k,
             n == 1 ? "w1" : n <= 8 ? "w2-8" : "w9+");
    return OB_HRX_FN(launched)(q, name);
}
