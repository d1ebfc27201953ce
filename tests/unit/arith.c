/*
 * arith.c — unit tests of the canonical scalar arithmetic (lib/arith/arith.h), TAP.
 *
 *  - ob_expf and ob_logf against float64 libm over dense sweeps of every float bit pattern
 *    (a fixed stride) in their domains: the maximum error in ulps is printed and must be at
 *    most 2; special values (NaN, +-Inf, 0, subnormals, overflow and underflow edges);
 *  - ob_gelu against the float64 tanh form over a dense sweep of [-10, 10], ob_geglu;
 *  - ob_rint ties to even; the reduction shapes (32-partial butterfly, 8-partial block fold)
 *    against an independent spelled-out evaluation; rmsnorm, logsumexp, rope on known values;
 *  - activation quantisation: ranges, bsums, sums, reconstruction error within d/2;
 *  - the pieces a kernel composes (ob_rms_factor, ob_rms_apply, ob_add_f32, ob_attn_scale,
 *    ob_kv_put) bitwise equal to the inline expressions the cpu route used before them
 *    (lib/cpu/backend-cpu.c: rms_row, the bias loop of cpu_matmul, cpu_add, cpu_attention's
 *    scale, cpu_kv_store), on random inputs with NaN, Inf, zeros and subnormals.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arith/arith.h"
#include "tap.h"



static float frand(float lo, float hi)
{
    return lo + (hi - lo) * (float)((tap_rand() >> 40) * (1.0 / 16777216.0));
}

/* error of f against the exact value e (double), in units of the float ulp at e */
static double ulps(float f, double e)
{
    if (isinf(e) || isinf(f))
        return (isinf(e) && isinf(f) && (e > 0) == (f > 0)) ? 0 : 1e9;
    double a = fabs(e);
    int ex;
    frexp(a < 1.1754943508222875e-38 ? 1.1754943508222875e-38 : a, &ex);
    double ulp = ldexp(1.0, ex - 24);
    return fabs((double)f - e) / ulp;
}

static void exp_log(void)
{
    double worst = 0;
    float at = 0;
    long n = 0;
    /* every 16th float in [-104, 89] */
    for (uint32_t u = 0; u < 0x80000000u; u += 16) {
        float x = ob_f32_from_bits(u);
        for (int sgn = 0; sgn < 2; sgn++, x = -x) {
            if (!(x > -104.0f && x < 89.0f))
                continue;
            double e = exp((double)x);
            if (e > 3.4028234663852886e38)
                e = INFINITY;
            double d = ulps(ob_expf(x), e);
            n++;
            if (d > worst) {
                worst = d;
                at = x;
            }
        }
    }
    printf("# ob_expf: %ld values, max error %.3f ulp at %.9g\n", n, worst, (double)at);
    ok(worst <= 2.0, "ob_expf within 2 ulp of float64 exp over [-104, 89] (%.3f)", worst);

    worst = 0;
    n = 0;
    for (uint32_t u = 1; u < 0x7f800000u; u += 16) {
        float x = ob_f32_from_bits(u);
        double d = ulps(ob_logf(x), log((double)x));
        n++;
        if (d > worst) {
            worst = d;
            at = x;
        }
    }
    printf("# ob_logf: %ld values, max error %.3f ulp at %.9g\n", n, worst, (double)at);
    ok(worst <= 2.0, "ob_logf within 2 ulp of float64 log over all positive floats (%.3f)", worst);

    ok(isnan(ob_expf(NAN)) && ob_expf(INFINITY) == INFINITY && ob_expf(-INFINITY) == 0.0f &&
       ob_expf(0.0f) == 1.0f && ob_expf(89.0f) == INFINITY && ob_expf(-104.0f) == 0.0f &&
       ob_expf(-103.0f) > 0.0f && ob_expf(88.72f) < INFINITY,
       "ob_expf special values and edges");
    ok(isnan(ob_logf(NAN)) && isnan(ob_logf(-1.0f)) && ob_logf(0.0f) == -INFINITY &&
       ob_logf(INFINITY) == INFINITY && ob_logf(1.0f) == 0.0f &&
       fabs(ob_logf(1e-45f) - log((double)1e-45f)) < 1e-5,
       "ob_logf special values, subnormal input");
    ok(ob_silu(0.0f) == 0.0f && ob_silu(-200.0f) == -0.0f && ob_silu(200.0f) == 200.0f &&
       fabsf(ob_silu(1.0f) - 0.7310586f) < 1e-6f, "ob_silu values");
}

