/*
 * attn.hip — attention of the hrx routes: ob_attn_head of lib/arith/arith.h, bit for bit.
 *
 * One block of AT_THREADS (= OB_ATT_CHUNK = 64) threads per (query head, row):
 *   scores   thread t takes keys t, t + 64, ...: s_t = ob_dot_f32(q, k_t) * scale, the key
 *            converted from fp16 exactly, the 32 partials in registers and ob_fold32 — the
 *            reference's own sum, one thread per key; into the scratch row of this head;
 *   maximum  each thread scans its keys from s_0 (a later NaN never wins, an s_0 that is NaN
 *            always does, as in ob_max_f32's sequential scan), then thread 0 takes the largest
 *            of the 64 candidates, the lower position on a tie (the sequential scan keeps the
 *            first of equal values: +0 and -0 alike);
 *   chunks   for each chunk of 64 positions aligned to the first key, in increasing
 *            order: thread t computes e_t = ob_expf(s_t - m) into shared memory; thread 0 sums
 *            them in increasing t (l_c) and adds l_c to l; thread d (and d + 64, ...) runs the
 *            fmaf chain of o_c[d] over the chunk's positions in increasing t and adds it to
 *            o[d] — chunk after chunk, as the reference does;
 *   out[d] = o[d] / l.
 * The keys are positions first .. pos of the row's slot, first = ob_attn_first_key(pos,
 * window): 0 but on a sliding-window layer (gemma3), where key t above means position first + t
 * and the chunks start at the first key, as in ob_attn_head over the window.
 * Rows run AT_ROWS at a time (the scratch holds their scores: AT_ROWS * n_head * n_ctx
 * floats: ob_hrx_attn_scratch).
 */
#include "hrx/shim.h"
#include "hrx/warp.h"
#include "arith/arith.h"

#define AT_THREADS OB_ATT_CHUNK    /* one thread per position of a chunk */
#define AT_MAXD 4                  /* head dimensions a thread owns: hd <= 4 * 64 = 256 */
#define AT_ROWS OB_HRX_ATT_ROWS    /* rows of one launch */

OB_STATIC_ASSERT(AT_THREADS == 64, "one thread per position of a 64-position chunk");

__global__ static void k_attention(struct ob_hrx_attn a, const float *Q, const uint16_t *kc,
                                   const uint16_t *vc, const int32_t *pos, const int32_t *seq,
                                   float *out, float *scratch)
{
    OB_SHARED(float, e, [AT_THREADS]);
    OB_SHARED(float, cand, [AT_THREADS]);
    OB_SHARED(float, shared_m, );
    OB_SHARED(float, shared_l, );
    OB_SHARED(int, cand_at, [AT_THREADS]);
    int h = (int)blockIdx.x, i = (int)blockIdx.y, t = (int)threadIdx.x;
    int hd = a.hd, kvw = a.n_head_kv * hd, group = a.n_head / a.n_head_kv;
    int k0 = ob_attn_first_key(pos[i], a.window), nk = pos[i] + 1 - k0;
    const float *q = Q + ((size_t)i * a.n_head + h) * hd;
    size_t base = ((size_t)seq[i] * a.n_ctx + (size_t)k0) * kvw + (size_t)(h / group) * hd;
    const uint16_t *k = kc + base, *v = vc + base;
    float *s = scratch + ((size_t)i * a.n_head + h) * a.n_ctx;

    for (int tt = t; tt < nk; tt += AT_THREADS) {
        const uint16_t *kr = k + (size_t)tt * kvw;
        float p[OB_NPART];
        OB_UNROLL
        for (int j = 0; j < OB_NPART; j++)
            p[j] = 0.0f;
        /* partial j takes d = j, j + 32, ... in increasing d (a register each: j unrolled) */
        for (int d0 = 0; d0 < hd; d0 += OB_NPART) {
            OB_UNROLL
            for (int j = 0; j < OB_NPART; j++)
                if (d0 + j < hd)
                    p[j] = fmaf(q[d0 + j], ob_fp16_to_f32(kr[d0 + j]), p[j]);
        }
        s[tt] = ob_fold32(p) * a.scale;
    }
    __syncthreads();

    float m = s[0];
    int at = 0;
    for (int tt = t; tt < nk; tt += AT_THREADS)
        if (tt > 0 && s[tt] > m) {
            m = s[tt];
            at = tt;
        }
    cand[t] = m;
    cand_at[t] = at;
    __syncthreads();
    if (t == 0) {
        for (int u = 1; u < AT_THREADS; u++)
            if (cand[u] > m || (cand[u] == m && cand_at[u] < at)) {
                m = cand[u];
                at = cand_at[u];
            }
        shared_m = m;
    }
    __syncthreads();
    m = shared_m;

    float o[AT_MAXD], l = 0.0f;
    for (int u = 0; u < AT_MAXD; u++)
        o[u] = 0.0f;
    for (int c0 = 0; c0 < nk; c0 += OB_ATT_CHUNK) {
        int c1 = c0 + OB_ATT_CHUNK < nk ? c0 + OB_ATT_CHUNK : nk;
        if (c0 + t < c1)
            e[t] = ob_expf(s[c0 + t] - m);
        __syncthreads();
        if (t == 0) {
            float lc = 0.0f;
            for (int tt = c0; tt < c1; tt++)
                lc = lc + e[tt - c0];
            l = l + lc;
        }
        for (int u = 0; u < AT_MAXD; u++) {
            int d = t + u * AT_THREADS;
            if (d >= hd)
                break;
            float oc = 0.0f;
            for (int tt = c0; tt < c1; tt++)
                oc = fmaf(e[tt - c0], ob_fp16_to_f32(v[(size_t)tt * kvw + d]), oc);
            o[u] = o[u] + oc;
        }
        __syncthreads();
    }
    if (t == 0)
        shared_l = l;
    __syncthreads();
    float *y = out + ((size_t)i * a.n_head + h) * hd;
    for (int u = 0; u < AT_MAXD; u++) {
        int d = t + u * AT_THREADS;
        if (d < hd)
            y[d] = o[u] / shared_l;
    }
}

