/*
 * quant.c — the host's weight-format API (quant.h): the row dequantiser, a loop over the
 * canonical per-block dequantisers of lib/arith/dequant.h (bit for bit gguf-py's, see there),
 * and the reference quantisers.
 *
 * Quantisers: deterministic, float32/double + - * / and comparisons only, in a fixed order.
 *   F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: the classic rules (absmax or min/max per block),
 *     written so that the bytes equal gguf-py's quantisers (which follow ggml's _ref code).
 *   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: for each sub-block a least-squares fit of its scale (and min)
 *     over a few candidate grids (fit_asym, fit_sym); the sub-block scales are then quantised
 *     against one fp16 super-block scale, and every value is finally rounded to the nearest
 *     point of the grid the dequantiser will actually use.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "1b.h"
#include "arith/dequant.h"
#include "arith/q4nx.h"
#include "quant.h"

/* the list's geometry is the structs' (types.h, arith/blocks.h, arith/q4nx.h) */
#define SIZE(NAME, name, id, blck, bytes, ftype)                                    \
    _Static_assert(sizeof(struct ob_block_##name) == bytes, #name ": types.h's size");
OB_TYPES_QUANT(SIZE)
OB_TYPES_ACT(SIZE)
OB_TYPES_PACK(SIZE)
#undef SIZE

/* ---- dequantisation: rows of the per-block dequantisers (lib/arith/dequant.h) ------------- */

bool ob_dequant_supported(uint32_t type)
{
    switch (type) {
    OB_TYPES_QUANTISE(OB_TYPE_CASE)
    OB_TYPES_ACT(OB_TYPE_CASE)
        return true;
    }
    return false;
}

static int check_n(const char *what, uint32_t type, int64_t n)
{
    uint32_t bl = ob_type_blck(type);
    if (n < 0 || n % bl)
        return ob_seterr(OB_EUSAGE, "%s %s: %lld values is not a multiple of the block size %u",
                         what, ob_type_name(type), (long long)n, bl);
    return 0;
}

int ob_dequant_row(uint32_t type, const void *src, float *dst, int64_t n)
{
    if (!ob_dequant_supported(type))
        return ob_seterr(OB_EUNSUPP, "dequantise: type %s is not supported", ob_type_name(type));
    int err = check_n("dequantise", type, n);
    if (err)
        return err;
    if (type == OB_F32) {                                   /* the bits, as ob_dequant_f32 */
        memcpy(dst, src, (size_t)n * sizeof(float));
        return 0;
    }
    const uint8_t *p = src;

    /* one case per type of the list, the loop inside: the block function is inlined into
     * each loop (ob_dequant_<name> of arith/dequant.h) */
#define DQ_LOOP(NAME, name, id, blck, bytes, ftype)                                 \
    case OB_##NAME:                                                                 \
        for (int64_t i = 0; i < n / blck; i++)                                      \
            ob_dequant_##name((const void *)(p + i * bytes), dst + i * blck);       \
        return 0;
    switch (type) {
    OB_TYPES_QUANTISE(DQ_LOOP)
    OB_TYPES_ACT(DQ_LOOP)
    }
#undef DQ_LOOP
    return 0;
}

/* ---- quantiser helpers ------------------------------------------------------------------------ */

/*
 * Round v to the nearest integer (halves up: floor(v + 0.5)) and clamp to lo..hi; NaN gives lo.
 * The float is shifted and clamped to 0..hi-lo before the conversion, so (int) truncation is
 * floor and never sees an out-of-range value (which would be undefined behaviour).
 */
static inline int round_clamp(float v, int lo, int hi)
{
    float t = v + (0.5f - (float)lo);
    float top = (float)(hi - lo);
    t = t > 0.0f ? t : 0.0f;
    t = t < top ? t : top;
    return lo + (int)t;
}

/* Round half away from zero (C's roundf, numpy's np_roundf) for |v| < 2^23. */
static inline int round_away(float v)
{
    float a = fabsf(v);
    int i = (int)a;
    i += a - (float)i >= 0.5f;
    return v < 0.0f ? -i : i;
}

/* Truncate toward zero and clamp to 0..hi; the numpy code's trunc(...).astype(uint8).clip(). */
static inline int trunc_clamp(float v, int hi)
{
    if (!(v >= 1.0f))
        return 0;
    if (v >= (float)hi)
        return hi;
    return (int)v;
}

/* Store a block scale as fp16; OB_ERANGE when it does not fit (|v| >= 65520). */
static int put_fp16(uint16_t *out, float v, uint32_t type, int64_t blk)
{
    uint16_t h = ob_f32_to_fp16(v);
    if ((h & 0x7c00u) == 0x7c00u)
        return ob_seterr(OB_ERANGE, "quantise %s: block %lld: scale %g does not fit fp16",
                         ob_type_name(type), (long long)blk, (double)v);
    *out = h;
    return 0;
}

/* ---- float types: a value a block, its bits (F32) or rounded to nearest even (blocks.h) ---- */

static int q_f32(const float *x, float *b, int64_t blk)
{
    memcpy(b, x, sizeof *b);
    return 0;
}

static int q_f16(const float *x, uint16_t *b, int64_t blk)
{
    *b = ob_f32_to_fp16(*x);
    return 0;
}

static int q_bf16(const float *x, uint16_t *b, int64_t blk)
{
    *b = ob_f32_to_bf16(*x);
    return 0;
}

/* ---- classic 32-value blocks (gguf-py / ggml reference rules) -------------------------------- */

static int q_q8_0(const float *x, struct ob_block_q8_0 *b, int64_t blk)
{
    float amax = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++)
        b->qs[j] = (int8_t)round_away(x[j] * id);
    return put_fp16(&b->d, d, OB_Q8_0, blk);
}

/* The value of largest magnitude, the first one on ties (numpy's argmax of abs). */
static float absmax_signed(const float *x, int n)
{
    float m = x[0], am = fabsf(x[0]);
    for (int j = 1; j < n; j++)
        if (fabsf(x[j]) > am) {
            am = fabsf(x[j]);
            m = x[j];
        }
    return m;
}

static int q_q4_0(const float *x, struct ob_block_q4_0 *b, int64_t blk)
{
    float d = absmax_signed(x, 32) / -8.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; j++) {
        int q0 = trunc_clamp(x[j] * id + 8.5f, 15);
        int q1 = trunc_clamp(x[j + 16] * id + 8.5f, 15);
        b->qs[j] = (uint8_t)(q0 | q1 << 4);
    }
    return put_fp16(&b->d, d, OB_Q4_0, blk);
}