/* float64 GELU, the tanh form with the decimal constants: 0.5 x (1 + tanh(u)) */
static double gelu64(double x)
{
    double u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
    /* 0.5 (1 + tanh u) = 1 / (1 + e^-2u) exactly; tanh itself loses the tail to cancellation */
    return x / (1.0 + exp(-2.0 * u));
}

/*
 * ob_gelu over every 64th float of [-10, 10] (where the value is a normal float: the error is
 * in ulps of the result), first where GeGLU's inputs live, |x| <= 4, then the whole range
 * with the negative tail, where a plain float evaluation of the exp's argument would be
 * ~200 ulp off (measured before ob_gelu carried it as a float pair); ob_geglu.
 */
static void gelu(void)
{
    double worst4 = 0, worst10 = 0;
    float at4 = 0, at10 = 0;
    long n = 0;
    for (uint32_t u = 0; u < 0x7f800000u; u += 64) {
        float x = ob_f32_from_bits(u);
        for (int sgn = 0; sgn < 2; sgn++, x = -x) {
            if (!(x >= -10.0f && x <= 10.0f))
                continue;
            double e = gelu64((double)x);
            if (fabs(e) < 1.1754943508222875e-38)
                continue;
            double d = ulps(ob_gelu(x), e);
            n++;
            if (fabsf(x) <= 4.0f && d > worst4)
                worst4 = d, at4 = x;
            if (d > worst10)
                worst10 = d, at10 = x;
        }
    }
    printf("# ob_gelu: %ld values, max error %.3f ulp at %.9g in [-4, 4], %.3f ulp at %.9g in "
           "[-10, 10]\n", n, worst4, (double)at4, worst10, (double)at10);
    ok(worst4 <= 3.0, "ob_gelu within 3 ulp of float64 GELU (tanh form) over [-4, 4] (%.3f)",
       worst4);
    ok(worst10 <= 4.0, "ob_gelu within 4 ulp of float64 GELU over [-10, 10] (%.3f)", worst10);
    ok(ob_gelu(0.0f) == 0.0f && ob_gelu(200.0f) == 200.0f && ob_gelu(-200.0f) == 0.0f &&
       ob_gelu(1e30f) == 1e30f && ob_gelu(-1e30f) == 0.0f && isnan(ob_gelu(NAN)) &&
       ob_gelu(INFINITY) == INFINITY && ob_gelu(-INFINITY) == 0.0f &&
       fabs(ob_gelu(1.0f) - 0.8411919906) < 1e-6, "ob_gelu special values");
    float g[64], u[64], w[64];
    long bad = 0;
    for (int i = 0; i < 64; i++) {
        g[i] = frand(-6.0f, 6.0f);
        u[i] = frand(-3.0f, 3.0f);
        w[i] = ob_gelu(g[i]) * u[i];
    }
    ob_geglu(g, u, 64);
    for (int i = 0; i < 64; i++)
        bad += ob_f32_bits(g[i]) != ob_f32_bits(w[i]);
    ok(bad == 0, "ob_geglu == ob_gelu(g) * u per value (%ld differ)", bad);
}