/*
 * The same on a GPU with more of the chip (hrx-sim runs k_attention above unless
 * OB_HRX_SIM_TILES=gpu): one block of AW_THREADS (8 warps) per (query head, row);
 *   scores   a warp a key, lane j holding partial j (d = j, j + 32, ... in increasing d: the
 *            shape of ob_dot_f32), folded by ob_warp_fold32 (ob_fold32's additions), times
 *            the scale;
 *   maximum  each thread scans its keys from s_0 as above; the (value, position) candidates
 *            meet pairwise, the larger value winning and the lower position on a tie — the
 *            candidate the sequential scan keeps, whatever order the pairs meet in;
 *   chunks   G = AW_THREADS / hd chunks at a time (at most AW_G): e_t = ob_expf(s_t - m) for
 *            their positions; thread (c, d) runs o_c[d]'s fmaf chain in increasing t; thread c
 *            sums l_c in increasing t; then thread d adds the G chunks' o_c[d] to o[d] and
 *            thread 0 their l_c to l, in increasing c — every chunk's sums and every
 *            addition of the reference, in its order.
 */
#define AW_THREADS 256
#define AW_WARPS (AW_THREADS / OB_WARP)
#define AW_G 32                    /* chunks at a time: hd >= AW_THREADS / AW_G = 8 */