static void minmax(const float *x, int n, float *lo, float *hi)
{
    float a = x[0], b = x[0];
    for (int j = 1; j < n; j++) {
        if (x[j] < a)
            a = x[j];
        if (x[j] > b)
            b = x[j];
    }
    *lo = a;
    *hi = b;
}

static int q_q4_1(const float *x, struct ob_block_q4_1 *b, int64_t blk)
{
    float lo, hi;
    minmax(x, 32, &lo, &hi);
    float d = (hi - lo) / 15.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; j++) {
        int q0 = trunc_clamp((x[j] - lo) * id + 0.5f, 15);
        int q1 = trunc_clamp((x[j + 16] - lo) * id + 0.5f, 15);
        b->qs[j] = (uint8_t)(q0 | q1 << 4);
    }
    int err = put_fp16(&b->d, d, OB_Q4_1, blk);
    return err ? err : put_fp16(&b->m, lo, OB_Q4_1, blk);
}

static void pack_q5(const int *q, uint8_t *qs, uint8_t *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
    for (int j = 0; j < 32; j++)
        h |= (uint32_t)(q[j] >> 4) << j;
    for (int i = 0; i < 4; i++)
        qh[i] = (uint8_t)(h >> (8 * i));
}

static int q_q5_0(const float *x, struct ob_block_q5_0 *b, int64_t blk)
{
    float d = absmax_signed(x, 32) / -16.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = trunc_clamp(x[j] * id + 16.5f, 31);
    pack_q5(q, b->qs, b->qh);
    return put_fp16(&b->d, d, OB_Q5_0, blk);
}

static int q_q5_1(const float *x, struct ob_block_q5_1 *b, int64_t blk)
{
    float lo, hi;
    minmax(x, 32, &lo, &hi);
    float d = (hi - lo) / 31.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = trunc_clamp((x[j] - lo) * id + 0.5f, 31);
    pack_q5(q, b->qs, b->qh);
    int err = put_fp16(&b->d, d, OB_Q5_1, blk);
    return err ? err : put_fp16(&b->m, lo, OB_Q5_1, blk);
}

/* ---- Q4NX tiles (lib/arith/q4nx.h): bf16 step s and zero z, x ~ s * q + z ------------------- */

