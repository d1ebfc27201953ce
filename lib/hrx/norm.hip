/*
 * norm.hip — the row and elementwise ops of the hrx routes, each bitwise equal to lib/arith/:
 *
 *   embed     one thread a weight block: ob_dequant_<type> (dequant.h), as ob_dequant_row,
 *             then ob_scale_f32's y * s per value when a scale is given (gemma3)
 *   rmsnorm   one warp a row: lane j holds ob_dot_f32's partial j (the fmaf chain over
 *             x[j], x[j + 32], ...), ob_warp_fold32 gives every lane ob_fold32's sum, then
 *             ob_rms_factor and ob_rms_apply's (x * r) * w per element
 *   rmsnorm_q the same, and the row's activation blocks quantised by its warp (a GPU; hrx-sim
 *             launches rmsnorm, then actq)
 *   qk_rope   one warp a head of a row: the same q/k norm over head_dim values (when the model
 *             has it), then ob_rope's rotation of each pair, a lane per pair
 *   kv_store  one thread a value: ob_f32_to_fp16 (ob_kv_put)
 *   rope_kv   qk_rope's warps, a K head's writing its rotated values into the KV cache as
 *             ob_f32_to_fp16 (ob_kv_put) instead of into K, with V's head of the row
 *   swiglu    one thread a value: ob_silu(g) * u
 *   geglu     one thread a value: ob_gelu(g) * u (ob_geglu)
 *   add       one thread a value: y + x (ob_add_f32)
 */
#include "hrx/shim.h"
#include "hrx/warp.h"
#include "arith/arith.h"
#include "arith/dequant.h"

#define NT 128                     /* threads of a block */

static inline unsigned blocks_for(long items, int per)
{
    return (unsigned)((items + per - 1) / per);
}

/* ---- embed ------------------------------------------------------------------------------------ */

/* a block's address, converted to the pointer type the dequantiser of its type takes */
struct block_ptr {
    const void *p;
    template <class B>
    __device__ operator const B *() const { return (const B *)p; }
};

__global__ static void k_embed(struct ob_hrx_mat w, int bl, int bs, const int32_t *tok, int n,
                               float scale, float *x)
{
    long nb = w.k / bl, i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)n * nb)
        return;
    long r = i / nb, b = i % nb;
    const void *src = (const char *)w.data + (size_t)tok[r] * w.row_bytes + (size_t)b * bs;
    float *y = x + r * w.k + b * bl;
#define DQ(NAME, name, id, blck, bytes, ftype)                                          \
    case OB_##NAME: ob_dequant_##name(block_ptr{src}, y); break;
    switch (w.type) {
    OB_TYPES_WEIGHT(DQ)
    }
#undef DQ
    if (scale != 0.0f)
        for (int j = 0; j < bl; j++)
            y[j] = y[j] * scale;
}

extern "C" int OB_HRX_FN(embed)(struct ob_hrx_q *q, struct ob_hrx_mat w, const int32_t *tok,
                                int n, float scale, float *x)
{
    switch (w.type) {
    OB_TYPES_WEIGHT(OB_TYPE_CASE)
        break;
    default:
        return ob_seterr(OB_EUNSUPP, "hrx: no embedding kernel for %s", ob_type_name(w.type));
    }
    int bl = (int)ob_type_blck(w.type), bs = (int)ob_type_size(w.type);
    long items = (long)n * (w.k / bl);
    if (items <= 0)
        return 0;
    OB_LAUNCH(q, k_embed, dim3(blocks_for(items, NT)), dim3(NT), w, bl, bs, tok, n, scale,
              x);
    return OB_HRX_FN(launched)(q, "embed");
}

/* ---- rmsnorm ------------------------------------------------------------------------------------ */

__global__ static void k_rmsnorm(const float *x, const int32_t *rows, int n, int k,
                                 const float *w, float eps, float *y)
{
    int j = (int)(blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP);
    int lane = (int)threadIdx.x % OB_WARP;
    if (j >= n)
        return;                    /* the whole warp: no lane of it shuffles */
    const float *xr = x + (size_t)(rows ? rows[j] : j) * k;
    float *yr = y + (size_t)j * k;
    float r = ob_rms_factor(ob_warp_fold32(ob_lane_sumsq(xr, k, lane)), k, eps);
    /* 8 values a lane at a time, read before any is written: y may be x (in place), so the
     * compiler would otherwise wait for each read after the previous store */
    for (int i0 = lane; i0 < k; i0 += 8 * OB_WARP) {
        float xv[8], wv[8];
        OB_UNROLL
        for (int u = 0; u < 8; u++) {
            bool in = i0 + u * OB_WARP < k;
            xv[u] = in ? xr[i0 + u * OB_WARP] : 0.0f;
            wv[u] = in ? w[i0 + u * OB_WARP] : 0.0f;
        }
        OB_UNROLL
        for (int u = 0; u < 8; u++)
            if (i0 + u * OB_WARP < k)
                yr[i0 + u * OB_WARP] = (xv[u] * r) * wv[u];
    }
}