__global__ static void k_attention_w(struct ob_hrx_attn a, const float *Q, const uint16_t *kc,
                                     const uint16_t *vc, const int32_t *pos, const int32_t *seq,
                                     float *out, float *scratch)
{
    OB_SHARED(float, e, [AW_G * OB_ATT_CHUNK]);
    OB_SHARED(float, oc, [AW_THREADS]);
    OB_SHARED(float, lc, [AW_G]);
    OB_SHARED(float, cand, [AW_WARPS]);
    OB_SHARED(int, cand_at, [AW_WARPS]);
    OB_SHARED(float, shared_m, );
    int h = (int)blockIdx.x, i = (int)blockIdx.y, t = (int)threadIdx.x;
    int lane = t & (OB_WARP - 1), wp = t / OB_WARP;
    int hd = a.hd, kvw = a.n_head_kv * hd, group = a.n_head / a.n_head_kv;
    int k0 = ob_attn_first_key(pos[i], a.window), nk = pos[i] + 1 - k0;
    const float *q = Q + ((size_t)i * a.n_head + h) * hd;
    size_t base = ((size_t)seq[i] * a.n_ctx + (size_t)k0) * kvw + (size_t)(h / group) * hd;
    const uint16_t *k = kc + base, *v = vc + base;
    float *s = scratch + ((size_t)i * a.n_head + h) * a.n_ctx;

    for (int tt = wp; tt < nk; tt += AW_WARPS) {
        const uint16_t *kr = k + (size_t)tt * kvw;
        float p = 0.0f;
        for (int d = lane; d < hd; d += OB_WARP)
            p = fmaf(q[d], ob_fp16_to_f32(kr[d]), p);
        p = ob_warp_fold32(p);
        if (lane == 0)
            s[tt] = p * a.scale;
    }
    __syncthreads();

    float m = s[0];
    int at = 0;
    for (int tt = t; tt < nk; tt += AW_THREADS)
        if (tt > 0 && s[tt] > m) {
            m = s[tt];
            at = tt;
        }
    OB_UNROLL
    for (int sh = 16; sh > 0; sh >>= 1) {
        float om = ob_shfl_xor(m, sh);
        int oat = ob_shfl_xor(at, sh);
        if (om > m || (om == m && oat < at)) {
            m = om;
            at = oat;
        }
    }
    if (lane == 0) {
        cand[wp] = m;
        cand_at[wp] = at;
    }
    __syncthreads();
    if (t == 0) {
        for (int u = 1; u < AW_WARPS; u++)
            if (cand[u] > m || (cand[u] == m && cand_at[u] < at)) {
                m = cand[u];
                at = cand_at[u];
            }
        shared_m = m;
    }
    __syncthreads();
    m = shared_m;

    int G = AW_THREADS / hd < AW_G ? AW_THREADS / hd : AW_G;
    int mc = t / hd, md = t % hd;          /* this thread's (chunk of the group, dimension) */
    float o = 0.0f, l = 0.0f;              /* o[t] (t < hd), l (thread 0) */
    for (int g0 = 0; g0 < nk; g0 += G * OB_ATT_CHUNK) {
        int g1 = g0 + G * OB_ATT_CHUNK < nk ? g0 + G * OB_ATT_CHUNK : nk;
        for (int tt = g0 + t; tt < g1; tt += AW_THREADS)
            e[tt - g0] = ob_expf(s[tt] - m);
        __syncthreads();
        int c0 = g0 + mc * OB_ATT_CHUNK;
        if (mc < G && c0 < g1) {
            int c1 = c0 + OB_ATT_CHUNK < g1 ? c0 + OB_ATT_CHUNK : g1;
            float acc = 0.0f;
            for (int tt = c0; tt < c1; tt++)
                acc = fmaf(e[tt - g0], ob_fp16_to_f32(v[(size_t)tt * kvw + md]), acc);
            oc[t] = acc;
            if (md == 0) {
                float sum = 0.0f;
                for (int tt = c0; tt < c1; tt++)
                    sum = sum + e[tt - g0];
                lc[mc] = sum;
            }
        }
        __syncthreads();
        int nc = (g1 - g0 + OB_ATT_CHUNK - 1) / OB_ATT_CHUNK;
        if (t < hd)
            for (int c = 0; c < nc; c++)
                o = o + oc[c * hd + t];
        if (t == 0)
            for (int c = 0; c < nc; c++)
                l = l + lc[c];
        __syncthreads();
    }
    if (t == 0)
        lc[0] = l;
    __syncthreads();
    if (t < hd)
        out[((size_t)i * a.n_head + h) * hd + t] = o / lc[0];
}