/* Store a tile field as bfloat16; OB_ERANGE when it overflows to Inf. */
static int put_bf16(uint16_t *out, float v, int64_t blk)
{
    uint16_t h = ob_f32_to_bf16(v);
    if ((h & 0x7f80u) == 0x7f80u)
        return ob_seterr(OB_ERANGE, "quantise Q4NX: tile %lld: %g does not fit bfloat16",
                         (long long)blk, (double)v);
    *out = h;
    return 0;
}

/* the q nearest each value on the grid s * q + z (s, z as stored), and the squared error */
static double q4nx_fit(const float *x, uint16_t sb, uint16_t zb, int *q)
{
    float s = ob_bf16_to_f32(sb), z = ob_bf16_to_f32(zb);
    double err = 0;
    for (int j = 0; j < 32; j++) {
        q[j] = s > 0.0f ? round_clamp((x[j] - z) / s, 0, 15) : 0;
        double d = (double)(s * (float)q[j] + z) - (double)x[j];   /* the dequantised value */
        err += d * d;
    }
    return err;
}

/* (s, z) if it fits the block better than the best so far (strictly: the first wins ties) */
static void q4nx_try(const float *x, uint16_t s, uint16_t z, uint16_t *bs, uint16_t *bz,
                     double *best, int *bq)
{
    int q[32];
    float sf = ob_bf16_to_f32(s), zf = ob_bf16_to_f32(z);
    if (!(sf > 0.0f) || sf == ob_inf() || zf != zf || zf == ob_inf() || zf == -ob_inf())
        return;
    double e = q4nx_fit(x, s, z, q);
    if (e < *best) {
        *best = e;
        *bs = s;
        *bz = z;
        memcpy(bq, q, sizeof q);
    }
}

/*
 * A search over bf16 pairs (s, z), each judged by the squared error of the dequantised block
 * with every q the nearest point of that grid; the smallest error wins, the first on ties:
 *   1. the block's range in k = 15, 14, .., 8 steps: z = bf16(min), s = bf16((max - z) / k)
 *      (a source that was already a grid of 16 levels, Q4_K or Q4_1, often uses fewer of
 *      them in a block: one of these finds its step);
 *   2. a least-squares refit of (s, z) to the best one's q (closed form in double), rounded;
 *   3. the eight bf16 neighbours of the best (s and z one unit in the last place up or down):
 *      rounding s and z separately to 8 significant bits is not the best pair.
 * A block of equal values gets s = 0 (every q 0) and z its value rounded.
 */
static int q_q4nx(const float *x, struct ob_block_q4nx *b, int64_t blk)
{
    float lo, hi;
    minmax(x, 32, &lo, &hi);
    uint16_t z0 = 0, s0 = 0, bs = 0, bz = 0;
    int e = put_bf16(&z0, lo, blk);
    if (!e)
        e = put_bf16(&s0, (hi - ob_bf16_to_f32(z0)) / 15.0f, blk);
    if (e)
        return e;
    double best = INFINITY;
    int q[32] = {0};
    for (int k = 15; k >= 8; k--)
        q4nx_try(x, ob_f32_to_bf16((hi - ob_bf16_to_f32(z0)) / (float)k), z0, &bs, &bz, &best, q);
    if (best == INFINITY) {        /* every value equal (or a step below bf16's range) */
        b->s = 0;
        b->z = z0;
        memset(b->qs, 0, sizeof b->qs);
        return 0;
    }
    int nq = 0, nqq = 0;
    double sx = 0, sqx = 0;
    for (int j = 0; j < 32; j++) {
        nq += q[j];
        nqq += q[j] * q[j];
        sx += x[j];
        sqx += q[j] * (double)x[j];
    }
    int64_t den = 32 * (int64_t)nqq - (int64_t)nq * nq;
    if (den > 0) {
        double sl = (32 * sqx - nq * sx) / (double)den, zl = (nqq * sx - nq * sqx) / (double)den;
        if (sl > 0 && fabs(sl) < 3e38 && fabs(zl) < 3e38)
            q4nx_try(x, ob_f32_to_bf16((float)sl), ob_f32_to_bf16((float)zl), &bs, &bz, &best, q);
    }
    uint16_t cs = bs, cz = bz;
    for (int ds = -1; ds <= 1; ds++)
        for (int dz = -1; dz <= 1; dz++)
            if (ds || dz)
                q4nx_try(x, (uint16_t)(cs + ds), (uint16_t)(cz + dz), &bs, &bz, &best, q);
    b->s = bs;
    b->z = bz;
    for (int j = 0; j < 16; j++)
        b->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
    return 0;
}

/* ---- K-quant sub-block fits ---------------------------------------------------------------- */