extern "C" int OB_HRX_FN(rmsnorm)(struct ob_hrx_q *q, const float *x, const int32_t *rows, int n,
                                  int k, const float *w, float eps, float *y)
{
    if (n <= 0)
        return 0;
    OB_LAUNCH(q, k_rmsnorm, dim3(blocks_for(n, NT / OB_WARP)), dim3(NT), x, rows, n, k, w, eps,
              y);
    return OB_HRX_FN(launched)(q, "rmsnorm");
}

/* rmsnorm and the quantisation of its rows in one launch (a GPU): a warp a row (warp.h) */
template <int V>
__global__ static void k_rmsnorm_q(const float *x, int n, int k, const float *w, float eps,
                                   float *y, char *xq, size_t stride)
{
    int j = (int)(blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP);
    if (j >= n)
        return;                    /* the whole warp */
    ob_warp_rmsnorm_q<V>(x + (size_t)j * k, k, w, eps, y + (size_t)j * k, xq + (size_t)j * stride);
}

extern "C" int OB_HRX_FN(rmsnorm_q)(struct ob_hrx_q *q, const float *x, int n, int k,
                                    const float *w, float eps, float *y, int fmt, void *xq,
                                    size_t stride)
{
    int bl = fmt == OB_HRX_ACT_Q8K ? 256 : 32;
    if (fmt == OB_HRX_ACT_F32 || OB_HRX_FN(big_tiles)(q) || k % bl) {
        int e = OB_HRX_FN(rmsnorm)(q, x, NULL, n, k, w, eps, y);
        return e ? e : OB_HRX_FN(actq)(q, fmt, y, n, k, xq, stride);
    }
    if (n <= 0)
        return 0;
    if (fmt == OB_HRX_ACT_Q8K)
        OB_LAUNCH(q, k_rmsnorm_q<8>, dim3(blocks_for(n, NT / OB_WARP)), dim3(NT), x, n, k, w,
                  eps, y, (char *)xq, stride);
    else
        OB_LAUNCH(q, k_rmsnorm_q<1>, dim3(blocks_for(n, NT / OB_WARP)), dim3(NT), x, n, k, w,
                  eps, y, (char *)xq, stride);
    return OB_HRX_FN(launched)(q, "rmsnorm_q");
}

/* ---- q/k norm and RoPE ---------------------------------------------------------------------------- */

/* where rope_kv puts a K head: its fp16 row in kc, and V's head converted into vc (k_kv_store's
 * ob_f32_to_fp16 at the same place); qk_rope passes none and rotates K in place */
struct rope_kv_dst {
    const float *V;
    const int32_t *seq;
    int n_ctx;
    uint16_t *kc, *vc;
};

template <bool KV>
__global__ static void k_qk_rope(struct ob_hrx_rope r, float *Q, float *K, const int32_t *pos,
                                 int n, struct rope_kv_dst kv)
{
    int nh = r.n_head + r.n_head_kv;
    long wi = (long)blockIdx.x * (blockDim.x / OB_WARP) + threadIdx.x / OB_WARP;
    int lane = (int)threadIdx.x % OB_WARP;
    if (wi >= (long)n * nh)
        return;                    /* the whole warp */
    int i = (int)(wi / nh), h = (int)(wi % nh);
    bool is_q = h < r.n_head;
    float *x = is_q ? Q + ((size_t)i * r.n_head + h) * r.hd
                    : K + ((size_t)i * r.n_head_kv + (h - r.n_head)) * r.hd;
    uint16_t *hk = NULL;           /* rope_kv's K head in the cache: x is then only read */
    if (KV && !is_q) {
        int kvw = r.n_head_kv * r.hd;
        size_t at = ((size_t)kv.seq[i] * kv.n_ctx + pos[i]) * kvw + (size_t)(h - r.n_head) * r.hd;
        hk = kv.kc + at;
        ob_warp_fp16(kv.V + ((size_t)i * r.n_head_kv + (h - r.n_head)) * r.hd, kv.vc + at, r.hd,
                     lane);
    }
    ob_warp_rope(r, x, is_q ? r.q_norm : r.k_norm, pos[i], hk, lane);
}