/*
 * The same with the keys split over blocks (a GPU's default: the kernel above gives a (head,
 * row) one block, which at one row a step leaves most of a GPU idle while it walks the keys).
 * Three launches, each a grid of (head, row, z): block z takes the groups of AS_CHUNKS chunks
 * z, z + gridDim.z, ... of that head and row (256 positions, a thread each where a thread
 * stands for a position):
 *   k_att_scores  s_t as in k_attention_w (a warp a key, lane j holding partial j, folded
 *                 by ob_warp_fold32; AS_KEYS keys at a time, so that their loads overlap),
 *                 into the scratch row; then each chunk's candidate for the
 *                 maximum: chunk 0 scans from s_0 as the sequential scan does (an s_0 that is
 *                 NaN wins, no later NaN does), a later chunk from -Inf (its NaNs are passed
 *                 over, as the scan from a number passes them); the (value, position) pairs
 *                 meet by shuffles, the larger value winning and the lower position on a tie;
 *   k_att_chunks  m = chunk 0's candidate, then each later chunk's in increasing order where
 *                 it is larger: the sequential scan's value (it keeps the first of the largest,
 *                 and the chunks are in position order); e_t = ob_expf(s_t - m); per chunk l_c
 *                 (one thread, increasing t) and o_c[d] (the thread of d, its fmaf chain in
 *                 increasing t), into the scratch;
 *   k_att_combine l = 0 + l_0 + l_1 ..., o[d] likewise in increasing chunk order, out[d] =
 *                 o[d] / l: every addition of the reference, in its order.
 * Scratch (ob_hrx_attn_scratch): scores [rows][n_head][n_ctx], then maxima and l_c
 * [rows][n_head][chunks] each, then o_c [rows][n_head][chunks][hd].
 */
#define AS_THREADS 256
#define AS_CHUNKS (AS_THREADS / OB_ATT_CHUNK)   /* chunks of a group: a thread a position */
#define AS_WARPS (AS_THREADS / OB_WARP)
#define AS_KEYS 4                               /* keys a warp scores at a time */
#define AS_BLOCKS 1024                          /* blocks a launch aims at (grid z below) */

/* a (head, row)'s keys and its places in the scratch */
struct as_at {
    int nk, nch, ng;               /* keys, chunks, groups */
    size_t base;                   /* first key's offset in the caches */
    float *s, *cm, *lc, *oc;
};

__device__ static inline struct as_at as_where(const struct ob_hrx_attn &a, const int32_t *pos,
                                               const int32_t *seq, float *scratch, int rows,
                                               int h, int i)
{
    struct as_at w;
    int k0 = ob_attn_first_key(pos[i], a.window), group = a.n_head / a.n_head_kv;
    size_t nc = ((size_t)a.n_ctx + OB_ATT_CHUNK - 1) / OB_ATT_CHUNK, rh = (size_t)rows * a.n_head;
    size_t at = (size_t)i * a.n_head + (size_t)h;
    w.nk = pos[i] + 1 - k0;
    w.nch = (w.nk + OB_ATT_CHUNK - 1) / OB_ATT_CHUNK;
    w.ng = (w.nch + AS_CHUNKS - 1) / AS_CHUNKS;
    w.base = ((size_t)seq[i] * a.n_ctx + (size_t)k0) * (size_t)(a.n_head_kv * a.hd) +
             (size_t)(h / group) * a.hd;
    w.s = scratch + at * a.n_ctx;
    w.cm = scratch + rh * a.n_ctx + at * nc;
    w.lc = w.cm + rh * nc;
    w.oc = scratch + rh * (a.n_ctx + 2 * nc) + at * nc * a.hd;
    return w;
}