/*
 * fit_asym: fit x[0..n) ~ s*q - m with integers q in 0..nmax, s >= 0 and m >= 0 (the stored
 * mins are unsigned, so the grid always reaches down to 0 or below), minimising the squared
 * error. Each candidate grid maps [lo, hi] onto 0..nmax+delta; its q are rounded, then (s, m) are
 * refitted by least squares for those q (closed form, m clamped to >= 0); the candidate with the
 * smallest error wins (the first one on ties). Sums are in double: integer sums are exact, and
 * sum(q*x) runs in four interleaved chains added in a fixed order.
 */
static const float asym_delta[] = { 0.0f, -0.5f, 0.5f, 1.0f };
#define N_ASYM ((int)(sizeof asym_delta / sizeof asym_delta[0]))

static void fit_asym(const float *x, int n, int nmax, float *s_out, float *m_out)   /* n: 16 or 32 */
{
    float lo, hi;
    minmax(x, n, &lo, &hi);
    if (lo > 0.0f)
        lo = 0.0f;
    if (!(hi > lo)) {                  /* every value equals lo <= 0 */
        *s_out = 0.0f;
        *m_out = -lo;
        return;
    }
    double sx = 0, sxx = 0, xd[32];
    float xs[32];
    for (int i = 0; i < n; i++) {
        xd[i] = x[i];
        sx += xd[i];
        sxx += xd[i] * xd[i];
        xs[i] = x[i] - lo;
    }
    double best_err = 0, best_s = (hi - lo) / (float)nmax, best_b = lo;
    bool have = false;
    for (int c = 0; c < N_ASYM; c++) {
        float iscale = ((float)nmax + asym_delta[c]) / (hi - lo);
        int nq = 0, nqq = 0;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;   /* four chains, summed in a fixed order */
        for (int i = 0; i < n; i += 4) {
            int q0 = round_clamp(xs[i] * iscale, 0, nmax);
            int q1 = round_clamp(xs[i + 1] * iscale, 0, nmax);
            int q2 = round_clamp(xs[i + 2] * iscale, 0, nmax);
            int q3 = round_clamp(xs[i + 3] * iscale, 0, nmax);
            nq += q0 + q1 + q2 + q3;
            nqq += q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3;
            a0 += q0 * xd[i];
            a1 += q1 * xd[i + 1];
            a2 += q2 * xd[i + 2];
            a3 += q3 * xd[i + 3];
        }
        double sqx = (a0 + a1) + (a2 + a3);
        int64_t den = (int64_t)n * nqq - (int64_t)nq * nq;
        if (den <= 0)
            continue;
        double s = ((double)n * sqx - (double)nq * sx) / (double)den;
        double b = ((double)nqq * sx - (double)nq * sqx) / (double)den;
        if (b > 0) {
            b = 0;
            s = sqx / (double)nqq;
        }
        if (!(s > 0))
            continue;
        double err = sxx - 2 * s * sqx - 2 * b * sx + s * s * (double)nqq + 2 * s * b * (double)nq
                     + b * b * n;
        if (!have || err < best_err) {
            have = true;
            best_err = err;
            best_s = s;
            best_b = b;
        }
    }
    *s_out = (float)best_s;
    *m_out = (float)-best_b;
}

/*
 * fit_sym: fit x[0..n) ~ s*q with integers q in -nneg..npos (s may be negative), minimising
 * the squared error. Candidate grids put the value of largest magnitude near -nneg (using the
 * longer side of the range) or near +npos; for each, the best s for its q is sum(qx)/sum(q^2)
 * and the error falls as sum(qx)^2/sum(q^2) rises.
 */
static const float sym_mult[] = { -1.0f, -0.9375f, -1.0625f, 1.0f };
#define N_SYM ((int)(sizeof sym_mult / sizeof sym_mult[0]))

static float fit_sym(const float *x, int n, int nneg, int npos)    /* n: 16 */
{
    float mx = absmax_signed(x, n);
    if (mx == 0.0f)
        return 0.0f;
    double best_sqx = 0, xd[16];
    int best_nqq = 0;
    for (int i = 0; i < n; i++)
        xd[i] = x[i];
    for (int c = 0; c < N_SYM; c++) {
        float iscale = (sym_mult[c] * (float)(sym_mult[c] < 0 ? nneg : npos)) / mx;
        int nqq = 0;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;   /* four chains, summed in a fixed order */
        for (int i = 0; i < n; i += 4) {
            int q0 = round_clamp(x[i] * iscale, -nneg, npos);
            int q1 = round_clamp(x[i + 1] * iscale, -nneg, npos);
            int q2 = round_clamp(x[i + 2] * iscale, -nneg, npos);
            int q3 = round_clamp(x[i + 3] * iscale, -nneg, npos);
            nqq += q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3;
            a0 += q0 * xd[i];
            a1 += q1 * xd[i + 1];
            a2 += q2 * xd[i + 2];
            a3 += q3 * xd[i + 3];
        }
        double sqx = (a0 + a1) + (a2 + a3);
        /* score sqx^2 / nqq, compared by cross-multiplication (nqq > 0) */
        if (nqq > 0 && (best_nqq == 0 || sqx * sqx * best_nqq > best_sqx * best_sqx * nqq)) {
            best_sqx = sqx;
            best_nqq = nqq;
        }
    }
    return best_nqq ? (float)(best_sqx / best_nqq) : 0.0f;
}