static void rounding_and_reductions(void)
{
    ok(ob_rint(0.5f) == 0.0f && ob_rint(1.5f) == 2.0f && ob_rint(2.5f) == 2.0f &&
       ob_rint(-0.5f) == -0.0f && ob_rint(-1.5f) == -2.0f && ob_rint(126.5f) == 126.0f &&
       ob_rint(127.49f) == 127.0f && ob_rint(3.7f) == 4.0f, "ob_rint: nearest, ties to even");

    /* the 32-partial dot, spelled out independently */
    int bad = 0;
    for (int t = 0; t < 2000; t++) {
        int n = 1 + (int)(tap_rand() % 700);
        float a[700], b[700];
        for (int i = 0; i < n; i++) {
            a[i] = frand(-2, 2);
            b[i] = frand(-2, 2);
        }
        float p[32];
        for (int j = 0; j < 32; j++) {
            p[j] = 0.0f;
            for (int i = j; i < n; i += 32)
                p[j] = fmaf(a[i], b[i], p[j]);
        }
        float q[16], r[8], s[4], u[2];
        for (int j = 0; j < 16; j++) q[j] = p[j] + p[j + 16];
        for (int j = 0; j < 8; j++) r[j] = q[j] + q[j + 8];
        for (int j = 0; j < 4; j++) s[j] = r[j] + r[j + 4];
        for (int j = 0; j < 2; j++) u[j] = s[j] + s[j + 2];
        float want = u[0] + u[1];
        float got = ob_dot_f32(a, b, n);
        bad += memcmp(&got, &want, 4) != 0;
    }
    ok(bad == 0, "ob_dot_f32 is the 32-partial fmaf sum folded 16,8,4,2,1 (%d mismatches)", bad);

    float ints[1000];
    double exact = 0;
    for (int i = 0; i < 1000; i++) {
        ints[i] = (float)((int)(tap_rand() % 2001) - 1000);
        exact += ints[i];
    }
    ok(ob_sum_f32(ints, 1000) == (float)exact, "ob_sum_f32 of integers is exact");

    float p8[8] = {1e8f, 1.0f, -1e8f, 1.0f, 0.5f, 0.25f, 0.125f, 2.0f};
    /* ((p0+p4)+(p2+p6)) + ((p1+p5)+(p3+p7)) */
    float want8 = ((1e8f + 0.5f) + (-1e8f + 0.125f)) + ((1.0f + 0.25f) + (1.0f + 2.0f));
    ok(ob_fold8(p8) == want8, "ob_fold8 folds by 4, 2, 1");
}

static void norms_and_softmax(void)
{
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 2, 0.5f}, y[4];
    ob_rmsnorm(x, w, y, 4, 0.0f);
    double r = 1.0 / sqrt(30.0 / 4);
    ok(fabs(y[0] - r) < 1e-6 && fabs(y[2] - 6 * r) < 1e-6 && fabs(y[3] - 2 * r) < 1e-6,
       "ob_rmsnorm on (1,2,3,4)");

    float z[5] = {1.0f, 2.0f, 3.0f, 3.0f, -50.0f}, m, ll;
    ob_logsumexp(z, 5, &m, &ll);
    double lse = log(exp(1.0) + exp(2.0) + 2 * exp(3.0) + exp(-50.0));
    ok(m == 3.0f && fabs((m + ll) - lse) < 1e-6, "ob_logsumexp (%.7f vs %.7f)", (double)(m + ll), lse);
    double tot = 0;
    for (int i = 0; i < 5; i++)
        tot += exp(ob_logprob(z[i], m, ll));
    ok(fabs(tot - 1.0) < 1e-6, "log-probabilities sum to 1 (%.9f)", tot);

    /* log l from the terms (lib/sample.c keeps them): ob_logf(ob_sum_f32(e)) == ob_lse_logl */
    int bad = 0;
    static float zz[5000], ee[5000];
    for (int t = 0; t < 200; t++) {
        int n = 1 + (int)(tap_rand() % 5000);
        for (int i = 0; i < n; i++)
            zz[i] = frand(-30.0f, 30.0f) * (t % 3 ? 1.0f : 0.01f);
        float mm, lw;
        ob_logsumexp(zz, n, &mm, &lw);
        for (int i = 0; i < n; i++)
            ee[i] = ob_expf(zz[i] - mm);
        float la = ob_lse_logl(zz, n, mm), lb = ob_logf(ob_sum_f32(ee, n));
        bad += ob_f32_bits(la) != ob_f32_bits(lw) || ob_f32_bits(lb) != ob_f32_bits(lw);
    }
    ok(bad == 0, "log l: ob_lse_logl and ob_logf(ob_sum_f32(terms)) equal ob_logsumexp's (%d differ)",
       bad);

    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, cs[2] = {0.0f, 1.0f}, sn[2] = {1.0f, 0.0f};
    float neox[8], norm[8];
    memcpy(neox, v, sizeof v);
    memcpy(norm, v, sizeof v);
    ob_rope(neox, cs, sn, 4, 1);     /* pairs (0,2) rotated by 90 degrees, (1,3) by 0 */
    ob_rope(norm, cs, sn, 4, 0);     /* pairs (0,1) by 90 degrees, (2,3) by 0 */
    ok(neox[0] == -3 && neox[2] == 1 && neox[1] == 2 && neox[3] == 4 && neox[4] == 5 &&
       norm[0] == -2 && norm[1] == 1 && norm[2] == 3 && norm[3] == 4 && norm[7] == 8,
       "ob_rope: NEOX and NORM pairing, dimensions past n_rot untouched");
}