__global__ static void k_att_scores(struct ob_hrx_attn a, const float *Q, const uint16_t *kc,
                                    const int32_t *pos, const int32_t *seq, float *scratch,
                                    int rows)
{
    OB_SHARED(float, qh, [AT_MAXD * AT_THREADS]);
    OB_SHARED(float, sc, [AS_THREADS]);
    OB_SHARED(float, cand, [AS_WARPS]);
    int h = (int)blockIdx.x, i = (int)blockIdx.y, t = (int)threadIdx.x;
    int lane = t & (OB_WARP - 1), wp = t / OB_WARP, hd = a.hd, kvw = a.n_head_kv * hd;
    struct as_at w = as_where(a, pos, seq, scratch, rows, h, i);
    if ((int)blockIdx.z >= w.ng)
        return;                    /* the whole block: no barrier is left half-reached */
    const float *q = Q + ((size_t)i * a.n_head + h) * hd;
    for (int d = t; d < hd; d += AS_THREADS)
        qh[d] = q[d];
    __syncthreads();
    for (int g = (int)blockIdx.z; g < w.ng; g += (int)gridDim.z) {
        int g0 = g * AS_THREADS;
        /* a warp a key, AS_KEYS keys at a time: lane j's partial takes d = j, j + 32, ... */
        for (int u0 = 0; u0 < AS_THREADS / AS_WARPS; u0 += AS_KEYS) {
            float p[AS_KEYS];
            OB_UNROLL
            for (int u = 0; u < AS_KEYS; u++) {
                int tt = g0 + wp + AS_WARPS * (u0 + u);
                p[u] = 0.0f;
                if (tt < w.nk) {
                    const uint16_t *kr = kc + w.base + (size_t)tt * kvw;
                    for (int d = lane; d < hd; d += OB_WARP)
                        p[u] = fmaf(qh[d], ob_fp16_to_f32(kr[d]), p[u]);
                }
            }
            OB_UNROLL
            for (int u = 0; u < AS_KEYS; u++) {
                int tt = g0 + wp + AS_WARPS * (u0 + u);
                float v = ob_warp_fold32(p[u]) * a.scale;
                if (lane == 0) {
                    sc[tt - g0] = v;
                    if (tt < w.nk)
                        w.s[tt] = v;
                }
            }
        }
        __syncthreads();
        int tt = g0 + t;
        float v = sc[t];
        /* this position's candidate: chunk 0 from s_0, a later chunk from -Inf */
        float m;
        int at = tt;
        if (tt < OB_ATT_CHUNK) {
            float s0 = sc[0];
            bool take = tt > 0 && tt < w.nk && v > s0;
            m = take ? v : s0;
            at = take ? tt : 0;
        } else {
            m = tt < w.nk && v > -INFINITY ? v : -INFINITY;
        }
        OB_UNROLL
        for (int sh = 16; sh > 0; sh >>= 1) {
            float om = ob_shfl_xor(m, sh);
            int oat = ob_shfl_xor(at, sh);
            if (om > m || (om == m && oat < at)) {
                m = om;
                at = oat;
            }
        }
        if (lane == 0)
            cand[wp] = m;
        __syncthreads();
        /* a chunk is two warps; the first of them has the lower positions */
        int c = g * AS_CHUNKS + t / OB_ATT_CHUNK;
        if (t % OB_ATT_CHUNK == 0 && c < w.nch) {
            float m0 = cand[2 * (t / OB_ATT_CHUNK)], m1 = cand[2 * (t / OB_ATT_CHUNK) + 1];
            w.cm[c] = m1 > m0 ? m1 : m0;
        }
        __syncthreads();
    }
}

/* k_att_chunks' work for its (head, row) w: the groups of chunks blockIdx.z, + gridDim.z, ...
 * (every thread of the block; e and shared_m its shared memory) */
__device__ static inline void as_chunks(const struct ob_hrx_attn &a, const uint16_t *vc,
                                        const struct as_at &w, float *e, float *shared_m, int t)
{
    int hd = a.hd, kvw = a.n_head_kv * hd;
    if (t == 0) {
        float m = w.cm[0];
        for (int c = 1; c < w.nch; c++)
            m = w.cm[c] > m ? w.cm[c] : m;
        *shared_m = m;
    }
    __syncthreads();
    float m = *shared_m;
    const uint16_t *v = vc + w.base;
    int G = AS_THREADS / hd < AS_CHUNKS ? AS_THREADS / hd : AS_CHUNKS;
    int mc = t / hd, md = t % hd;  /* this thread's (chunk of the round, dimension) */
    for (int g = (int)blockIdx.z; g < w.ng; g += (int)gridDim.z) {
        int g0 = g * AS_THREADS;
        if (g0 + t < w.nk)
            e[t] = ob_expf(w.s[g0 + t] - m);
        __syncthreads();
        for (int r = 0; r < AS_CHUNKS; r += G) {
            int c = g * AS_CHUNKS + r + mc, c0 = c * OB_ATT_CHUNK;
            if (mc < G && r + mc < AS_CHUNKS && c0 < w.nk) {
                int c1 = c0 + OB_ATT_CHUNK < w.nk ? c0 + OB_ATT_CHUNK : w.nk;
                float acc = 0.0f;
                for (int tt = c0; tt < c1; tt++)
                    acc = fmaf(e[tt - g0], ob_fp16_to_f32(v[(size_t)tt * kvw + md]), acc);
                w.oc[(size_t)c * hd + md] = acc;
                if (md == 0) {
                    float sum = 0.0f;
                    for (int tt = c0; tt < c1; tt++)
                        sum = sum + e[tt - g0];
                    w.lc[c] = sum;
                }
            }
        }
        __syncthreads();
    }
}