/* Quantise a non-negative sub-block scale against its fp16 super-scale d16 to 0..hi. */
static inline int quant_scale_u(float s, float d16, int hi)
{
    return d16 > 0.0f ? round_clamp(s / d16, 0, hi) : 0;
}

/* ---- K-quant super-blocks -------------------------------------------------------------------- */

/*
 * Q4_K and Q5_K (nmax 15 or 31): 8 sub-blocks of 32. The fitted scales s[j] and mins m[j] are
 * quantised to 6 bits against d = max s / 63 and dmin = max m / 63 (both stored as fp16 and
 * used as decoded), then each value gets the q nearest to it on the grid (d*sc)*q - dmin*m.
 */
static int q_k4(const float *x, int nmax, uint16_t *dp, uint16_t *dminp, uint8_t *scales, uint8_t *q,
                uint32_t type, int64_t blk)
{
    float s[8], m[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        fit_asym(x + 32 * j, 32, nmax, &s[j], &m[j]);
        if (s[j] > smax)
            smax = s[j];
        if (m[j] > mmax)
            mmax = m[j];
    }
    int err = put_fp16(dp, smax / 63.0f, type, blk);
    if (!err)
        err = put_fp16(dminp, mmax / 63.0f, type, blk);
    if (err)
        return err;
    float d16 = ob_fp16_to_f32(*dp), dmin16 = ob_fp16_to_f32(*dminp);
    uint8_t sc[8], mi[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)quant_scale_u(s[j], d16, 63);
        mi[j] = (uint8_t)quant_scale_u(m[j], dmin16, 63);
    }
    ob_k4_pack_scales(sc, mi, scales);
    for (int j = 0; j < 8; j++) {
        float ds = d16 * (float)sc[j], dm = dmin16 * (float)mi[j];
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (uint8_t)(ds > 0.0f ? round_clamp((x[32 * j + l] + dm) / ds, 0, nmax) : 0);
    }
    return 0;
}

static int q_q4_k(const float *x, struct ob_block_q4_k *b, int64_t blk)
{
    uint8_t q[OB_QK_K];
    int err = q_k4(x, 15, &b->d, &b->dmin, b->scales, q, OB_Q4_K, blk);
    if (err)
        return err;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    return 0;
}

static int q_q5_k(const float *x, struct ob_block_q5_k *b, int64_t blk)
{
    uint8_t q[OB_QK_K];
    int err = q_k4(x, 31, &b->d, &b->dmin, b->scales, q, OB_Q5_K, blk);
    if (err)
        return err;
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b->qs[32 * c + l] = (uint8_t)((q[64 * c + l] & 15) | (q[64 * c + 32 + l] & 15) << 4);
    for (int l = 0; l < 32; l++) {
        uint8_t h = 0;
        for (int j = 0; j < 8; j++)
            h |= (uint8_t)((q[32 * j + l] >> 4) << j);
        b->qh[l] = h;
    }
    return 0;
}

/*
 * Q2_K: 16 sub-blocks of 16, q in 0..3; scales and mins quantised to 4 bits against
 * d = max s / 15 and dmin = max m / 15.
 */