static void act_quant(void)
{
    static float x[4096];
    static struct ob_block_q8_k q[16];
    static struct ob_act_a8 a[128];
    int bad = 0;
    for (int t = 0; t < 200; t++) {
        float scale = t % 5 == 0 ? 1e-30f : t % 5 == 1 ? 1e20f : 1.0f;
        for (int i = 0; i < 4096; i++)
            x[i] = frand(-3, 3) * scale * (i % 97 == 0 ? 10.0f : 1.0f);
        if (t == 7)
            memset(x, 0, 256 * sizeof(float));                 /* an all-zero block */
        ob_quantize_q8k(x, q, 4096);
        ob_quantize_a8(x, a, 4096);
        for (int b = 0; b < 16; b++) {
            for (int j = 0; j < 16; j++) {
                int s = 0;
                for (int i = 0; i < 16; i++)
                    s += q[b].qs[16 * j + i];
                bad += s != q[b].bsums[j];
            }
            for (int i = 0; i < 256; i++) {
                float xi = x[256 * b + i];
                bad += q[b].qs[i] < -127;
                bad += fabsf(q[b].d * (float)q[b].qs[i] - xi) > 0.5001f * q[b].d + 1e-37f;
            }
        }
        for (int b = 0; b < 128; b++) {
            int s = 0;
            for (int i = 0; i < 32; i++) {
                s += a[b].qs[i];
                bad += a[b].qs[i] < -127;
                bad += fabsf(a[b].d * (float)a[b].qs[i] - x[32 * b + i]) > 0.5001f * a[b].d + 1e-37f;
            }
            bad += s != a[b].sum;
        }
        if (t == 7)
            bad += q[0].d != 0.0f || q[0].bsums[0] != 0;
    }
    ok(bad == 0, "activation quantisation: q in [-127,127], sums exact, error within d/2 (%d bad)", bad);
}

/* a float: one in four from the special values, one in four random bits (every class,
 * NaN payloads included), else an ordinary value of random sign and magnitude */
static float fspecial(void)
{
    static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                  0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa5a5a5u,
                                  0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu,
                                  0xff7fffffu, 0x3f800000u, 0x00400000u, 0x80000001u};
    uint64_t r = tap_rand();
    switch (r & 3) {
    case 0: return ob_f32_from_bits(sp[(r >> 2) % (sizeof sp / sizeof sp[0])]);
    case 1: return ob_f32_from_bits((uint32_t)(r >> 32));
    }
    float v = frand(1.0f, 2.0f) * ob_pow2i((int)((r >> 8) % 60) - 30);
    return r & 0x10000 ? -v : v;
}

static int same_bits(float a, float b)
{
    return ob_f32_bits(a) == ob_f32_bits(b);
}

/*
 * The cpu route's inline expressions before the canonical pieces existed, copied verbatim from
 * lib/cpu/backend-cpu.c (the sum of squares ss comes from the F32 dot kernel, bitwise
 * ob_dot_f32: tests/unit/kernels.c):
 *   rms_row:        r = 1.0f / sqrtf(ss / (float)n + eps);  y[i] = (x[i] * r) * w[i]
 *   cpu_matmul:     y[j] = y[j] + b[j]          cpu_add: d[i] = d[i] + s[i]
 *   cpu_attention:  1.0f / sqrtf((float)hp->head_dim)      (head_dim a uint32_t)
 *   cpu_kv_store:   kd[j] = ob_f32_to_fp16(k[j])
 */