/* what k_att_chunks' last block of a row does (attention_q with a.fold): that row's combine
 * and quantisation, as k_att_combine_q's launch would (fmt's blocks into xq) */
struct as_fold {
    unsigned *ctr;                 /* NULL: nothing, a launch of its own does it */
    float *out;
    int fmt;
    char *xq;
    size_t stride;
};

__device__ static OB_NOINLINE void as_combine_row(struct ob_hrx_attn a, const int32_t *pos,
                                                  const int32_t *seq, float *scratch, int rows,
                                                  int i, struct as_fold f);

__global__ static void k_att_chunks(struct ob_hrx_attn a, const uint16_t *vc,
                                    const int32_t *pos, const int32_t *seq, float *scratch,
                                    int rows, struct as_fold f)
{
    OB_SHARED(float, e, [AS_THREADS]);
    OB_SHARED(float, shared_m, );
    int h = (int)blockIdx.x, i = (int)blockIdx.y, t = (int)threadIdx.x;
    struct as_at w = as_where(a, pos, seq, scratch, rows, h, i);
    if ((int)blockIdx.z < w.ng)    /* the whole block: its barriers are all or none */
        as_chunks(a, vc, w, e, &shared_m, t);
    /* every block of the launch arrives, those with no group too */
    if (f.ctr && ob_last_block(f.ctr + i, (unsigned)a.n_head * gridDim.z))
        as_combine_row(a, pos, seq, scratch, rows, i, f);
}

/* l = 0 + l_0 + l_1 ... in increasing chunk order */
__device__ static inline float as_l(const struct as_at &w)
{
    float l = 0.0f;
    for (int c = 0; c < w.nch; c++)
        l = l + w.lc[c];
    return l;
}

/* out[d] = (0 + o_0[d] + o_1[d] ...) / l */
__device__ static inline float as_out(const struct as_at &w, int hd, int d, float l)
{
    float o = 0.0f;
    for (int c = 0; c < w.nch; c++)
        o = o + w.oc[(size_t)c * hd + d];
    return o / l;
}

__global__ static void k_att_combine(struct ob_hrx_attn a, const int32_t *pos,
                                     const int32_t *seq, float *out, float *scratch, int rows)
{
    int h = (int)blockIdx.x, i = (int)blockIdx.y, hd = a.hd;
    struct as_at w = as_where(a, pos, seq, scratch, rows, h, i);
    float l = as_l(w);
    for (int d = (int)threadIdx.x; d < hd; d += (int)blockDim.x)
        out[((size_t)i * a.n_head + h) * hd + d] = as_out(w, hd, d, l);
}

/* blocks z of a split launch: enough for AS_BLOCKS in all, no more than the groups of n_ctx
 * (a function of the shapes alone, so a recorded graph stays right for every step) */
static unsigned as_z(const struct ob_hrx_attn &a, int rows)
{
    int groups = (a.n_ctx + AS_THREADS - 1) / AS_THREADS;
    int z = AS_BLOCKS / (a.n_head * rows);
    return (unsigned)(z < 1 ? 1 : z < groups ? z : groups);
}

/*
 * attention_q: the split kernels with their last launch folded into the quantisation of the
 * output rows for the next product (k_att_combine_q: a warp an activation block of a row, each
 * lane's V values computed as k_att_combine does, then ob_warp_actq of them, as rmsnorm_q
 * quantises what it has just normalised). The floats are stored too.
 */
#define AQ_WARPS 4

/* activation block b of row i: each lane's V values as k_att_combine computes them, stored,
 * and the warp's quantisation of them into the row at xq (every lane of the warp calls it) */
