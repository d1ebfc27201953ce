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
 *   chunks   for each chunk of 64 positions aligned to absolute position 0, in increasing
 *            order: thread t computes e_t = ob_expf(s_t - m) into shared memory; thread 0 sums
 *            them in increasing t (l_c) and adds l_c to l; thread d (and d + 64, ...) runs the
 *            fmaf chain of o_c[d] over the chunk's positions in increasing t and adds it to
 *            o[d] — chunk after chunk, as the reference does;
 *   out[d] = o[d] / l.
 * Rows run AT_ROWS at a time (the scratch holds their scores: AT_ROWS * n_head * n_ctx
 * floats: ob_hrx_attn_scratch).
 */
#include "hrx/shim.h"
#include "arith/arith.h"

#define AT_THREADS OB_ATT_CHUNK    /* one thread per position of a chunk */
#define AT_MAXD 4                  /* head dimensions a thread owns: hd <= 4 * 64 = 256 */
#define AT_ROWS OB_HRX_ATT_ROWS    /* rows of one launch */

OB_STATIC_ASSERT(AT_THREADS == 64, "one thread per position of a 64-position chunk");

__global__ static void k_attention(struct ob_hrx_attn a, const float *Q, const uint16_t *kc,
                                   const uint16_t *vc, const int32_t *pos, const int32_t *seq,
                                   float *out, float *scratch)
{
    __shared__ float e[AT_THREADS], cand[AT_THREADS], shared_m, shared_l;
    __shared__ int cand_at[AT_THREADS];
    int h = (int)blockIdx.x, i = (int)blockIdx.y, t = (int)threadIdx.x;
    int hd = a.hd, kvw = a.n_head_kv * hd, group = a.n_head / a.n_head_kv;
    int nk = pos[i] + 1;
    const float *q = Q + ((size_t)i * a.n_head + h) * hd;
    size_t base = (size_t)seq[i] * a.n_ctx * kvw + (size_t)(h / group) * hd;
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

extern "C" int OB_HRX_FN(attention)(struct ob_hrx_q *q, struct ob_hrx_attn a, const float *Q,
                                    const uint16_t *kc, const uint16_t *vc, const int32_t *pos,
                                    const int32_t *seq, int n, float *out, float *scratch)
{
    if (a.hd > AT_MAXD * AT_THREADS || a.n_head_kv < 1 || a.n_head % a.n_head_kv)
        return ob_seterr(OB_EUNSUPP, "hrx attention: %d heads of %d dimensions over %d key "
                         "heads (at most %d dimensions, whole groups)", a.n_head, a.hd,
                         a.n_head_kv, AT_MAXD * AT_THREADS);
    for (int r0 = 0; r0 < n; r0 += AT_ROWS) {
        int rows = n - r0 < AT_ROWS ? n - r0 : AT_ROWS;
        OB_LAUNCH(q, k_attention, dim3((unsigned)a.n_head, (unsigned)rows), dim3(AT_THREADS), a,
                  Q + (size_t)r0 * a.n_head * a.hd, kc, vc, pos + r0, seq + r0,
                  out + (size_t)r0 * a.n_head * a.hd, scratch);
        int e = OB_HRX_FN(launched)(q, "attention");
        if (e)
            return e;
    }
    return 0;
}