static void composed_pieces(void)
{
    enum { N = 4096 };
    static float x[N], w[N], y0[N], y1[N], b[N];
    static uint16_t h0[N], h1[N];
    long bad_f = 0, bad_a = 0, bad_add = 0, bad_kv = 0, n_f = 0, n_a = 0;
    for (int it = 0; it < 400; it++) {
        int n = 1 + (int)(tap_rand() % N);
        float eps = it % 4 == 0 ? fspecial() : it % 4 == 1 ? 1e-6f : it % 4 == 2 ? 1e-5f : 1e-40f;
        for (int k = 0; k < 64; k++, n_f++) {
            float ss = k < 4 ? ob_dot_f32(x, x, n) : fspecial();
            float want = 1.0f / sqrtf(ss / (float)n + eps);
            bad_f += !same_bits(ob_rms_factor(ss, n, eps), want);
        }
        for (int i = 0; i < n; i++) {
            x[i] = fspecial();
            w[i] = fspecial();
            b[i] = fspecial();
        }
        float r = it % 3 ? ob_rms_factor(ob_dot_f32(x, x, n), n, eps) : fspecial();
        for (int i = 0; i < n; i++)
            y0[i] = (x[i] * r) * w[i];
        ob_rms_apply(x, r, w, y1, n);
        for (int i = 0; i < n; i++)
            bad_a += !same_bits(y0[i], y1[i]);
        memcpy(y1, x, (size_t)n * sizeof(float));                 /* in place, as on q and k */
        ob_rms_apply(y1, r, w, y1, n);
        for (int i = 0; i < n; i++)
            bad_a += !same_bits(y0[i], y1[i]);
        n_a += 2 * n;
        ob_rmsnorm(x, w, y1, n, eps);
        float rr = 1.0f / sqrtf(ob_dot_f32(x, x, n) / (float)n + eps);
        for (int i = 0; i < n; i++)
            bad_a += !same_bits((x[i] * rr) * w[i], y1[i]);

        memcpy(y0, x, (size_t)n * sizeof(float));
        memcpy(y1, x, (size_t)n * sizeof(float));
        for (int j = 0; j < n; j++)
            y0[j] = y0[j] + b[j];
        ob_add_f32(y1, b, (size_t)n);
        for (int i = 0; i < n; i++)
            bad_add += !same_bits(y0[i], y1[i]);

        for (int j = 0; j < n; j++)
            h0[j] = ob_f32_to_fp16(x[j]);
        ob_kv_put(h1, x, n);
        bad_kv += memcmp(h0, h1, (size_t)n * sizeof(uint16_t)) != 0;
    }
    ok(bad_f == 0, "ob_rms_factor(ss, n, eps) == 1.0f / sqrtf(ss / (float)n + eps): %ld values "
       "with NaN, Inf, zero and subnormal ss and eps (%ld differ)", n_f, bad_f);
    ok(bad_a == 0, "ob_rms_apply == (x[i] * r) * w[i] (separate and in place) and ob_rmsnorm == "
       "its spelled-out composition: %ld values (%ld differ)", n_a, bad_a);
    ok(bad_add == 0, "ob_add_f32 == y[j] + b[j] (bias and residual add) on special values (%ld differ)",
       bad_add);
    ok(bad_kv == 0, "ob_kv_put == ob_f32_to_fp16 per value (%ld rows differ)", bad_kv);
    long bad_s = 0;
    for (uint32_t hd = 1; hd <= 65536; hd++)
        bad_s += !same_bits(ob_attn_scale((int)hd), 1.0f / sqrtf((float)hd));
    ok(bad_s == 0, "ob_attn_scale(hd) == 1.0f / sqrtf((float)hd) for hd 1..65536 (%ld differ)",
       bad_s);
}

int main(void)
{
    tap_seed(0x9e3779b97f4a7c15ull);
    exp_log();
    gelu();
    rounding_and_reductions();
    norms_and_softmax();
    act_quant();
    composed_pieces();
    return tap_done();
}