template <int V>
__device__ static inline void as_combine_q(const struct ob_hrx_attn &a, const int32_t *pos,
                                           const int32_t *seq, float *out, float *scratch,
                                           int rows, char *xq, int i, int b, int lane)
{
    int hd = a.hd;
    float v[V], l = 0.0f;
    int lh = -1;                   /* the head whose l is in l */
    OB_UNROLL
    for (int u = 0; u < V; u++) {
        int at = b * V * OB_WARP + lane * V + u, h = at / hd, d = at % hd;
        struct as_at w = as_where(a, pos, seq, scratch, rows, h, i);
        if (h != lh) {
            l = as_l(w);
            lh = h;
        }
        v[u] = as_out(w, hd, d, l);
    }
    /* stored after all V are computed: a store before the next value's reads made nvcc wait
     * for each value's round trip in turn (out may alias what it reads, as far as it knows) */
    OB_UNROLL
    for (int u = 0; u < V; u++)
        out[(size_t)i * a.n_head * hd + b * V * OB_WARP + lane * V + u] = v[u];
    ob_warp_actq<V>(v, lane, xq, b);
}

template <int V>
__global__ static void k_att_combine_q(struct ob_hrx_attn a, const int32_t *pos,
                                       const int32_t *seq, float *out, float *scratch, int rows,
                                       char *xq, size_t stride)
{
    int i = (int)blockIdx.y, lane = (int)threadIdx.x % OB_WARP;
    int b = (int)blockIdx.x * AQ_WARPS + (int)threadIdx.x / OB_WARP;
    if (b >= a.n_head * a.hd / (V * OB_WARP))
        return;                    /* the whole warp */
    as_combine_q<V>(a, pos, seq, out, scratch, rows, xq + (size_t)i * stride, i, b, lane);
}

/* row i's blocks, a warp a block (k_att_chunks' last block of the row: AS_WARPS warps) */
__device__ static OB_NOINLINE void as_combine_row(struct ob_hrx_attn a, const int32_t *pos,
                                                  const int32_t *seq, float *scratch, int rows,
                                                  int i, struct as_fold f)
{
    int lane = (int)threadIdx.x % OB_WARP, V = f.fmt == OB_HRX_ACT_Q8K ? 8 : 1;
    char *row = f.xq + (size_t)i * f.stride;
    for (int b = (int)threadIdx.x / OB_WARP; b < a.n_head * a.hd / (V * OB_WARP); b += AS_WARPS)
        if (V == 8)
            as_combine_q<8>(a, pos, seq, f.out, scratch, rows, row, i, b, lane);
        else
            as_combine_q<1>(a, pos, seq, f.out, scratch, rows, row, i, b, lane);
}