static int q_q2_k(const float *x, struct ob_block_q2_k *b, int64_t blk)
{
    float s[16], m[16], smax = 0, mmax = 0;
    for (int k = 0; k < 16; k++) {
        fit_asym(x + 16 * k, 16, 3, &s[k], &m[k]);
        if (s[k] > smax)
            smax = s[k];
        if (m[k] > mmax)
            mmax = m[k];
    }
    int err = put_fp16(&b->d, smax / 15.0f, OB_Q2_K, blk);
    if (!err)
        err = put_fp16(&b->dmin, mmax / 15.0f, OB_Q2_K, blk);
    if (err)
        return err;
    float d16 = ob_fp16_to_f32(b->d), dmin16 = ob_fp16_to_f32(b->dmin);
    uint8_t q[OB_QK_K];
    for (int k = 0; k < 16; k++) {
        int sc = quant_scale_u(s[k], d16, 15), mi = quant_scale_u(m[k], dmin16, 15);
        b->scales[k] = (uint8_t)(sc | mi << 4);
        float dl = d16 * (float)sc, ml = dmin16 * (float)mi;
        for (int l = 0; l < 16; l++)
            q[16 * k + l] = (uint8_t)(dl > 0.0f ? round_clamp((x[16 * k + l] + ml) / dl, 0, 3) : 0);
    }
    memset(b->qs, 0, sizeof b->qs);
    for (int f = 0; f < OB_QK_K; f++)    /* f = h*128 + s*32 + l */
        b->qs[(f / 128) * 32 + f % 32] |= (uint8_t)(q[f] << (2 * ((f / 32) & 3)));
    return 0;
}

/*
 * Symmetric K-quants, Q3_K (q in -4..3, 6-bit signed scales) and Q6_K (q in -32..31, int8
 * scales): 16 sub-blocks of 16. The fitted scales are quantised against d = s_max / -smin, where
 * s_max is the scale of largest magnitude (so it lands on the longer, negative end -smin), then
 * each value gets q = x / (d*sc) rounded and clamped.
 */
static int q_sym_k(const float *x, int nneg, int npos, int smin, int smax, uint16_t *dp,
                   int8_t *sc, int8_t *q, uint32_t type, int64_t blk)
{
    float s[16];
    for (int k = 0; k < 16; k++)
        s[k] = fit_sym(x + 16 * k, 16, nneg, npos);
    float d = absmax_signed(s, 16) / (float)-smin;
    int err = put_fp16(dp, d != 0.0f ? d : 0.0f, type, blk);     /* +0, not -0, for a zero block */
    if (err)
        return err;
    float d16 = ob_fp16_to_f32(*dp);
    for (int k = 0; k < 16; k++) {
        sc[k] = (int8_t)(d16 != 0.0f ? round_clamp(s[k] / d16, -smin, smax) : 0);
        float ds = d16 * (float)sc[k];
        for (int l = 0; l < 16; l++)
            q[16 * k + l] = (int8_t)(ds != 0.0f ? round_clamp(x[16 * k + l] / ds, -nneg, npos) : 0);
    }
    return 0;
}

static int q_q3_k(const float *x, struct ob_block_q3_k *b, int64_t blk)
{
    int8_t sc[16], q[OB_QK_K];
    int err = q_sym_k(x, 4, 3, 32, 31, &b->d, sc, q, OB_Q3_K, blk);
    if (err)
        return err;
    ob_q3k_pack_scales(sc, b->scales);
    memset(b->qs, 0, sizeof b->qs);
    memset(b->hmask, 0, sizeof b->hmask);
    for (int f = 0; f < OB_QK_K; f++) {  /* f = h*128 + s*32 + l; u = q + 4 in 0..7 */
        int u = q[f] + 4;
        b->qs[(f / 128) * 32 + f % 32] |= (uint8_t)((u & 3) << (2 * ((f / 32) & 3)));
        b->hmask[f % 32] |= (uint8_t)((u >> 2) << (f / 32));
    }
    return 0;
}

static int q_q6_k(const float *x, struct ob_block_q6_k *b, int64_t blk)
{
    int8_t q[OB_QK_K];
    int err = q_sym_k(x, 32, 31, 128, 127, &b->d, b->scales, q, OB_Q6_K, blk);
    if (err)
        return err;
    /* value h*128 + 32*s + l: nibble of ql[h*64 + l (+32 for s odd)], bits of qh[h*32 + l] */
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *v = q + h * 128 + l;
            int u0 = v[0] + 32, u1 = v[32] + 32, u2 = v[64] + 32, u3 = v[96] + 32;
            b->ql[h * 64 + l] = (uint8_t)((u0 & 15) | (u2 & 15) << 4);
            b->ql[h * 64 + 32 + l] = (uint8_t)((u1 & 15) | (u3 & 15) << 4);
            b->qh[h * 32 + l] = (uint8_t)((u0 >> 4) | (u1 >> 4) << 2 | (u2 >> 4) << 4 | (u3 >> 4) << 6);
        }
    return 0;
}

/* ---- rows ------------------------------------------------------------------------------------ */

