/*
 * mm.hip — matrix products of the hrx routes and the quantisation of their activations.
 *
 *   actq    one thread a block: ob_quantize_q8k (256 values) or ob_quantize_a8 (32 values) of
 *           lib/arith/arith.h, or a copy of the floats — the canonical functions themselves
 *   matmul  y[r][i] = ob_dot_<type>(w row i, xq row r) of lib/arith/dot.h, bit for bit
 *
 * The product. A CUDA block of MM_THREADS threads takes a tile of tn weight rows x tr
 * activation rows (tn * tr = MM_THREADS "pairs"; tr = 1 for a decode step, up to 4 for a wide
 * batch or a prefill). Quantised weights, chunk by chunk of MM_CB blocks:
 *   phase 1  every thread computes block values r_b = ob_blk_<type>(w block, a block) — the
 *            canonical per-block function: integer sums, then its float epilogue — for items
 *            (pair, block) of the chunk, neighbouring threads on neighbouring blocks of one
 *            row (the weight row is read in order across the warp), into shared memory;
 *   phase 2  the thread of a pair adds its chunk's r_b into partial b mod 8, in increasing b,
 *            as ob_dot_<type> does (the chunk starts at a multiple of 8, so partial j & 7 of
 *            the chunk is partial b & 7 of the row);
 * then ob_fold8 of the 8 partials, and the bias added after (one rounding, as the cpu route's
 * separate ob_add_f32). Float weights (F32, F16, BF16): item (pair, j) is ob_dot_f32's partial
 * j, the fmaf chain over elements j, j + 32, ... in increasing order; the pair's thread folds
 * the 32 partials with ob_fold32. No sum is ever split differently from the reference, so no
 * result depends on the tile, the batch or the device.
 */
#include "hrx/shim.h"
#include "arith/dot.h"

#define MM_THREADS 128             /* threads of a block = pairs of a tile */
#define MM_CB 32                   /* quantised blocks of a chunk: a multiple of 8 */

OB_STATIC_ASSERT(MM_CB % 8 == 0, "chunks start at a multiple of the 8 partials");

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

/* a weight type: its block, its activation block, values a block, the canonical block value */
#define MM_TYPE(name, wt, at, qk)                                                        \
    struct t_##name {                                                                    \
        typedef wt W;                                                                    \
        typedef at A;                                                                    \
        enum { QK = qk };                                                                \
        __device__ static float blk(const W *w, const A *a) { return ob_blk_##name(w, a); } \
    };
MM_TYPE(q4_0, struct ob_block_q4_0, struct ob_act_a8, 32)
MM_TYPE(q4_1, struct ob_block_q4_1, struct ob_act_a8, 32)
MM_TYPE(q5_0, struct ob_block_q5_0, struct ob_act_a8, 32)
MM_TYPE(q5_1, struct ob_block_q5_1, struct ob_act_a8, 32)
MM_TYPE(q8_0, struct ob_block_q8_0, struct ob_act_a8, 32)
MM_TYPE(q2_k, struct ob_block_q2_k, struct ob_block_q8_k, 256)
MM_TYPE(q3_k, struct ob_block_q3_k, struct ob_block_q8_k, 256)
MM_TYPE(q4_k, struct ob_block_q4_k, struct ob_block_q8_k, 256)
MM_TYPE(q5_k, struct ob_block_q5_k, struct ob_block_q8_k, 256)
MM_TYPE(q6_k, struct ob_block_q6_k, struct ob_block_q8_k, 256)
#undef MM_TYPE

template <class T>
__global__ static void k_mm_q(struct ob_hrx_mat w, const char *xq, size_t stride, int n,
                              const float *bias, float *y, size_t ldy, int tr)
{
    __shared__ float rb[MM_THREADS][MM_CB + 1];
    int tn = MM_THREADS / tr, t = (int)threadIdx.x;
    int n0 = (int)blockIdx.x * tn, r0 = (int)blockIdx.y * tr, nb = w.k / T::QK;
    int my_n = n0 + t % tn, my_r = r0 + t / tn;
    float p[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int b0 = 0; b0 < nb; b0 += MM_CB) {
        int cb = nb - b0 < MM_CB ? nb - b0 : MM_CB;
        for (int it = t; it < MM_THREADS * MM_CB; it += MM_THREADS) {
            int pr = it / MM_CB, j = it % MM_CB;
            int wn = n0 + pr % tn, ar = r0 + pr / tn;
            if (j < cb && wn < w.n && ar < n) {
                const typename T::W *wb =
                    (const typename T::W *)((const char *)w.data + (size_t)wn * w.row_bytes);
                const typename T::A *ab = (const typename T::A *)(xq + (size_t)ar * stride);
                rb[pr][j] = T::blk(wb + b0 + j, ab + b0 + j);
            }
        }
        __syncthreads();
        for (int j8 = 0; j8 < cb; j8 += 8)
            for (int u = 0; u < 8; u++)
                if (j8 + u < cb)
                    p[u] = p[u] + rb[t][j8 + u];
        __syncthreads();
    }
    if (my_n < w.n && my_r < n) {
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
                              const float *bias, float *y, size_t ldy, int tr)
{
    __shared__ float part[MM_THREADS][OB_WARP + 1];
    int tn = MM_THREADS / tr, t = (int)threadIdx.x;
    int n0 = (int)blockIdx.x * tn, r0 = (int)blockIdx.y * tr;
    for (int it = t; it < MM_THREADS * OB_WARP; it += MM_THREADS) {
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
    if (my_n < w.n && my_r < n) {
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
    int tr = n >= 4 ? 4 : n >= 2 ? 2 : 1, tn = MM_THREADS / tr;
    dim3 grid((unsigned)((w.n + tn - 1) / tn), (unsigned)((n + tr - 1) / tr)), block(MM_THREADS);
    const char *x = (const char *)xq;
    switch (w.type) {
#define MM_Q(T, name)                                                                   \
    case T:                                                                             \
        OB_LAUNCH(q, k_mm_q<t_##name>, grid, block, w, x, stride, n, b, y, ldy, tr);    \
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
    case OB_F32: OB_LAUNCH(q, k_mm_f<OB_F32>, grid, block, w, x, stride, n, b, y, ldy, tr); break;
    case OB_F16: OB_LAUNCH(q, k_mm_f<OB_F16>, grid, block, w, x, stride, n, b, y, ldy, tr); break;
    case OB_BF16: OB_LAUNCH(q, k_mm_f<OB_BF16>, grid, block, w, x, stride, n, b, y, ldy, tr); break;
    default:
        return ob_seterr(OB_EUNSUPP, "hrx: no kernel for %s weights", ob_type_name(w.type));
    }
    return OB_HRX_FN(launched)(q, "matmul");
}