/* the rows [r0, r0 + rows) of attention (and of attention_q where xq: fmt's blocks too) */
static int att_rows(struct ob_hrx_q *q, const struct ob_hrx_attn &a, const float *Q,
                    const uint16_t *kc, const uint16_t *vc, const int32_t *pos,
                    const int32_t *seq, int rows, float *out, float *scratch, int fmt, char *xq,
                    size_t stride)
{
    if (OB_HRX_FN(big_tiles)(q))
        OB_LAUNCH(q, k_attention, dim3((unsigned)a.n_head, (unsigned)rows), dim3(AT_THREADS), a,
                  Q, kc, vc, pos, seq, out, scratch);
    else if (a.whole)
        OB_LAUNCH(q, k_attention_w, dim3((unsigned)a.n_head, (unsigned)rows), dim3(AW_THREADS),
                  a, Q, kc, vc, pos, seq, out, scratch);
    else {
        dim3 grid((unsigned)a.n_head, (unsigned)rows, as_z(a, rows));
        int e;
        OB_LAUNCH(q, k_att_scores, grid, dim3(AS_THREADS), a, Q, kc, pos, seq, scratch, rows);
        if ((e = OB_HRX_FN(launched)(q, "attention scores")))
            return e;
        /* the combine and quantisation by the chunks launch's last block of each row */
        int nc = 0;
        unsigned *ctr = xq && a.fold ? OB_HRX_FN(counters)(q, &nc) : NULL;
        struct as_fold f = {ctr && nc >= rows ? ctr : NULL, out, fmt, xq, stride};
        OB_LAUNCH(q, k_att_chunks, grid, dim3(AS_THREADS), a, vc, pos, seq, scratch, rows, f);
        if (f.ctr)
            return OB_HRX_FN(launched)(q, "attention chunks +combine_q");
        if ((e = OB_HRX_FN(launched)(q, "attention chunks")))
            return e;
        if (xq) {
            int V = fmt == OB_HRX_ACT_Q8K ? 8 : 1, nb = a.n_head * a.hd / (V * OB_WARP);
            dim3 g2((unsigned)((nb + AQ_WARPS - 1) / AQ_WARPS), (unsigned)rows);
            if (V == 8)
                OB_LAUNCH(q, k_att_combine_q<8>, g2, dim3(AQ_WARPS * OB_WARP), a, pos, seq, out,
                          scratch, rows, xq, stride);
            else
                OB_LAUNCH(q, k_att_combine_q<1>, g2, dim3(AQ_WARPS * OB_WARP), a, pos, seq, out,
                          scratch, rows, xq, stride);
            return OB_HRX_FN(launched)(q, "attention_q");
        }
        OB_LAUNCH(q, k_att_combine, dim3((unsigned)a.n_head, (unsigned)rows),
                  dim3((unsigned)((a.hd + OB_WARP - 1) / OB_WARP * OB_WARP)), a, pos, seq, out,
                  scratch, rows);
    }
    int e = OB_HRX_FN(launched)(q, "attention");
    if (e || !xq)
        return e;
    return OB_HRX_FN(actq)(q, fmt, out, rows, a.n_head * a.hd, xq, stride);
}

static int att_check(const struct ob_hrx_attn &a)
{
    if (a.hd > AT_MAXD * AT_THREADS || a.n_head_kv < 1 || a.n_head % a.n_head_kv)
        return ob_seterr(OB_EUNSUPP, "hrx attention: %d heads of %d dimensions over %d key "
                         "heads (at most %d dimensions, whole groups)", a.n_head, a.hd,
                         a.n_head_kv, AT_MAXD * AT_THREADS);
    return 0;
}

extern "C" int OB_HRX_FN(attention)(struct ob_hrx_q *q, struct ob_hrx_attn a, const float *Q,
                                    const uint16_t *kc, const uint16_t *vc, const int32_t *pos,
                                    const int32_t *seq, int n, float *out, float *scratch)
{
    int e = att_check(a);
    size_t w = (size_t)a.n_head * a.hd;
    for (int r0 = 0; r0 < n && !e; r0 += AT_ROWS)
        e = att_rows(q, a, Q + r0 * w, kc, vc, pos + r0, seq + r0,
                     n - r0 < AT_ROWS ? n - r0 : AT_ROWS, out + r0 * w, scratch, 0, NULL, 0);
    return e;
}

extern "C" int OB_HRX_FN(attention_q)(struct ob_hrx_q *q, struct ob_hrx_attn a, const float *Q,
                                      const uint16_t *kc, const uint16_t *vc,
                                      const int32_t *pos, const int32_t *seq, int n, float *out,
                                      float *scratch, int fmt, void *xq, size_t stride)
{
    int e = att_check(a), bl = fmt == OB_HRX_ACT_Q8K ? 256 : 32;
    size_t w = (size_t)a.n_head * a.hd;
    if (!e && (fmt == OB_HRX_ACT_F32 || (int)(w % (size_t)bl)))   /* no blocks to fold in */
        return (e = OB_HRX_FN(attention)(q, a, Q, kc, vc, pos, seq, n, out, scratch))
                   ? e : OB_HRX_FN(actq)(q, fmt, out, n, (int)w, xq, stride);
    for (int r0 = 0; r0 < n && !e; r0 += AT_ROWS)
        e = att_rows(q, a, Q + r0 * w, kc, vc, pos + r0, seq + r0,
                     n - r0 < AT_ROWS ? n - r0 : AT_ROWS, out + r0 * w, scratch, fmt,
                     (char *)xq + (size_t)r0 * stride, stride);
    return e;
}