bool ob_quant_supported(uint32_t type)
{
    switch (type) {
    OB_TYPES_QUANTISE(OB_TYPE_CASE)
        return true;
    }
    return false;
}

int ob_quant_row(uint32_t type, const float *src, void *dst, int64_t n)
{
    if (!ob_quant_supported(type))
        return ob_seterr(OB_EUNSUPP, "quantise: type %s is not supported", ob_type_name(type));
    int err = check_n("quantise", type, n);
    if (err)
        return err;
    if (!ob_type_is_float(type))
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(src[i]))
                return ob_seterr(OB_ERANGE, "quantise %s: value %lld is %g; only finite values "
                                 "can be quantised", ob_type_name(type), (long long)i,
                                 (double)src[i]);

    /* one case per type of the list, the loop over its blocks inside (q_<name> above) */
    uint8_t *p = dst;
#define Q_LOOP(NAME, name, id, blck, bytes, ftype)                                  \
    case OB_##NAME:                                                                 \
        for (int64_t i = 0; i < n / blck && !err; i++)                              \
            err = q_##name(src + i * blck, (void *)(p + i * bytes), i);             \
        return err;
    switch (type) {
    OB_TYPES_QUANTISE(Q_LOOP)
    }
#undef Q_LOOP
    return err;
}

/* ---- mixes ------------------------------------------------------------------------------------ */

/*
 * A mix names the type of every tensor of a model. A type name makes every matrix that type
 * (llama-quantize --pure); the K-quant mixes make the choices llama-quantize makes for the
 * file types of the same names (src/llama-quant.cpp, llama_tensor_get_type, dense models):
 *   output.weight (token_embd.weight when tied): Q6_K (Q8_0 for rows not a multiple of 256)
 *   attn_v   q3_k_m: Q5_K in layers 0-1, Q4_K after;  q3_k_l: Q5_K;  q4_k_s: Q5_K in layers 0-3;
 *            q4_k_m, q5_k_m: Q6_K where more_bits(layer)
 *   ffn_down q3_k_m: Q5_K in the first sixteenth of the layers, Q4_K after;  q3_k_l: Q5_K;
 *            q4_k_s: Q5_K in the first eighth;  q4_k_m, q5_k_m: Q6_K where more_bits(layer)
 *   attn_output  q3_k_m: Q4_K;  q3_k_l: Q5_K
 *   everything else the mix's base type (Q3_K, Q4_K, Q5_K)
 * with more_bits(l) = l < n/8 || l >= 7n/8 || (l - n/8) % 3 == 2 for n layers. A type whose
 * block does not divide a matrix's rows falls back as llama-quantize's does: Q2_K and Q3_K to
 * Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, then F16 if that does not divide them either.
 * Vectors (norm weights, biases: 1-D tensors) are F32 in every mix.
 */
enum { MIX_PURE, MIX_Q3_K_S, MIX_Q3_K_M, MIX_Q3_K_L, MIX_Q4_K_S, MIX_Q4_K_M, MIX_Q5_K_S,
       MIX_Q5_K_M };

/* the K-quant mixes: X(name, base type, rules, llama.cpp's general.file_type) */
#define K_MIXES(X)                                                                  \
    X(q3_k_s, OB_Q3_K, MIX_Q3_K_S, 11) X(q3_k_m, OB_Q3_K, MIX_Q3_K_M, 12)           \
    X(q3_k_l, OB_Q3_K, MIX_Q3_K_L, 13) X(q4_k_s, OB_Q4_K, MIX_Q4_K_S, 14)           \
    X(q4_k_m, OB_Q4_K, MIX_Q4_K_M, 15) X(q5_k_s, OB_Q5_K, MIX_Q5_K_S, 16)           \
    X(q5_k_m, OB_Q5_K, MIX_Q5_K_M, 17)

/* every weight type of the list as a mix of its own (llama-quantize --pure), then the K-quant
 * mixes */
#define PURE(NAME, name, id, blck, bytes, ftype) {#name, OB_##NAME, MIX_PURE, ftype},
#define MIX(name, base, rules, ftype) {#name, base, rules, ftype},
static const struct { const char *name; uint32_t base; int rules, ftype; } mixes[] = {
    OB_TYPES_WEIGHT(PURE) K_MIXES(MIX)
};
#undef PURE
#undef MIX
#define N_MIXES (int)(sizeof mixes / sizeof mixes[0])

static int mix_find(const char *mix)
{
    for (int i = 0; i < N_MIXES; i++)
        if (strcasecmp(mixes[i].name, mix) == 0)
            return i;
    return -1;
}

