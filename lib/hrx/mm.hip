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
#include "hrx/shim.h"
#include "arith/dot.h"

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

extern "C" int OB_HRX_FN(actq)(struct ob_hrx_q *q, int fmt, const float *x, int n, int k,
                               void *xq, size_t stride)
{
    int bl = fmt == OB_HRX_ACT_Q8K ? 256 : fmt == OB_HRX_ACT_A8 ? 32 : 1;
    if (k % bl)
        return ob_seterr(OB_EUSAGE, "hrx actq: a row of %d values is not a multiple of %d", k, bl);
    long items = (long)n * (k / bl);
    if (items <= 0)
        return 0;
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
MM_TYPE32(q4_0, struct ob_block_q4_0)
MM_TYPE32(q4_1, struct ob_block_q4_1)
MM_TYPE32(q5_0, struct ob_block_q5_0)
MM_TYPE32(q5_1, struct ob_block_q5_1)
MM_TYPE32(q8_0, struct ob_block_q8_0)
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
                              const float *bias, float *y, size_t ldy, struct mm_tile g)
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
        if (bias)
            v = v + bias[my_n];
        y[(size_t)my_r * ldy + my_n] = v;
    }
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
                              const float *bias, float *y, size_t ldy, struct mm_tile g)
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
        if (bias)
            v = v + bias[my_n];
        y[(size_t)my_r * ldy + my_n] = v;
    }
}

extern "C" int OB_HRX_FN(matmul)(struct ob_hrx_q *q, struct ob_hrx_mat w, const void *xq,
                                 size_t stride, int n, const float *b, float *y, size_t ldy)
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
    switch (w.type) {
#define MM_Q(T, name)                                                                   \
    case T:                                                                             \
        OB_LAUNCH(q, k_mm_q<t_##name>, grid, block, w, x, stride, n, b, y, ldy, g);     \
        break;
    MM_Q(OB_Q4_0, q4_0)
    MM_Q(OB_Q4_1, q4_1)
    MM_Q(OB_Q5_0, q5_0)
    MM_Q(OB_Q5_1, q5_1)
    MM_Q(OB_Q8_0, q8_0)
    MM_Q(OB_Q2_K, q2_k)
    MM_Q(OB_Q3_K, q3_k)
    MM_Q(OB_Q4_K, q4_k)
    MM_Q(OB_Q5_K, q5_k)
    MM_Q(OB_Q6_K, q6_k)
#undef MM_Q
    case OB_F32: OB_LAUNCH(q, k_mm_f<OB_F32>, grid, block, w, x, stride, n, b, y, ldy, g); break;
    case OB_F16: OB_LAUNCH(q, k_mm_f<OB_F16>, grid, block, w, x, stride, n, b, y, ldy, g); break;
    case OB_BF16: OB_LAUNCH(q, k_mm_f<OB_BF16>, grid, block, w, x, stride, n, b, y, ldy, g); break;
    default:
        return ob_seterr(OB_EUNSUPP, "hrx: no kernel for %s weights", ob_type_name(w.type));
    }
    return OB_HRX_FN(launched)(q, "matmul");
}