extern "C" int OB_HRX_FN(qk_rope)(struct ob_hrx_q *q, struct ob_hrx_rope r, float *Q, float *K,
                                  const int32_t *pos, int n)
{
    long warps = (long)n * (r.n_head + r.n_head_kv);
    if (warps <= 0)
        return 0;
    struct rope_kv_dst none = {NULL, NULL, 0, NULL, NULL};
    OB_LAUNCH(q, k_qk_rope<false>, dim3(blocks_for(warps, NT / OB_WARP)), dim3(NT), r, Q, K,
              pos, n, none);
    return OB_HRX_FN(launched)(q, "qk_rope");
}

/* qk_rope and kv_store in one launch: Q rotated in place as qk_rope does; a K head's warp
 * rotates it into kc (what kv_store would make of qk_rope's K: nothing later reads K) and
 * converts V's head of the same row into vc */
extern "C" int OB_HRX_FN(rope_kv)(struct ob_hrx_q *q, struct ob_hrx_rope r, float *Q,
                                  const float *K, const float *V, const int32_t *pos,
                                  const int32_t *seq, int n, int n_ctx, uint16_t *kc,
                                  uint16_t *vc)
{
    long warps = (long)n * (r.n_head + r.n_head_kv);
    if (warps <= 0)
        return 0;
    struct rope_kv_dst kv = {V, seq, n_ctx, kc, vc};
    OB_LAUNCH(q, k_qk_rope<true>, dim3(blocks_for(warps, NT / OB_WARP)), dim3(NT), r, Q,
              (float *)K, pos, n, kv);
    return OB_HRX_FN(launched)(q, "rope_kv");
}

/* ---- KV store, swiglu, geglu, add ---------------------------------------------------------------------- */

__global__ static void k_kv_store(const float *K, const float *V, int kvw, const int32_t *pos,
                                  const int32_t *seq, int n, int n_ctx, uint16_t *kc,
                                  uint16_t *vc)
{
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)n * kvw)
        return;
    long r = i / kvw, e = i % kvw;
    size_t at = ((size_t)seq[r] * n_ctx + pos[r]) * kvw + e;
    kc[at] = ob_f32_to_fp16(K[i]);
    vc[at] = ob_f32_to_fp16(V[i]);
}

extern "C" int OB_HRX_FN(kv_store)(struct ob_hrx_q *q, const float *K, const float *V, int kvw,
                                   const int32_t *pos, const int32_t *seq, int n, int n_ctx,
                                   uint16_t *kc, uint16_t *vc)
{
    long items = (long)n * kvw;
    if (items <= 0)
        return 0;
    OB_LAUNCH(q, k_kv_store, dim3(blocks_for(items, NT)), dim3(NT), K, V, kvw, pos, seq, n,
              n_ctx, kc, vc);
    return OB_HRX_FN(launched)(q, "kv_store");
}

__global__ static void k_swiglu(float *g, const float *u, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        g[i] = ob_silu(g[i]) * u[i];
}

extern "C" int OB_HRX_FN(swiglu)(struct ob_hrx_q *q, float *g, const float *u, size_t n)
{
    if (n == 0)
        return 0;
    OB_LAUNCH(q, k_swiglu, dim3(blocks_for((long)n, NT)), dim3(NT), g, u, n);
    return OB_HRX_FN(launched)(q, "swiglu");
}

__global__ static void k_geglu(float *g, const float *u, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        g[i] = ob_gelu(g[i]) * u[i];
}

extern "C" int OB_HRX_FN(geglu)(struct ob_hrx_q *q, float *g, const float *u, size_t n)
{
    if (n == 0)
        return 0;
    OB_LAUNCH(q, k_geglu, dim3(blocks_for((long)n, NT)), dim3(NT), g, u, n);
    return OB_HRX_FN(launched)(q, "geglu");
}

__global__ static void k_add(float *y, const float *x, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = y[i] + x[i];
}

extern "C" int OB_HRX_FN(add)(struct ob_hrx_q *q, float *y, const float *x, size_t n)
{
    if (n == 0)
        return 0;
    OB_LAUNCH(q, k_add, dim3(blocks_for((long)n, NT)), dim3(NT), y, x, n);
    return OB_HRX_FN(launched)(q, "add");
}