bool ob_mix_known(const char *mix)
{
    return mix_find(mix) >= 0;
}

const char *ob_mix_names(void)
{
#define PURE(NAME, name, id, blck, bytes, ftype) " " #name
#define MIX(name, base, rules, ftype) " " #name
    return OB_TYPES_WEIGHT(PURE) K_MIXES(MIX) + 1;          /* past the first space */
#undef PURE
#undef MIX
}

int ob_mix_file_type(const char *mix)
{
    int i = mix_find(mix);
    return i < 0 ? -1 : mixes[i].ftype;
}

void ob_list_types(FILE *f, bool packs)
{
#define LINE(NAME, name, id, blck, bytes, ftype) #name "\n"
    if (packs)
        fputs(OB_TYPES_PACK(LINE), f);
#undef LINE
    for (int i = 0; i < N_MIXES; i++)
        fprintf(f, "%s\n", mixes[i].name);
}

static bool more_bits(int l, int n)
{
    return l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
}

/* "blk.L.ROLE.weight" -> L and ROLE (up to the next dot); false for other names */
static bool block_role(const char *name, int *layer, char *role, size_t cap)
{
    unsigned l;
    int at = 0;
    if (sscanf(name, "blk.%u.%n", &l, &at) != 1 || !at)
        return false;
    const char *r = name + at, *dot = strchr(r, '.');
    size_t n = dot ? (size_t)(dot - r) : strlen(r);
    if (n >= cap || !dot || strcmp(dot, ".weight") != 0)
        return false;
    memcpy(role, r, n);
    role[n] = 0;
    *layer = (int)l;
    return true;
}

static uint32_t mix_rules(int rules, uint32_t t, const struct ob_mix_tensor *q)
{
    bool output = strcmp(q->name, "output.weight") == 0 ||
                  (q->tied && strcmp(q->name, "token_embd.weight") == 0);
    if (output)
        return q->ne0 % ob_type_blck(t) ? OB_Q8_0 : OB_Q6_K;
    char role[32];
    int l, n = (int)q->n_layer;
    if (!block_role(q->name, &l, role, sizeof role))
        return t;
    if (strcmp(role, "attn_v") == 0) {
        switch (rules) {
        case MIX_Q3_K_M: return l < 2 ? OB_Q5_K : OB_Q4_K;
        case MIX_Q3_K_L: return OB_Q5_K;
        case MIX_Q4_K_S: return l < 4 ? OB_Q5_K : t;
        case MIX_Q4_K_M: case MIX_Q5_K_M: return more_bits(l, n) ? OB_Q6_K : t;
        }
    } else if (strcmp(role, "ffn_down") == 0) {
        switch (rules) {
        case MIX_Q3_K_M: return l < n / 16 ? OB_Q5_K : OB_Q4_K;
        case MIX_Q3_K_L: return OB_Q5_K;
        case MIX_Q4_K_S: return l < n / 8 ? OB_Q5_K : t;
        case MIX_Q4_K_M: case MIX_Q5_K_M: return more_bits(l, n) ? OB_Q6_K : t;
        }
    } else if (strcmp(role, "attn_output") == 0) {
        switch (rules) {
        case MIX_Q3_K_M: return OB_Q4_K;
        case MIX_Q3_K_L: return OB_Q5_K;
        }
    }
    return t;
}

int ob_mix_type(const char *mix, const struct ob_mix_tensor *q, uint32_t *out)
{
    int i = mix_find(mix);
    if (i < 0)
        return ob_seterr(OB_EUSAGE, "unknown type or mix '%s' (%s)", mix, ob_mix_names());
    if (q->n_dims < 2) {
        *out = OB_F32;
        return 0;
    }
    uint32_t t = mixes[i].base;
    if (mixes[i].rules != MIX_PURE)
        t = mix_rules(mixes[i].rules, t, q);
    if (q->ne0 % ob_type_blck(t)) {
        switch (t) {
        case OB_Q2_K: case OB_Q3_K: t = OB_Q4_0; break;
        case OB_Q4_K: t = OB_Q5_0; break;
        case OB_Q5_K: t = OB_Q5_1; break;
        case OB_Q6_K: t = OB_Q8_0; break;
        default:
            return ob_seterr(OB_EUNSUPP, "tensor '%s': rows of %llu values do not fit %s blocks "
                             "of %u", q->name, (unsigned long long)q->ne0, ob_type_name(t),
                             ob_type_blck(t));
        }
        if (q->ne0 % ob_type_blck(t))
            t = OB_F16;
    }
    *out = t;
    return 0;
}
