/*
 * hrx.c — the kernels of the hrx routes (lib/hrx/ *.hip) against lib/arith/, bit for bit (TAP),
 * through every runtime this binary has: hrx-sim always; CUDA and HIP when make CUDA=1 / HIP=1
 * linked them and a device is there (else "# SKIP no device"). What is compared:
 *   - the weight types: hrx takes exactly the types the cpu route takes;
 *   - embed: every type, rows looked up in any order, against ob_dequant_row, and scaled
 *     (gemma3) against ob_dequant_row then ob_scale_f32 by ob_embd_scale;
 *   - actq: every activation format against ob_quantize_q8k / ob_quantize_a8 / the floats, on
 *     rows with zeros, ties, huge and tiny values, NaN and Inf;
 *   - matmul: every weight type, on valid rows (our quantisers) and raw random rows whose fp16
 *     scales include NaN, Inf, subnormals and zeros, odd row counts, one block and rows long
 *     enough for several chunks, every width 1..17 and 64, with and without a bias, against the
 *     cpu route's scalar dot (dot.h);
 *   - rmsnorm (gathered rows, rows in order, in place as gemma3's post norms), qk_rope (NEOX
 *     and NORM pairs, partial rotation, with and without q/k norm), kv_store, attention (1 to
 *     300 positions: several 64-position chunks; head dimensions 16 to 256; grouped heads; NaN
 *     and -0 among the scores; sliding windows of 1, 16, 64, 65 and 100 keys, against
 *     ob_attn_head from ob_attn_first_key), swiglu, geglu (against ob_geglu, NaN, Inf, huge
 *     and tiny values), add.
 * A GPU computes NaN results with its own payload bits, so on a GPU a NaN matches any NaN; on
 * hrx-sim every bit counts. The first differing value is printed.
 *
 *   hrx [--quick]       (--quick: fewer widths and shapes, for a fast look)
 *   hrx --types         print the cpu route's weight types, one line, and exit
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpu/kernels/kernels.h"
#include "hrx/hrx.h"
#include "quant.h"
#include "tap.h"

extern const struct ob_hrx_rt ob_hrx_cuda_rt __attribute__((weak));
extern const struct ob_hrx_rt ob_hrx_hip_rt __attribute__((weak));

static const struct ob_hrx_rt *rt;
static struct ob_hrx_q *q;
static bool gpu, quick;

static float frand(void)
{
    return (float)((int64_t)(tap_rand() >> 40) - (1 << 23)) / (float)(1 << 23);
}

static float gauss(void)
{
    return frand() + frand() + frand();
}

/* ---- device memory --------------------------------------------------------------------------- */

static void *dput(const void *h, size_t n)
{
    void *d;
    if (rt->alloc(q, n, &d)) {
        printf("Bail out! alloc %zu: %s\n", n, ob_errmsg());
        exit(1);
    }
    if (h && rt->h2d(q, d, h, n)) {
        printf("Bail out! h2d: %s\n", ob_errmsg());
        exit(1);
    }
    return d;
}

static void dget(void *h, const void *d, size_t n)
{
    if (rt->d2h(q, h, d, n)) {
        printf("Bail out! d2h: %s\n", ob_errmsg());
        exit(1);
    }
}

/* ": " and the failed launch's message, for the end of a check's line (e != 0), else "" */
static const char *errs(int e)
{
    static char m[600];
    if (!e)
        return "";
    snprintf(m, sizeof m, ": %s", ob_errmsg());
    return m;
}

/* ---- comparison -------------------------------------------------------------------------------- */

static bool same(float a, float b)
{
    if (gpu && a != a && b != b)
        return true;               /* NaN payloads are the hardware's */
    return memcmp(&a, &b, 4) == 0;
}

/* mismatches of got against want; the first one described in why */
static long cmp_f32(const float *got, const float *want, size_t n, char *why, size_t wl)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!same(got[i], want[i]) && !bad++) {
            uint32_t g, w;
            memcpy(&g, &got[i], 4);
            memcpy(&w, &want[i], 4);
            snprintf(why, wl, "; first at %zu: %.9g (%08x) != %.9g (%08x)", i, got[i], g,
                     want[i], w);
        }
    return bad;
}

/*
 * cmp_f32 of a binary op's results whose operands were a[i] and b[i]: where both are NaN, any
 * NaN matches. Which of two NaNs an operation returns is not fixed by the source: x86 returns
 * its first operand's, and a compiler may swap the operands of a commutative + or * (gcc -O2
 * and -O1 with the sanitizers order ob_silu(g) * u differently: 7fc00000 against ffc00000 for
 * a NaN u and g = -Inf). Everywhere else every bit counts.
 */
static long cmp_f32_op(const float *got, const float *want, const float *a, const float *b,
                       size_t n, char *why, size_t wl)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != a[i] && b[i] != b[i] && got[i] != got[i])
            continue;
        long d = cmp_f32(got + i, want + i, 1, bad ? NULL : why, bad ? 0 : wl);
        if (d && !bad)
            snprintf(why + strlen(why), wl - strlen(why), " (value %zu)", i);
        bad += d;
    }
    return bad;
}

/* ---- weight rows --------------------------------------------------------------------------- */

/* byte offsets of the fp16 scale fields of a block type (kernels.c has the same list) */
static int scale_fields(uint32_t t, int offs[2])
{
    switch (t) {
    case OB_Q4_0: case OB_Q5_0: case OB_Q8_0: offs[0] = 0; return 1;
    case OB_Q4_1: case OB_Q5_1: case OB_Q4_K: case OB_Q5_K: offs[0] = 0; offs[1] = 2; return 2;
    case OB_Q2_K: offs[0] = 80; offs[1] = 82; return 2;
    case OB_Q3_K: offs[0] = 108; return 1;
    case OB_Q6_K: offs[0] = 208; return 1;
    }
    return 0;
}

/* a NaN (signalling or quiet, either sign, with payload), an infinity, a subnormal or a zero */
static uint16_t special_half(void)
{
    static const uint16_t sp[] = {0x7c01, 0x7d55, 0xfc2a, 0x7e00, 0xfe01, 0x7c00, 0xfc00,
                                  0x0001, 0x83ff, 0x8000, 0x0000};
    return sp[tap_rand() % (sizeof sp / sizeof sp[0])];
}

/*
 * n rows of k values of type t: valid rows from the reference quantiser (raw false), or random
 * bytes with finite random scales (subnormals among them) and one special scale a row (raw
 * true; a float type: one special element). One a row, as tests/unit/kernels.c does, so that
 * no result depends on which of two NaNs an addition keeps (the C standard leaves it to the
 * compiler, and the reference is C).
 */
static void *weights(uint32_t t, int n, int k, bool raw, size_t *row_bytes)
{
    size_t rb = (size_t)k / ob_type_blck(t) * ob_type_size(t), bs = ob_type_size(t);
    uint8_t *w = malloc(rb * (size_t)n);
    float *x = malloc((size_t)k * sizeof *x);
    *row_bytes = rb;
    for (int r = 0; r < n; r++) {
        uint8_t *row = w + (size_t)r * rb;
        if (!raw) {
            for (int i = 0; i < k; i++)
                x[i] = gauss();
            ob_quant_row(t, x, row, k);
            continue;
        }
        uint16_t h = special_half();
        size_t at = tap_rand() % (uint64_t)k;
        if (t == OB_F32) {
            for (int i = 0; i < k; i++) {
                float f = (int)at == i ? ob_fp16_to_f32(h) : gauss();
                memcpy(row + 4 * i, &f, 4);
            }
            continue;
        }
        if (t == OB_F16 || t == OB_BF16) {
            for (int i = 0; i < k; i++) {
                uint16_t v = t == OB_F16 ? ob_f32_to_fp16(gauss()) : ob_f32_to_bf16(gauss());
                if ((int)at == i)
                    v = t == OB_F16 ? h : ob_f32_to_bf16(ob_fp16_to_f32(h));
                memcpy(row + 2 * i, &v, 2);
            }
            continue;
        }
        for (size_t i = 0; i < rb; i++)
            row[i] = (uint8_t)tap_rand();
        int offs[2], nf = scale_fields(t, offs);
        for (size_t b = 0; b < rb; b += bs)
            for (int j = 0; j < nf; j++) {
                uint16_t v = tap_rand() % 8 ? ob_f32_to_fp16(frand()) : (uint16_t)(tap_rand() % 1024);
                memcpy(row + b + offs[j], &v, 2);
            }
        memcpy(row + at / ob_type_blck(t) * bs + offs[tap_rand() % (uint64_t)nf], &h, 2);
    }
    free(x);
    return w;
}

/* k activation values: gaussians with zeros, ties, huge and tiny values mixed in */
static void activations(float *x, size_t k, bool specials)
{
    for (size_t i = 0; i < k; i++) {
        x[i] = gauss();
        if (!specials)
            continue;
        switch (tap_rand() % 40) {
        case 0: x[i] = 0.0f; break;
        case 1: x[i] = -0.0f; break;
        case 2: x[i] = 3e38f; break;
        case 3: x[i] = 1e-40f; break;
        case 4: x[i] = 0.5f; break;
        case 5: x[i] = NAN; break;
        case 6: x[i] = -INFINITY; break;
        }
    }
}

/* ---- the tests --------------------------------------------------------------------------------- */

static const uint32_t all_types[] = {OB_F32, OB_F16, OB_BF16, OB_Q4_0, OB_Q4_1, OB_Q5_0,
                                     OB_Q5_1, OB_Q8_0, OB_Q2_K, OB_Q3_K, OB_Q4_K, OB_Q5_K,
                                     OB_Q6_K};
#define N_TYPES (int)(sizeof all_types / sizeof all_types[0])

static void test_types(void)
{
    char why[256] = "";
    int n = 0;
    for (uint32_t t = 0; t < OB_TYPE_COUNT; t++)
        if (ob_hrx_type_supported(t) != ob_type_supported(t) && !n++)
            snprintf(why, sizeof why, ": %s differs", ob_type_name(t));
    for (int i = 0; i < N_TYPES; i++)
        if (!ob_hrx_type_supported(all_types[i]) && !n++)
            snprintf(why, sizeof why, ": %s untested", ob_type_name(all_types[i]));
    ok(n == 0, "hrx has kernels for exactly the cpu route's weight types%s", why);
}

static void test_embed(void)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        uint32_t t = all_types[ti];
        int k = ob_type_blck(t) == 256 ? 512 : 96, V = 41, n = 23;
        size_t rb;
        void *w = weights(t, V, k, ti % 2 == 1, &rb);
        int32_t tok[23];
        for (int i = 0; i < n; i++)
            tok[i] = (int32_t)(tap_rand() % (uint64_t)V);
        float *want = malloc((size_t)n * k * 4), *got = malloc((size_t)n * k * 4);
        for (int i = 0; i < n; i++)
            ob_dequant_row(t, (char *)w + (size_t)tok[i] * rb, want + (size_t)i * k, k);
        void *dw = dput(w, rb * V), *dt = dput(tok, sizeof tok);
        float *dx = dput(NULL, (size_t)n * k * 4);
        struct ob_hrx_mat m = {t, V, k, rb, dw};
        int e = rt->k->embed(q, m, dt, n, 0.0f, dx);
        char why[200] = "";
        long bad = e ? -1 : (dget(got, dx, (size_t)n * k * 4), cmp_f32(got, want, (size_t)n * k, why, sizeof why));
        /* scaled as gemma3's embedding: ob_scale_f32 by ob_embd_scale after the dequantisation */
        float sc = ob_embd_scale(k);
        for (int i = 0; i < n; i++)
            ob_scale_f32(want + (size_t)i * k, sc, (size_t)k);
        if (!e && !(e = rt->k->embed(q, m, dt, n, sc, dx))) {
            dget(got, dx, (size_t)n * k * 4);
            bad += cmp_f32(got, want, (size_t)n * k, why, sizeof why);
        }
        ok(bad == 0, "embed %s: %d rows of %d values, unscaled and times ob_embd_scale%s%s",
           ob_type_name(t), n, k, why, errs(e));
        rt->free(q, dw);
        rt->free(q, dt);
        rt->free(q, dx);
        free(w);
        free(want);
        free(got);
    }
}

static void test_actq(void)
{
    static const char *const names[] = {"F32", "Q8_K", "A8"};
    for (int fmt = 0; fmt < 3; fmt++) {
        int k = 1024, n = 9;
        float *x = malloc((size_t)n * k * 4);
        for (int r = 0; r < n; r++)
            activations(x + (size_t)r * k, (size_t)k, r > 0);
        for (int i = 0; i < 256; i++)
            x[(size_t)(n - 1) * k + i] = 0.0f;          /* an all-zero block */
        size_t stride = ob_act_row_bytes(fmt, k);
        uint8_t *want = malloc(stride * n), *got = malloc(stride * n);
        memset(want, 0, stride * n);
        for (int r = 0; r < n; r++) {
            uint32_t wt = fmt == 0 ? OB_F32 : fmt == 1 ? OB_Q4_K : OB_Q8_0;
            ob_act_quantize(OB_ISA_SCALAR, wt, x + (size_t)r * k, k, want + (size_t)r * stride);
        }
        float *dx = dput(x, (size_t)n * k * 4);
        void *dq = dput(NULL, stride * n);
        int e = rt->k->actq(q, fmt, dx, n, k, dq, stride);
        long bad = 0;
        size_t at = 0;
        if (!e) {
            dget(got, dq, stride * n);
            for (size_t i = 0; i < stride * n; i++)
                if (got[i] != want[i] && !bad++)
                    at = i;
        }
        ok(!e && bad == 0, "actq %s: %d rows of %d values (zeros, ties, huge, tiny, NaN, Inf): "
           "%ld bytes differ%s%s", names[fmt], n, k, bad, errs(e),
           bad ? " (first at byte" : "");
        if (bad)
            printf("# first difference at byte %zu of %zu\n", at, stride * n);
        rt->free(q, dx);
        rt->free(q, dq);
        free(x);
        free(want);
        free(got);
    }
}

/* one weight type and shape at several widths, with and without a bias */
/* N weight rows of k values against activation rows of every width of the list (or of `wide`
 * alone when it is not 0): 16 and up take the GPU's tiles of 64 weight rows x 32 or 64
 * activation rows (mm.hip's k_gm_q, unless OB_HRX_GEMM=0), so 17 and 100 end in part tiles */
static void matmul_case(uint32_t t, int N, int k, bool raw, int wide)
{
    static const int widths_all[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 64, 100};
    static const int widths_quick[] = {1, 3, 4, 17};
    const int *widths = wide ? &wide : quick ? widths_quick : widths_all;
    int nw = wide ? 1 : quick ? 4 : (int)(sizeof widths_all / sizeof widths_all[0]);
    int R = widths[nw - 1];
    size_t rb;
    void *w = weights(t, N, k, raw, &rb);
    float *x = malloc((size_t)R * k * 4), *bias = malloc((size_t)N * 4);
    activations(x, (size_t)R * k, false);
    for (int i = 0; i < N; i++)
        bias[i] = gauss();
    int fmt = ob_type_actfmt(t);
    size_t stride = ob_act_row_bytes(fmt, k);
    char *xq = malloc(stride * R);
    for (int r = 0; r < R; r++)
        ob_act_quantize(OB_ISA_SCALAR, t, x + (size_t)r * k, k, xq + (size_t)r * stride);
    /* the reference: the cpu route's scalar dot, row by row; y with and without bias */
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    size_t ldy = (size_t)N + 3;
    /* zeros in columns N .. ldy - 1 too: the epilogue check below reads whole rows */
    float *want = calloc((size_t)R * ldy, 4), *wantb = calloc((size_t)R * ldy, 4);
    float *got = malloc((size_t)R * ldy * 4);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++) {
            float v;
            ref->dot[t]((char *)w + (size_t)i * rb, xq + (size_t)r * stride, stride, 1, k, &v);
            want[(size_t)r * ldy + i] = v;
            wantb[(size_t)r * ldy + i] = v + bias[i];
        }
    void *dw = dput(w, rb * N), *dq = dput(xq, stride * R);
    float *db = dput(bias, (size_t)N * 4), *dy = dput(NULL, (size_t)R * ldy * 4);
    struct ob_hrx_mat m = {t, N, k, rb, dw};
    long bad = 0;
    char why[256] = "";
    int e = 0, bad_w = 0, bad_pass = 0;
    /* passes 1..: the tiles' widths again with dp4a instead of the tensor cores (OB_HRX_MMA=0:
     * HIP's product, and CUDA's below sm_80), with the stage's plain copies instead of the
     * asynchronous ones (OB_HRX_ASYNC=0), and with each split of their classes
     * (OB_HRX_SPLIT: 1 is none; the default picks one from the launch's blocks) */
    static const char *const pass_env[][2] = {{NULL, NULL}, {"OB_HRX_MMA", "0"},
        {"OB_HRX_ASYNC", "0"}, {"OB_HRX_SPLIT", "1"}, {"OB_HRX_SPLIT", "2"}, {"OB_HRX_SPLIT", "4"},
        {"OB_HRX_SPLIT", "8"}};
    for (int pass = 0; pass < (int)(sizeof pass_env / sizeof pass_env[0]) && !e; pass++) {
        const char *name = pass_env[pass][0], *was = name ? getenv(name) : NULL;
        char *keep = was ? strdup(was) : NULL;
        if (name)
            setenv(name, pass_env[pass][1], 1);
        for (int wi = 0; wi < nw && !e; wi++)
            for (int with_b = 0; with_b < 2 && !e; with_b++) {
                int n = widths[wi];
                if ((pass > 0 && n < 16) || (pass > 1 && n != 17 && n != 64))
                    continue;       /* passes 2..: one width of each tile height */
                if ((e = rt->k->matmul(q, m, dq, stride, n, with_b ? db : NULL, dy, ldy,
                                       OB_HRX_EPI_STORE, NULL)))
                    break;
                dget(got, dy, (size_t)n * ldy * 4);
                for (int r = 0; r < n; r++) {
                    const float *ref_row = (with_b ? wantb : want) + (size_t)r * ldy;
                    long b = cmp_f32(got + (size_t)r * ldy, ref_row, (size_t)N,
                                     bad ? NULL : why, bad ? 0 : sizeof why);
                    if (b && !bad) {
                        bad_w = n;
                        bad_pass = pass;
                    }
                    bad += b;
                }
            }
        if (keep)                  /* the caller's value back */
            setenv(name, keep, 1);
        else if (name)
            unsetenv(name);
        free(keep);
    }
    ok(!e && bad == 0, "matmul %s %s rows: %d x %d, width%s %d, with and without bias (from 16 "
       "rows: tensor cores and dp4a, copies asynchronous and not, classes split 1 to 8 ways): "
       "%ld differ%s", ob_type_name(t),
       raw ? "raw (NaN/Inf/subnormal scales)" : "valid", N, k, wide ? "" : "s 1..", R, bad,
       e ? errs(e) : why);
    if (bad)
        printf("# first difference at width %d%s%s%s%s\n", bad_w, bad_pass ? " with " : "",
               bad_pass ? pass_env[bad_pass][0] : "", bad_pass ? "=" : "",
               bad_pass ? pass_env[bad_pass][1] : "");
    /* the epilogues, with the bias: y0 + v, ob_silu(y0) * v, ob_gelu(y0) * v */
    if (!raw) {
        float *y0 = malloc((size_t)R * ldy * 4), *wante = malloc((size_t)R * ldy * 4);
        activations(y0, (size_t)R * ldy, false);
        static const char *const opn[] = {"", "add", "silu", "gelu"};
        long ebad = 0;
        for (int op = OB_HRX_EPI_ADD; op <= OB_HRX_EPI_GELU && !e; op++) {
            for (size_t i = 0; i < (size_t)R * ldy; i++) {
                float v = wantb[i];
                wante[i] = op == OB_HRX_EPI_ADD ? y0[i] + v
                           : op == OB_HRX_EPI_SILU ? ob_silu(y0[i]) * v : ob_gelu(y0[i]) * v;
            }
            for (int wi = 0; wi < nw && !e; wi += quick ? 1 : 4) {
                int n = widths[wi];
                rt->h2d(q, dy, y0, (size_t)n * ldy * 4);
                if ((e = rt->k->matmul(q, m, dq, stride, n, db, dy, ldy, op, NULL)))
                    break;
                dget(got, dy, (size_t)n * ldy * 4);
                for (int r = 0; r < n; r++) {
                    long b = cmp_f32(got + (size_t)r * ldy, wante + (size_t)r * ldy, (size_t)N,
                                     ebad ? NULL : why, ebad ? 0 : sizeof why);
                    if (b && !ebad)
                        snprintf(why + strlen(why), sizeof why - strlen(why), " (%s, width %d)",
                                 opn[op], n);
                    ebad += b;
                }
            }
        }
        ok(!e && ebad == 0, "matmul %s %d x %d folding add, swiglu, geglu into the result: %ld "
           "differ%s", ob_type_name(t), N, k, ebad, e ? errs(e) : why);
        free(y0);
        free(wante);
    }
    rt->free(q, dw);
    rt->free(q, dq);
    rt->free(q, db);
    rt->free(q, dy);
    free(w);
    free(x);
    free(bias);
    free(xq);
    free(want);
    free(wantb);
    free(got);
}

static void test_matmul(void)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        uint32_t t = all_types[ti];
        int blk = (int)ob_type_blck(t);
        int k_long = blk == 256 ? 256 * 37 : blk == 32 ? 32 * 70 : 1000 + 7;
        matmul_case(t, 37, k_long, false, 0);
        matmul_case(t, 130, blk == 1 ? 33 : blk, true, 0);
        if (!quick)
            matmul_case(t, 5, k_long, true, 0);
    }
    /* a prefill's width on the types of a Q4_K_M model: 512 rows, 70 weight rows (two tiles,
     * the second in part), 5 blocks (classes 5 .. 7 of the 8 partials empty) */
    matmul_case(OB_Q4_K, 70, 5 * 256, false, 512);
    matmul_case(OB_Q6_K, 70, 5 * 256, false, 512);
}

static void test_rmsnorm(void)
{
    static const int ks[] = {1, 31, 64, 300, 1024};
    for (int ki = 0; ki < 5; ki++) {
        int k = ks[ki], n = 11, nr = 7;
        float *x = malloc((size_t)n * k * 4), *w = malloc((size_t)k * 4);
        float *want = malloc((size_t)nr * k * 4), *got = malloc((size_t)nr * k * 4);
        activations(x, (size_t)n * k, false);
        for (int i = 0; i < k; i++)
            w[i] = gauss();
        int32_t rows[7] = {3, 0, 10, 4, 4, 9, 1};
        for (int j = 0; j < nr; j++)
            ob_rmsnorm(x + (size_t)rows[j] * k, w, want + (size_t)j * k, k, 1e-6f);
        float *dx = dput(x, (size_t)n * k * 4), *dw = dput(w, (size_t)k * 4);
        float *dy = dput(NULL, (size_t)nr * k * 4);
        int32_t *dr = dput(rows, sizeof rows);
        int e = rt->k->rmsnorm(q, dx, dr, nr, k, dw, 1e-6f, dy);
        char why[200] = "";
        long bad = e ? -1 : (dget(got, dy, (size_t)nr * k * 4), cmp_f32(got, want, (size_t)nr * k, why, sizeof why));
        /* and every row in order (rows NULL) */
        float *want2 = malloc((size_t)n * k * 4), *got2 = malloc((size_t)n * k * 4);
        for (int j = 0; j < n; j++)
            ob_rmsnorm(x + (size_t)j * k, w, want2 + (size_t)j * k, k, 1e-6f);
        float *dy2 = dput(NULL, (size_t)n * k * 4);
        if (!e && !(e = rt->k->rmsnorm(q, dx, NULL, n, k, dw, 1e-6f, dy2))) {
            dget(got2, dy2, (size_t)n * k * 4);
            bad += cmp_f32(got2, want2, (size_t)n * k, why, sizeof why);
        }
        /* in place (dst == src), as gemma3's post norms on OUT */
        if (!e && !(e = rt->k->rmsnorm(q, dx, NULL, n, k, dw, 1e-6f, dx))) {
            dget(got2, dx, (size_t)n * k * 4);
            bad += cmp_f32(got2, want2, (size_t)n * k, why, sizeof why);
        }
        ok(!e && bad == 0, "rmsnorm of %d values, gathered rows, rows in order and in place%s%s",
           k, why, errs(e));
        rt->free(q, dx);
        rt->free(q, dw);
        rt->free(q, dy);
        rt->free(q, dy2);
        rt->free(q, dr);
        free(x);
        free(w);
        free(want);
        free(got);
        free(want2);
        free(got2);
    }
}

/* rmsnorm_q: the normalised rows (ob_rmsnorm) and their quantised copy (ob_act_quantize of
 * those rows), in each activation format; rows of 1024 values with NaN, Inf and zero blocks */
static void test_rmsnorm_q(void)
{
    static const char *const names[] = {"F32", "Q8_K", "A8"};
    for (int fmt = 0; fmt < 3; fmt++) {
        int k = 1024, n = 5;
        float *x = malloc((size_t)n * k * 4), *w = malloc((size_t)k * 4);
        float *want = malloc((size_t)n * k * 4), *got = malloc((size_t)n * k * 4);
        for (int r = 0; r < n; r++)
            activations(x + (size_t)r * k, (size_t)k, r > 0);
        for (int i = 0; i < k; i++)
            w[i] = i < 256 ? 0.0f : gauss();            /* a block that normalises to zeros */
        size_t stride = ob_act_row_bytes(fmt, k);
        uint8_t *wq = calloc(stride, n), *gq = malloc(stride * n);
        uint32_t wt = fmt == 0 ? OB_F32 : fmt == 1 ? OB_Q4_K : OB_Q8_0;
        for (int r = 0; r < n; r++) {
            ob_rmsnorm(x + (size_t)r * k, w, want + (size_t)r * k, k, 1e-6f);
            ob_act_quantize(OB_ISA_SCALAR, wt, want + (size_t)r * k, k, wq + (size_t)r * stride);
        }
        float *dx = dput(x, (size_t)n * k * 4), *dw = dput(w, (size_t)k * 4);
        float *dy = dput(NULL, (size_t)n * k * 4);
        void *dq = dput(NULL, stride * n);
        int e = rt->k->rmsnorm_q(q, dx, n, k, dw, 1e-6f, dy, fmt, dq, stride);
        char why[200] = "";
        long bad = 0, qbad = 0;
        if (!e) {
            dget(got, dy, (size_t)n * k * 4);
            bad = cmp_f32(got, want, (size_t)n * k, why, sizeof why);
            dget(gq, dq, stride * n);
            if (fmt == OB_HRX_ACT_F32)     /* floats: a NaN matches any NaN on a GPU */
                qbad = cmp_f32((float *)gq, (float *)wq, (size_t)n * k, NULL, 0);
            else
                for (size_t b = 0; b < stride * n; b++)
                    qbad += gq[b] != wq[b];
        }
        ok(!e && bad == 0 && qbad == 0, "rmsnorm_q %s: %d rows of %d values: %ld values, %ld "
           "quantised bytes differ%s%s", names[fmt], n, k, bad, qbad, why, errs(e));
        rt->free(q, dx);
        rt->free(q, dw);
        rt->free(q, dy);
        rt->free(q, dq);
        free(x);
        free(w);
        free(want);
        free(got);
        free(wq);
        free(gq);
    }
}

/* random q/k norm weights (hd values each) and RoPE tables (n values each) */
static void rope_inputs(float *wq, float *wk, int hd, float *cs, float *sn, int n)
{
    for (int i = 0; i < hd; i++) {
        wq[i] = gauss();
        wk[i] = gauss();
    }
    for (int i = 0; i < n; i++) {
        cs[i] = frand();
        sn[i] = frand();
    }
}

static void test_qk_rope(void)
{
    static const struct { int hd, n_rot, neox, norm; } cs_[] = {
        {16, 16, 1, 1}, {64, 64, 1, 1}, {128, 128, 1, 0}, {64, 64, 0, 0}, {64, 32, 0, 1},
        {128, 96, 1, 1}, {256, 256, 1, 1},
    };
    for (size_t c = 0; c < sizeof cs_ / sizeof cs_[0]; c++) {
        int hd = cs_[c].hd, nh = 6, nkv = 2, n = 5, n_pos = 40, half = cs_[c].n_rot / 2;
        size_t qn = (size_t)n * nh * hd, kn = (size_t)n * nkv * hd;
        float *Q = malloc(qn * 4), *K = malloc(kn * 4), *wq = malloc(hd * 4), *wk = malloc(hd * 4);
        float *cs = malloc((size_t)n_pos * half * 4), *sn = malloc((size_t)n_pos * half * 4);
        activations(Q, qn, false);
        activations(K, kn, false);
        rope_inputs(wq, wk, hd, cs, sn, n_pos * half);
        int32_t pos[5] = {0, 39, 7, 7, 21};
        float *wantq = malloc(qn * 4), *wantk = malloc(kn * 4);
        memcpy(wantq, Q, qn * 4);
        memcpy(wantk, K, kn * 4);
        for (int i = 0; i < n; i++) {
            const float *c0 = cs + (size_t)pos[i] * half, *s0 = sn + (size_t)pos[i] * half;
            for (int h = 0; h < nh + nkv; h++) {
                float *x = h < nh ? wantq + ((size_t)i * nh + h) * hd
                                  : wantk + ((size_t)i * nkv + h - nh) * hd;
                if (cs_[c].norm)
                    ob_rmsnorm(x, h < nh ? wq : wk, x, hd, 1e-6f);
                ob_rope(x, c0, s0, cs_[c].n_rot, cs_[c].neox);
            }
        }
        float *dQ = dput(Q, qn * 4), *dK = dput(K, kn * 4), *dwq = dput(wq, hd * 4);
        float *dwk = dput(wk, hd * 4), *dcs = dput(cs, (size_t)n_pos * half * 4);
        float *dsn = dput(sn, (size_t)n_pos * half * 4);
        int32_t *dp = dput(pos, sizeof pos);
        struct ob_hrx_rope r = {nh, nkv, hd, cs_[c].n_rot, cs_[c].neox, 1e-6f,
                                cs_[c].norm ? dwq : NULL, cs_[c].norm ? dwk : NULL, dcs, dsn};
        int e = rt->k->qk_rope(q, r, dQ, dK, dp, n);
        char why[200] = "";
        long bad = -1;
        if (!e) {
            dget(Q, dQ, qn * 4);
            dget(K, dK, kn * 4);
            bad = cmp_f32(Q, wantq, qn, why, sizeof why) + cmp_f32(K, wantk, kn, why, sizeof why);
        }
        ok(bad == 0, "qk_rope: head_dim %d, %d rotated, %s pairs, %s norm%s%s", hd,
           cs_[c].n_rot, cs_[c].neox ? "NEOX" : "NORM", cs_[c].norm ? "with" : "no", why,
           errs(e));
        void *ptrs[] = {dQ, dK, dwq, dwk, dcs, dsn, dp};
        for (int i = 0; i < 7; i++)
            rt->free(q, ptrs[i]);
        free(Q);
        free(K);
        free(wq);
        free(wk);
        free(cs);
        free(sn);
        free(wantq);
        free(wantk);
    }
}

/*
 * matmul_multi against the cpu route's scalar dot, row by row (+ bias): Q, K and V shapes of one
 * type (three matrices, and two), a third matrix of another type of the same activation format
 * (a launch a matrix), and the gated unit (gate and up: act(gate + b) * (up + b), silu and
 * gelu), at widths 1, 3, 8 (one launch on a GPU or under OB_HRX_SIM_TILES=gpu) and 37
 */
static void test_matmul_multi(void)
{
    static const uint32_t types[] = {OB_Q4_K, OB_Q6_K, OB_Q8_0, OB_Q4_1, OB_Q5_K, OB_F16};
    static const uint32_t other[] = {OB_Q6_K, OB_Q4_K, OB_Q4_1, OB_Q8_0, OB_Q2_K, OB_BF16};
    static const int widths[] = {1, 3, 8, 37}, Ns[3] = {45, 17, 9};
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t t = types[ti];
        int blk = (int)ob_type_blck(t), R = 37;
        int k = blk == 256 ? 256 * 5 : blk == 32 ? 32 * 21 : 96;
        int fmt = ob_type_actfmt(t);
        size_t stride = ob_act_row_bytes(fmt, k), rb[4];
        float *x = malloc((size_t)R * k * 4);
        activations(x, (size_t)R * k, false);
        char *xq = malloc(stride * R);
        for (int r = 0; r < R; r++)
            ob_act_quantize(OB_ISA_SCALAR, t, x + (size_t)r * k, k, xq + (size_t)r * stride);
        /* matrices 0..2 of type t (raw rows for the stored products), 3: the other type */
        void *w[4], *dw[4];
        float *bias[3], *db[3], *want[4], *dy[3], *got = malloc((size_t)R * 64 * 4);
        for (int j = 0; j < 4; j++) {
            uint32_t tj = j < 3 ? t : other[ti];
            int N = Ns[j < 3 ? j : 2];
            w[j] = weights(tj, N, k, j != 1, &rb[j]);
            dw[j] = dput(w[j], rb[j] * N);
            want[j] = malloc((size_t)R * N * 4);
            for (int r = 0; r < R; r++)
                for (int i = 0; i < N; i++)
                    ref->dot[tj]((char *)w[j] + (size_t)i * rb[j], xq + (size_t)r * stride,
                                 stride, 1, k, &want[j][(size_t)r * N + i]);
        }
        for (int j = 0; j < 3; j++) {
            bias[j] = malloc((size_t)Ns[j] * 4);
            for (int i = 0; i < Ns[j]; i++)
                bias[j][i] = gauss();
            db[j] = dput(bias[j], (size_t)Ns[j] * 4);
            dy[j] = dput(NULL, (size_t)R * (Ns[j] + 3) * 4);
        }
        void *dq = dput(xq, stride * R);
        /* the cases: matrices (an index into w), a bias or not */
        static const struct { int count, mat[3], with_b[3]; } cs_[] = {
            {3, {0, 1, 2}, {1, 0, 1}}, {2, {0, 1, -1}, {0, 1, 0}}, {3, {0, 1, 3}, {1, 1, 1}},
            {1, {2, -1, -1}, {1, 0, 0}},
        };
        long bad = 0;
        char why[256] = "";
        int e = 0;
        for (size_t c = 0; c < sizeof cs_ / sizeof cs_[0] && !e; c++)
            for (int wi = 0; wi < 4 && !e; wi++) {
                int n = widths[wi];
                struct ob_hrx_multi m = {cs_[c].count};
                for (int j = 0; j < m.count; j++) {
                    int mj = cs_[c].mat[j], N = Ns[mj < 3 ? mj : 2];
                    m.w[j] = (struct ob_hrx_mat){mj < 3 ? t : other[ti], N, k, rb[mj], dw[mj]};
                    m.b[j] = cs_[c].with_b[j] ? db[j] : NULL;
                    m.y[j] = dy[j];
                    m.ldy[j] = (size_t)N + 3;
                }
                if ((e = rt->k->matmul_multi(q, m, dq, stride, n, OB_HRX_EPI_STORE, NULL)))
                    break;
                for (int j = 0; j < m.count; j++) {
                    int mj = cs_[c].mat[j], N = m.w[j].n;
                    dget(got, dy[j], (size_t)n * m.ldy[j] * 4);
                    for (int r = 0; r < n; r++)
                        for (int i = 0; i < N; i++) {
                            float v = want[mj][(size_t)r * N + i];
                            if (m.b[j])
                                v = v + bias[j][i];
                            long d = cmp_f32(got + (size_t)r * m.ldy[j] + i, &v, 1,
                                             bad ? NULL : why, bad ? 0 : sizeof why);
                            if (d && !bad)
                                snprintf(why + strlen(why), sizeof why - strlen(why),
                                         " (case %zu, matrix %d, width %d, row %d)", c, j, n, r);
                            bad += d;
                        }
                }
            }
        ok(!e && bad == 0, "matmul_multi %s: 3, 2 and 1 matrices of %d values, one of %s "
           "among them, widths 1, 3, 8, 37: %ld differ%s", ob_type_name(t), k,
           ob_type_name(other[ti]), bad, e ? errs(e) : why);
        /* the gated unit: gate = matrix 0, up = matrix 2 of the same shape (valid rows) */
        void *wu = weights(t, Ns[0], k, false, &rb[3]), *dwu = dput(wu, rb[3] * Ns[0]);
        float *wantu = malloc((size_t)R * Ns[0] * 4);
        for (int r = 0; r < R; r++)
            for (int i = 0; i < Ns[0]; i++)
                ref->dot[t]((char *)wu + (size_t)i * rb[3], xq + (size_t)r * stride, stride, 1,
                            k, &wantu[(size_t)r * Ns[0] + i]);
        void *wg = weights(t, Ns[0], k, false, &rb[3]), *dwg = dput(wg, rb[3] * Ns[0]);
        float *wantg = malloc((size_t)R * Ns[0] * 4), *ub = malloc((size_t)Ns[0] * 4);
        for (int r = 0; r < R; r++)
            for (int i = 0; i < Ns[0]; i++)
                ref->dot[t]((char *)wg + (size_t)i * rb[3], xq + (size_t)r * stride, stride, 1,
                            k, &wantg[(size_t)r * Ns[0] + i]);
        for (int i = 0; i < Ns[0]; i++)
            ub[i] = gauss();
        float *dub = dput(ub, (size_t)Ns[0] * 4);
        long gbad = 0;
        size_t ldy = (size_t)Ns[0] + 3;
        for (int op = OB_HRX_EPI_SILU; op <= OB_HRX_EPI_GELU && !e; op++)
            for (int wi = 0; wi < 4 && !e; wi++) {
                int n = widths[wi];
                bool with_b = wi % 2 == 0;
                struct ob_hrx_multi m = {2, {{t, Ns[0], k, rb[3], dwg}, {t, Ns[0], k, rb[3], dwu}},
                                         {with_b ? db[0] : NULL, with_b ? dub : NULL},
                                         {dy[0], NULL}, {ldy, 0}};
                if ((e = rt->k->matmul_multi(q, m, dq, stride, n, op, NULL)))
                    break;
                dget(got, dy[0], (size_t)n * ldy * 4);
                for (int r = 0; r < n; r++)
                    for (int i = 0; i < Ns[0]; i++) {
                        float g = wantg[(size_t)r * Ns[0] + i], u = wantu[(size_t)r * Ns[0] + i];
                        if (with_b) {
                            g = g + bias[0][i];
                            u = u + ub[i];
                        }
                        float v = op == OB_HRX_EPI_SILU ? ob_silu(g) * u : ob_gelu(g) * u;
                        long d = cmp_f32(got + (size_t)r * ldy + i, &v, 1, gbad ? NULL : why,
                                         gbad ? 0 : sizeof why);
                        if (d && !gbad)
                            snprintf(why + strlen(why), sizeof why - strlen(why),
                                     " (%s, width %d, row %d)",
                                     op == OB_HRX_EPI_SILU ? "silu" : "gelu", n, r);
                        gbad += d;
                    }
            }
        ok(!e && gbad == 0, "matmul_multi %s: gate and up of %d x %d into the gated unit (silu, "
           "gelu; with and without biases), widths 1, 3, 8, 37: %ld differ%s", ob_type_name(t),
           Ns[0], k, gbad, e ? errs(e) : why);
        for (int j = 0; j < 4; j++) {
            rt->free(q, dw[j]);
            free(w[j]);
            free(want[j]);
        }
        for (int j = 0; j < 3; j++) {
            rt->free(q, db[j]);
            rt->free(q, dy[j]);
            free(bias[j]);
        }
        void *ptrs[] = {dq, dwu, dwg, dub};
        for (int i = 0; i < 4; i++)
            rt->free(q, ptrs[i]);
        free(wu);
        free(wg);
        free(wantu);
        free(wantg);
        free(ub);
        free(x);
        free(xq);
        free(got);
    }
}

/* rope_kv against ob_rmsnorm, ob_rope and ob_kv_put: Q rotated in place, the rotated K rows and
 * the V rows in the caches at (slot, position), nothing else of the caches written, K unchanged */
/*
 * What a product does after it (hrx.h's ob_hrx_then): X + W a then rmsnorm_q of those rows
 * (NORM_Q), and the gated unit then the quantisation of its rows (ACTQ), against the reference
 * ops one after the other (the dot, ob_add_f32's y + v, ob_rmsnorm, ob_act_quantize): the
 * rows, the normalised rows and the quantised bytes. Up to 15 rows a GPU's launch does it
 * all, its last block the `then` (each row group's, or each 256 columns'); wider batches and
 * rows not whole blocks of the format take a launch after. Each launch runs twice: a counter
 * the first left wrong would show in the second.
 */
static void then_case(uint32_t t, int N, int k, int fmt, int flavour)
{
    static const int widths_all[] = {1, 3, 8, 13, 16, 37}, widths_quick[] = {1, 8, 17};
    const int *widths = quick ? widths_quick : widths_all;
    int nw = quick ? 3 : 6, R = widths[nw - 1];
    bool glu = flavour == OB_HRX_THEN_ACTQ;
    size_t rb, astride = ob_act_row_bytes(ob_type_actfmt(t), k);
    size_t stride = ob_act_row_bytes(fmt, N);
    uint32_t ft = fmt == OB_HRX_ACT_Q8K ? OB_Q4_K : OB_Q8_0;   /* a weight type of format fmt */
    void *w = weights(t, N, k, false, &rb), *w2 = weights(t, N, k, false, &rb);
    float *x = malloc((size_t)R * k * 4), *y0 = malloc((size_t)R * N * 4);
    float *nw_ = malloc((size_t)N * 4), *bias = malloc((size_t)N * 4);
    float *want = malloc((size_t)R * N * 4), *wantn = malloc((size_t)R * N * 4);
    float *got = malloc((size_t)R * N * 4);
    char *xq = malloc(astride * R);
    uint8_t *wq = calloc(stride, R), *gq = malloc(stride * R);
    activations(x, (size_t)R * k, false);
    activations(y0, (size_t)R * N, false);
    for (int i = 0; i < N; i++) {
        nw_[i] = gauss();
        bias[i] = gauss();
    }
    for (int r = 0; r < R; r++)
        ob_act_quantize(OB_ISA_SCALAR, t, x + (size_t)r * k, k, xq + (size_t)r * astride);
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    for (int r = 0; r < R; r++) {
        float *yr = want + (size_t)r * N;
        for (int i = 0; i < N; i++) {
            float v, u;
            ref->dot[t]((char *)w + (size_t)i * rb, xq + (size_t)r * astride, astride, 1, k, &v);
            v = v + bias[i];
            if (glu) {             /* gate w, up w2 with the same bias */
                ref->dot[t]((char *)w2 + (size_t)i * rb, xq + (size_t)r * astride, astride, 1,
                            k, &u);
                yr[i] = ob_silu(v) * (u + bias[i]);
            } else {
                yr[i] = y0[(size_t)r * N + i] + v;
            }
        }
        float *qsrc = yr;
        if (!glu) {
            ob_rmsnorm(yr, nw_, wantn + (size_t)r * N, N, 1e-6f);
            qsrc = wantn + (size_t)r * N;
        }
        ob_act_quantize(OB_ISA_SCALAR, ft, qsrc, N, wq + (size_t)r * stride);
    }
    void *dw = dput(w, rb * N), *dw2 = dput(w2, rb * N), *dq = dput(xq, astride * R);
    float *db = dput(bias, (size_t)N * 4), *dnw = dput(nw_, (size_t)N * 4);
    float *dy = dput(NULL, (size_t)R * N * 4), *dny = dput(NULL, (size_t)R * N * 4);
    void *dtq = dput(NULL, stride * R);
    struct ob_hrx_then th = {flavour, dnw, 1e-6f, dny, fmt, dtq, stride};
    long bad = 0;
    char why[256] = "";
    int e = 0;
    for (int wi = 0; wi < nw && !e; wi++)
        for (int run = 0; run < 2 && !e; run++) {
            int n = widths[wi];
            /* the outputs filled with what no run writes: a `then` not done shows */
            memset(gq, 0xa5, stride * R);
            memset(got, 0xa5, (size_t)R * N * 4);
            rt->h2d(q, dy, y0, (size_t)n * N * 4);
            rt->h2d(q, dtq, gq, stride * R);
            rt->h2d(q, dny, got, (size_t)R * N * 4);
            if (glu) {
                struct ob_hrx_multi m = {2, {{t, N, k, rb, dw}, {t, N, k, rb, dw2}}, {db, db},
                                         {dy, NULL}, {(size_t)N, 0}};
                e = rt->k->matmul_multi(q, m, dq, astride, n, OB_HRX_EPI_SILU, &th);
            } else {
                e = rt->k->matmul(q, (struct ob_hrx_mat){t, N, k, rb, dw}, dq, astride, n, db,
                                  dy, (size_t)N, OB_HRX_EPI_ADD, &th);
            }
            if (e)
                break;
            long b0 = bad;
            dget(got, dy, (size_t)n * N * 4);
            bad += cmp_f32(got, want, (size_t)n * N, bad ? NULL : why, bad ? 0 : sizeof why);
            if (!glu) {
                dget(got, dny, (size_t)n * N * 4);
                bad += cmp_f32(got, wantn, (size_t)n * N, bad ? NULL : why, bad ? 0 : sizeof why);
            }
            dget(gq, dtq, stride * n);
            long qb = 0;
            for (size_t i = 0; i < stride * n; i++)
                qb += gq[i] != wq[i];
            if (qb && !bad)
                snprintf(why, sizeof why, " (quantised bytes)");
            bad += qb;
            if (bad && !b0)
                snprintf(why + strlen(why), sizeof why - strlen(why), " (width %d, run %d)", n,
                         run + 1);
        }
    ok(!e && bad == 0, "%s %s %d x %d then %s in %s: widths 1..%d, twice each: %ld differ%s",
       glu ? "matmul_multi gated" : "matmul + add", ob_type_name(t), N, k,
       glu ? "actq" : "rmsnorm_q", fmt == OB_HRX_ACT_Q8K ? "Q8_K" : "A8", R, bad,
       e ? errs(e) : why);
    void *dev[] = {dw, dw2, dq, db, dnw, dy, dny, dtq};
    for (int i = 0; i < 8; i++)
        rt->free(q, dev[i]);
    void *host[] = {w, w2, x, y0, nw_, bias, want, wantn, got, xq, wq, gq};
    for (int i = 0; i < 12; i++)
        free(host[i]);
}

/*
 * matmul_multi's ROPE_KV `then`: Q, K and V of activation rows (one launch where they share a
 * type, else Q and K in one and V in another), then rope_kv's work on them: Q's heads
 * normalised and rotated in place, K's into kc, V's into vc, against the reference dots, then
 * ob_rmsnorm, ob_rope and ob_kv_put. Up to 16 rows the launches' last blocks of each head do
 * it; 17 rows and float weights take a launch after. Twice each, the caches refilled first.
 */
static void qkv_rope_case(uint32_t tq, uint32_t tv)
{
    static const int widths_all[] = {1, 3, 8, 16, 17}, widths_quick[] = {1, 8, 17};
    const int *widths = quick ? widths_quick : widths_all;
    int nw = quick ? 3 : 5, R = 17, nh = 4, nkv = 2, hd = 64, k = 256, n_ctx = 40, slots = 3;
    int half = hd / 2, kvw = nkv * hd, N[3] = {nh * hd, kvw, kvw};
    uint32_t ty[3] = {tq, tq, tv};
    size_t rb[3], astride = ob_act_row_bytes(ob_type_actfmt(tq), k);
    size_t cache = (size_t)slots * n_ctx * kvw;
    void *w[3], *dw[3];
    float *want[3], *dy[3];
    float *x = malloc((size_t)R * k * 4), *wq = malloc(hd * 4), *wk = malloc(hd * 4);
    float *cs = malloc((size_t)n_ctx * half * 4), *sn = malloc((size_t)n_ctx * half * 4);
    float *got = malloc((size_t)R * N[0] * 4);
    char *xq = malloc(astride * R);
    uint16_t *kc_want = malloc(cache * 2), *vc_want = malloc(cache * 2), *fill = malloc(cache * 2);
    uint16_t *kc = malloc(cache * 2), *vc = malloc(cache * 2);
    int32_t pos[17], seq[17];
    activations(x, (size_t)R * k, false);
    rope_inputs(wq, wk, hd, cs, sn, n_ctx * half);
    for (int i = 0; i < R; i++) {
        pos[i] = (i * 7) % n_ctx; /* distinct (slot, position) places */
        seq[i] = i % slots;
    }
    for (size_t i = 0; i < cache; i++)
        fill[i] = kc_want[i] = vc_want[i] = (uint16_t)(0x3c00 + i % 97);
    for (int r = 0; r < R; r++)
        ob_act_quantize(OB_ISA_SCALAR, tq, x + (size_t)r * k, k, xq + (size_t)r * astride);
    const struct ob_kernel_table *ref = ob_kernels(OB_ISA_SCALAR);
    for (int j = 0; j < 3; j++) {
        w[j] = weights(ty[j], N[j], k, false, &rb[j]);
        want[j] = malloc((size_t)R * N[j] * 4);
        for (int r = 0; r < R; r++)
            for (int i = 0; i < N[j]; i++)
                ref->dot[ty[j]]((char *)w[j] + (size_t)i * rb[j], xq + (size_t)r * astride,
                                astride, 1, k, &want[j][(size_t)r * N[j] + i]);
        dw[j] = dput(w[j], rb[j] * N[j]);
        dy[j] = dput(NULL, (size_t)R * N[j] * 4);
    }
    float *kr = malloc((size_t)kvw * 4);
    for (int i = 0; i < R; i++) {
        const float *c0 = cs + (size_t)pos[i] * half, *s0 = sn + (size_t)pos[i] * half;
        for (int h = 0; h < nh; h++) {
            float *qh = want[0] + ((size_t)i * nh + h) * hd;
            ob_rmsnorm(qh, wq, qh, hd, 1e-6f);
            ob_rope(qh, c0, s0, hd, 1);
        }
        memcpy(kr, want[1] + (size_t)i * kvw, (size_t)kvw * 4);   /* K itself stays */
        for (int h = 0; h < nkv; h++) {
            ob_rmsnorm(kr + h * hd, wk, kr + h * hd, hd, 1e-6f);
            ob_rope(kr + h * hd, c0, s0, hd, 1);
        }
        size_t at = ((size_t)seq[i] * n_ctx + pos[i]) * kvw;
        ob_kv_put(kc_want + at, kr, kvw);
        ob_kv_put(vc_want + at, want[2] + (size_t)i * kvw, kvw);
    }
    float *dwq = dput(wq, hd * 4), *dwk = dput(wk, hd * 4);
    float *dcs = dput(cs, (size_t)n_ctx * half * 4), *dsn = dput(sn, (size_t)n_ctx * half * 4);
    int32_t *dp = dput(pos, sizeof pos), *ds = dput(seq, sizeof seq);
    uint16_t *dkc = dput(NULL, cache * 2), *dvc = dput(NULL, cache * 2);
    void *dq = dput(xq, astride * R);
    struct ob_hrx_then th = {OB_HRX_THEN_ROPE_KV};
    th.r = (struct ob_hrx_rope){nh, nkv, hd, hd, 1, 1e-6f, dwq, dwk, dcs, dsn};
    th.pos = dp;
    th.seq = ds;
    th.n_ctx = n_ctx;
    th.kc = dkc;
    th.vc = dvc;
    long bad = 0;
    char why[256] = "";
    int e = 0;
    for (int wi = 0; wi < nw && !e; wi++)
        for (int run = 0; run < 2 && !e; run++) {
            int n = widths[wi];
            long b0 = bad;
            rt->h2d(q, dkc, fill, cache * 2);
            rt->h2d(q, dvc, fill, cache * 2);
            /* one launch of the three, or Q and K, then V */
            for (int j0 = 0; j0 < 3 && !e; j0 += tq == tv ? 3 : 2) {
                struct ob_hrx_multi m = {0};
                for (int j = j0; j < (tq == tv ? 3 : j0 ? 3 : 2); j++) {
                    th.role[m.count] = j;
                    m.w[m.count] = (struct ob_hrx_mat){ty[j], N[j], k, rb[j], dw[j]};
                    m.y[m.count] = dy[j];
                    m.ldy[m.count++] = (size_t)N[j];
                }
                e = rt->k->matmul_multi(q, m, dq, astride, n, OB_HRX_EPI_STORE, &th);
            }
            if (e)
                break;
            for (int j = 0; j < 2; j++) {        /* Q rotated, K as the product left it */
                dget(got, dy[j], (size_t)n * N[j] * 4);
                bad += cmp_f32(got, want[j], (size_t)n * N[j], bad ? NULL : why,
                               bad ? 0 : sizeof why);
            }
            dget(kc, dkc, cache * 2);
            dget(vc, dvc, cache * 2);
            long cb = 0;
            for (int i = 0; i < n; i++) {        /* rows past n: the caches untouched */
                size_t at = ((size_t)seq[i] * n_ctx + pos[i]) * kvw;
                for (int d = 0; d < kvw; d++) {
                    cb += kc[at + d] != kc_want[at + d] || vc[at + d] != vc_want[at + d];
                    kc[at + d] = vc[at + d] = fill[at + d];
                }
            }
            for (size_t i = 0; i < cache; i++)
                cb += kc[i] != fill[i] || vc[i] != fill[i];
            if (cb && !bad)
                snprintf(why, sizeof why, " (caches)");
            bad += cb;
            if (bad && !b0)
                snprintf(why + strlen(why), sizeof why - strlen(why), " (width %d, run %d)", n,
                         run + 1);
        }
    ok(!e && bad == 0, "matmul_multi %s q, k and %s v of %d then rope_kv (%s): widths 1..17, "
       "twice each: %ld differ%s", ob_type_name(tq), ob_type_name(tv), k,
       tq == tv ? "one launch" : "two", bad, e ? errs(e) : why);
    for (int j = 0; j < 3; j++) {
        rt->free(q, dw[j]);
        rt->free(q, dy[j]);
        free(w[j]);
        free(want[j]);
    }
    void *dev[] = {dwq, dwk, dcs, dsn, dp, ds, dkc, dvc, dq};
    for (int i = 0; i < 9; i++)
        rt->free(q, dev[i]);
    void *host[] = {x, wq, wk, cs, sn, got, xq, kc_want, vc_want, fill, kc, vc, kr};
    for (int i = 0; i < 13; i++)
        free(host[i]);
}

static void test_then(void)
{
    then_case(OB_Q4_K, 512, 512, OB_HRX_ACT_Q8K, OB_HRX_THEN_NORM_Q);
    then_case(OB_Q6_K, 512, 256, OB_HRX_ACT_A8, OB_HRX_THEN_NORM_Q);
    then_case(OB_Q8_0, 96, 64, OB_HRX_ACT_A8, OB_HRX_THEN_NORM_Q);
    then_case(OB_F16, 256, 40, OB_HRX_ACT_Q8K, OB_HRX_THEN_NORM_Q);   /* a launch after */
    then_case(OB_Q4_K, 512, 256, OB_HRX_ACT_Q8K, OB_HRX_THEN_ACTQ);
    then_case(OB_Q5_0, 512, 64, OB_HRX_ACT_A8, OB_HRX_THEN_ACTQ);
    then_case(OB_Q4_1, 96, 32, OB_HRX_ACT_A8, OB_HRX_THEN_ACTQ);      /* 96: a launch after */
    qkv_rope_case(OB_Q4_K, OB_Q4_K);
    qkv_rope_case(OB_Q4_K, OB_Q6_K);
    qkv_rope_case(OB_Q8_0, OB_Q8_0);
    qkv_rope_case(OB_F16, OB_F16);                                    /* a launch after */
}

static void test_rope_kv(void)
{
    static const struct { int hd, n_rot, neox, norm; } cs_[] = {
        {64, 64, 1, 1}, {128, 128, 1, 0}, {64, 32, 0, 1}, {128, 96, 1, 1}, {64, 48, 1, 0},
    };
    for (size_t c = 0; c < sizeof cs_ / sizeof cs_[0]; c++) {
        int hd = cs_[c].hd, nh = 6, nkv = 2, n = 5, n_ctx = 40, slots = 3, half = cs_[c].n_rot / 2;
        int kvw = nkv * hd;
        size_t qn = (size_t)n * nh * hd, kn = (size_t)n * kvw, cache = (size_t)slots * n_ctx * kvw;
        float *Q = malloc(qn * 4), *K = malloc(kn * 4), *V = malloc(kn * 4);
        float *wq = malloc(hd * 4), *wk = malloc(hd * 4);
        float *cs = malloc((size_t)n_ctx * half * 4), *sn = malloc((size_t)n_ctx * half * 4);
        activations(Q, qn, false);
        activations(K, kn, false);
        activations(V, kn, false);
        rope_inputs(wq, wk, hd, cs, sn, n_ctx * half);
        int32_t pos[5] = {0, 39, 7, 7, 21}, seq[5] = {0, 2, 1, 0, 2};
        float *wantq = malloc(qn * 4), *wantk = malloc(kn * 4), *got = malloc(kn * 4);
        uint16_t *kc_want = malloc(cache * 2), *vc_want = malloc(cache * 2);
        uint16_t *kc = malloc(cache * 2), *vc = malloc(cache * 2);
        for (size_t i = 0; i < cache; i++)
            kc_want[i] = vc_want[i] = (uint16_t)(0x3c00 + i % 97);
        memcpy(wantq, Q, qn * 4);
        memcpy(wantk, K, kn * 4);
        for (int i = 0; i < n; i++) {
            const float *c0 = cs + (size_t)pos[i] * half, *s0 = sn + (size_t)pos[i] * half;
            for (int h = 0; h < nh + nkv; h++) {
                float *x = h < nh ? wantq + ((size_t)i * nh + h) * hd
                                  : wantk + ((size_t)i * nkv + h - nh) * hd;
                if (cs_[c].norm)
                    ob_rmsnorm(x, h < nh ? wq : wk, x, hd, 1e-6f);
                ob_rope(x, c0, s0, cs_[c].n_rot, cs_[c].neox);
            }
            size_t at = ((size_t)seq[i] * n_ctx + pos[i]) * kvw;
            ob_kv_put(kc_want + at, wantk + (size_t)i * kvw, kvw);
            ob_kv_put(vc_want + at, V + (size_t)i * kvw, kvw);
        }
        float *dQ = dput(Q, qn * 4), *dK = dput(K, kn * 4), *dV = dput(V, kn * 4);
        float *dwq = dput(wq, hd * 4), *dwk = dput(wk, hd * 4);
        float *dcs = dput(cs, (size_t)n_ctx * half * 4), *dsn = dput(sn, (size_t)n_ctx * half * 4);
        int32_t *dp = dput(pos, sizeof pos), *ds = dput(seq, sizeof seq);
        uint16_t *fill = malloc(cache * 2);            /* the caches before: a pattern */
        for (size_t i = 0; i < cache; i++)
            fill[i] = (uint16_t)(0x3c00 + i % 97);
        uint16_t *dkc = dput(fill, cache * 2), *dvc = dput(fill, cache * 2);
        struct ob_hrx_rope r = {nh, nkv, hd, cs_[c].n_rot, cs_[c].neox, 1e-6f,
                                cs_[c].norm ? dwq : NULL, cs_[c].norm ? dwk : NULL, dcs, dsn};
        int e = rt->k->rope_kv(q, r, dQ, dK, dV, dp, ds, n, n_ctx, dkc, dvc);
        char why[200] = "";
        long bad = -1, cbad = 0;
        if (!e) {
            dget(Q, dQ, qn * 4);
            dget(got, dK, kn * 4);
            dget(kc, dkc, cache * 2);
            dget(vc, dvc, cache * 2);
            bad = cmp_f32(Q, wantq, qn, why, sizeof why) + cmp_f32(got, K, kn, why, sizeof why);
            for (size_t i = 0; i < cache; i++)
                cbad += kc[i] != kc_want[i] || vc[i] != vc_want[i];
        }
        ok(bad == 0 && cbad == 0, "rope_kv: head_dim %d, %d rotated, %s pairs, %s norm: Q, "
           "K unchanged, %ld cache values differ%s%s", hd, cs_[c].n_rot,
           cs_[c].neox ? "NEOX" : "NORM", cs_[c].norm ? "with" : "no", cbad, why,
           errs(e));
        void *ptrs[] = {dQ, dK, dV, dwq, dwk, dcs, dsn, dp, ds, dkc, dvc};
        for (int i = 0; i < 11; i++)
            rt->free(q, ptrs[i]);
        void *hp[] = {Q, K, V, wq, wk, cs, sn, wantq, wantk, got, kc_want, vc_want, kc, vc, fill};
        for (int i = 0; i < 15; i++)
            free(hp[i]);
    }
}

/* kv_store then attention, against ob_kv_put and ob_attn_head */
static void test_attention(void)
{
    /* window: a sliding-window layer's (gemma3), keys ob_attn_first_key(pos, window) .. pos */
    static const struct { int hd, nh, nkv, maxpos, window; } cs_[] = {
        {16, 4, 2, 70, 0}, {64, 4, 2, 300, 0}, {128, 8, 8, 130, 0}, {256, 2, 1, 65, 0},
        {64, 6, 3, 1, 0}, {128, 4, 1, 300, 16}, {64, 4, 2, 300, 64}, {256, 4, 1, 200, 65},
        {32, 2, 1, 130, 100}, {16, 2, 2, 70, 1},
        {16, 32, 8, 1100, 0},      /* more groups of 256 keys than split blocks a (head, row) */
    };
    for (size_t c = 0; c < sizeof cs_ / sizeof cs_[0]; c++) {
        int hd = cs_[c].hd, nh = cs_[c].nh, nkv = cs_[c].nkv, n_ctx = cs_[c].maxpos + 1;
        int slots = 3, kvw = nkv * hd, group = nh / nkv;
        /* fill two slots' caches through kv_store, positions in batches of 37 rows */
        size_t cache = (size_t)slots * n_ctx * kvw;
        uint16_t *kc_want = calloc(cache, 2), *vc_want = calloc(cache, 2);
        uint16_t *kc = malloc(cache * 2), *vc = malloc(cache * 2);
        uint16_t *dkc = dput(NULL, cache * 2), *dvc = dput(NULL, cache * 2);
        float *K = malloc((size_t)37 * kvw * 4), *V = malloc((size_t)37 * kvw * 4);
        float *dK = dput(NULL, (size_t)37 * kvw * 4), *dV = dput(NULL, (size_t)37 * kvw * 4);
        int32_t pos[37], seq[37];
        int32_t *dp = dput(NULL, sizeof pos), *ds = dput(NULL, sizeof seq);
        int e = 0;
        for (int slot = 0; slot < 2 && !e; slot++)
            for (int p0 = 0; p0 < n_ctx && !e; p0 += 37) {
                int n = n_ctx - p0 < 37 ? n_ctx - p0 : 37;
                activations(K, (size_t)n * kvw, false);
                activations(V, (size_t)n * kvw, false);
                if (slot == 1 && p0 == 0)
                    K[0] = 1e30f;             /* an overflowing key: Inf in the cache */
                if (slot == 0 && p0 == 74 && kvw > 32) {
                    K[0] = 1e30f;             /* position 74: +-Inf or NaN scores there */
                    K[32] = -1e30f;
                }
                for (int i = 0; i < n; i++) {
                    pos[i] = p0 + i;
                    seq[i] = slot * 2;
                    size_t at = ((size_t)seq[i] * n_ctx + pos[i]) * kvw;
                    ob_kv_put(kc_want + at, K + (size_t)i * kvw, kvw);
                    ob_kv_put(vc_want + at, V + (size_t)i * kvw, kvw);
                }
                rt->h2d(q, dK, K, (size_t)n * kvw * 4);
                rt->h2d(q, dV, V, (size_t)n * kvw * 4);
                rt->h2d(q, dp, pos, (size_t)n * 4);
                rt->h2d(q, ds, seq, (size_t)n * 4);
                e = rt->k->kv_store(q, dK, dV, kvw, dp, ds, n, n_ctx, dkc, dvc);
            }
        long bad = -1;
        if (!e) {
            dget(kc, dkc, cache * 2);
            dget(vc, dvc, cache * 2);
            bad = 0;
            for (int slot = 0; slot < 2; slot++)
                for (size_t i = 0; i < (size_t)n_ctx * kvw; i++) {
                    size_t at = (size_t)slot * 2 * n_ctx * kvw + i;
                    bad += kc[at] != kc_want[at] || vc[at] != vc_want[at];
                }
        }
        ok(bad == 0, "kv_store: %d positions of %d values in two slots%s", n_ctx, kvw,
           errs(e));
        /* queries at positions 0 .. maxpos in both slots */
        int n = 9;
        int32_t qp[9] = {0, 1, 63, 64, 65, 127, 128, 200, 299}, qs[9];
        for (int i = 0; i < n; i++) {
            if (qp[i] >= n_ctx)
                qp[i] = n_ctx - 1 - i % 3 < 0 ? 0 : n_ctx - 1 - i % 3;
            qs[i] = (i % 2) * 2;
        }
        float *Q = malloc((size_t)n * nh * hd * 4);
        activations(Q, (size_t)n * nh * hd, false);
        Q[1] = NAN;                                      /* row 0, head 0: every score NaN */
        float *want = malloc((size_t)n * nh * hd * 4), *got = malloc((size_t)n * nh * hd * 4);
        float *s = malloc((size_t)n_ctx * 4), oc[512];
        float scale = ob_attn_scale(hd);
        int win = cs_[c].window;
        for (int i = 0; i < n; i++)
            for (int h = 0; h < nh; h++) {
                int k0 = ob_attn_first_key(qp[i], win);
                size_t base = ((size_t)qs[i] * n_ctx + k0) * kvw + (size_t)(h / group) * hd;
                ob_attn_head(Q + ((size_t)i * nh + h) * hd, kc_want + base, vc_want + base, kvw,
                             qp[i] + 1 - k0, hd, scale, s, oc, want + ((size_t)i * nh + h) * hd);
            }
        struct ob_hrx_attn a = {nh, nkv, hd, n_ctx, scale, win, 0};
        float *dQ = dput(Q, (size_t)n * nh * hd * 4), *dout = dput(NULL, (size_t)n * nh * hd * 4);
        float *scr = dput(NULL, ob_hrx_attn_scratch(&a) * 4);
        rt->h2d(q, dp, qp, sizeof qp);
        rt->h2d(q, ds, qs, sizeof qs);
        char wd[40] = "";
        if (win)
            snprintf(wd, sizeof wd, ", a window of %d key%s", win, win == 1 ? "" : "s");
        /* a GPU's two shapes: the keys split over blocks, and a block a (head, row) */
        for (a.whole = 0; a.whole < 2; a.whole++) {
            char why[200] = "";
            bad = -1;
            if (!e && !(e = rt->k->attention(q, a, dQ, dkc, dvc, dp, ds, n, dout, scr))) {
                dget(got, dout, (size_t)n * nh * hd * 4);
                bad = cmp_f32(got, want, (size_t)n * nh * hd, why, sizeof why);
            }
            ok(bad == 0, "attention (%s): %d heads of %d over %d kv heads, positions up to %d%s%s%s",
               a.whole ? "whole" : "split", nh, hd, nkv, cs_[c].maxpos, wd, why,
               errs(e));
        }
        /* attention_q: the same rows, and their blocks for the next product (split, whole) */
        for (int fmt = OB_HRX_ACT_Q8K; fmt <= OB_HRX_ACT_A8; fmt++) {
            int k = nh * hd;
            if (k % (fmt == OB_HRX_ACT_Q8K ? 256 : 32))
                continue;
            size_t stride = ob_act_row_bytes(fmt, k);
            uint8_t *wq = calloc(stride, (size_t)n), *gq = malloc(stride * n);
            void *dq = dput(NULL, stride * n);
            for (int i = 0; i < n; i++)
                ob_act_quantize(OB_ISA_SCALAR, fmt == OB_HRX_ACT_Q8K ? OB_Q4_K : OB_Q8_0,
                                want + (size_t)i * k, k, wq + (size_t)i * stride);
            /* shapes: split, split with the combine in the chunks launch's last block of a
             * row (a.fold), whole; the outputs filled first with what no run writes */
            static const char *const shape[] = {"split", "split, combined by a last block",
                                                "whole"};
            for (int sh = 0; sh < 3; sh++) {
                char why[200] = "";
                long qbad = -1;
                a.whole = sh == 2;
                a.fold = sh == 1;
                memset(gq, 0xa5, stride * n);
                memset(got, 0xa5, (size_t)n * k * 4);
                rt->h2d(q, dq, gq, stride * n);
                rt->h2d(q, dout, got, (size_t)n * k * 4);
                bad = -1;
                if (!e && !(e = rt->k->attention_q(q, a, dQ, dkc, dvc, dp, ds, n, dout, scr, fmt,
                                                   dq, stride))) {
                    dget(got, dout, (size_t)n * k * 4);
                    bad = cmp_f32(got, want, (size_t)n * k, why, sizeof why);
                    dget(gq, dq, stride * n);
                    qbad = 0;
                    for (size_t b = 0; b < stride * n; b++)
                        qbad += gq[b] != wq[b];
                }
                ok(bad == 0 && qbad == 0, "attention_q %s (%s): %d heads of %d, positions up to "
                   "%d%s: %ld quantised bytes differ%s%s", fmt == OB_HRX_ACT_Q8K ? "Q8_K" : "A8",
                   shape[sh], nh, hd, cs_[c].maxpos, wd, qbad, why, errs(e));
            }
            a.fold = 0;
            rt->free(q, dq);
            free(wq);
            free(gq);
        }
        void *ptrs[] = {dkc, dvc, dK, dV, dp, ds, dQ, dout, scr};
        for (int i = 0; i < 9; i++)
            rt->free(q, ptrs[i]);
        free(kc_want);
        free(vc_want);
        free(kc);
        free(vc);
        free(K);
        free(V);
        free(Q);
        free(want);
        free(got);
        free(s);
    }
}

static void test_elementwise(void)
{
    size_t n = 5000;
    float *g = malloc(n * 4), *u = malloc(n * 4), *want = malloc(n * 4), *got = malloc(n * 4);
    float *act = malloc(n * 4);                         /* the first operand of the product */
    activations(g, n, true);
    activations(u, n, true);
    for (size_t i = 0; i < n; i++) {
        g[i] = g[i] * 8.0f;                             /* past silu's interesting range too */
        act[i] = ob_silu(g[i]);
        want[i] = act[i] * u[i];
    }
    float *dg = dput(g, n * 4), *du = dput(u, n * 4);
    char why[200] = "";
    int e = rt->k->swiglu(q, dg, du, n);
    long bad = e ? -1 : (dget(got, dg, n * 4), cmp_f32_op(got, want, act, u, n, why, sizeof why));
    ok(bad == 0, "swiglu of %zu values%s%s", n, why, errs(e));
    /* geglu: gate values past ob_gelu's cut-offs (|x| > 1e4) and its tails too */
    float *g2 = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        g2[i] = i % 97 == 0 ? g[i] * 3000.0f : g[i];
    memcpy(want, g2, n * 4);
    ob_geglu(want, u, n);
    for (size_t i = 0; i < n; i++)
        act[i] = ob_gelu(g2[i]);
    rt->h2d(q, dg, g2, n * 4);
    e = rt->k->geglu(q, dg, du, n);
    bad = e ? -1 : (dget(got, dg, n * 4), cmp_f32_op(got, want, act, u, n, why, sizeof why));
    ok(bad == 0, "geglu of %zu values%s%s", n, why, errs(e));
    free(g2);
    for (size_t i = 0; i < n; i++)
        want[i] = g[i] + u[i];
    rt->h2d(q, dg, g, n * 4);
    e = rt->k->add(q, dg, du, n);
    bad = e ? -1 : (dget(got, dg, n * 4), cmp_f32_op(got, want, g, u, n, why, sizeof why));
    ok(bad == 0, "add of %zu values%s%s", n, why, errs(e));
    rt->free(q, dg);
    rt->free(q, du);
    free(g);
    free(u);
    free(want);
    free(got);
    free(act);
}

/* graphs: recorded launches do not run until the graph does; each replay runs them with the
 * arguments they were recorded with, in order (y = y + x three times: y0 + 3x, exactly, for
 * small integers), and a launch after the graph sees its results */
static void test_graph(void)
{
    size_t n = 3000;
    float *x = malloc(n * 4), *y = malloc(n * 4), *got = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(i % 7);
        y[i] = (float)(i % 11);
    }
    float *dx = dput(x, n * 4), *dy = dput(y, n * 4);
    void *g = NULL;
    int e = rt->graph_begin(q);
    if (!e)
        e = rt->k->add(q, dy, dx, n);
    if (!e)
        e = rt->k->add(q, dy, dx, n / 2);   /* a second launch, other arguments */
    if (!e)
        e = rt->graph_end(q, &g);
    long bad = 0;
    if (!e) {
        dget(got, dy, n * 4);              /* recorded, not run: y unchanged */
        for (size_t i = 0; i < n; i++)
            bad += got[i] != y[i];
    }
    ok(!e && bad == 0, "graph: two launches recorded, none run yet (%ld changed)%s", bad,
       errs(e));
    if (!gpu) {                    /* hrx-sim refuses a copy in a recording, as a bug */
        void *g2 = NULL;
        int ec = rt->graph_begin(q), eh = ec ? 0 : rt->h2d(q, dx, x, 4);
        if (!ec && !rt->graph_end(q, &g2))
            rt->graph_free(q, g2);
        ok(!ec && eh == OB_EINTERNAL, "graph: hrx-sim refuses a copy while recording (%s)",
           eh ? ob_errmsg() : "accepted");
    }
    for (int r = 0; r < 2 && !e; r++)
        e = rt->graph_launch(q, g);
    if (!e)
        e = rt->k->add(q, dy, dx, n);
    bad = 0;
    if (!e) {
        dget(got, dy, n * 4);
        for (size_t i = 0; i < n; i++)
            bad += got[i] != y[i] + (float)(i < n / 2 ? 5 : 3) * x[i];
    }
    ok(!e && bad == 0, "graph: two replays then one launch, in queue order (%ld differ)%s", bad,
       errs(e));
    if (g)
        rt->graph_free(q, g);
    rt->free(q, dx);
    rt->free(q, dy);
    free(x);
    free(y);
    free(got);
}

static void run_all(const char *name)
{
    printf("# %s\n", name);
    tap_seed(0x5eed);
    test_embed();
    test_actq();
    test_matmul();
    test_matmul_multi();
    test_then();
    test_rmsnorm();
    test_rmsnorm_q();
    test_qk_rope();
    test_rope_kv();
    test_attention();
    test_elementwise();
    test_graph();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--types") == 0) {
        for (uint32_t t = 0; t < OB_TYPE_COUNT; t++)
            if (ob_type_supported(t))
                printf("%s ", ob_type_name(t));
        printf("\n");
        return 0;
    }
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    test_types();
    const struct ob_hrx_rt *rts[3] = {&ob_hrx_sim_rt, &ob_hrx_cuda_rt, &ob_hrx_hip_rt};
    static const char *const names[3] = {"hrx-sim", "hrx (cuda)", "hrx (hip)"};
    for (int i = 0; i < 3; i++) {
        rt = rts[i];
        gpu = i > 0;
        if (!rt)
            continue;              /* not linked: one line below */
        int c = rt->count();
        if (c <= 0 || rt->open(0, 2, &q)) {
            printf("ok %d - %s kernels # SKIP no device (%s)\n", ++n_test, names[i],
                   c == 0 ? "none found" : ob_errmsg());
            continue;
        }
        run_all(names[i]);
        rt->close(q);
    }
    if (!&ob_hrx_cuda_rt && !&ob_hrx_hip_rt)
        printf("ok %d - GPU kernels # SKIP no device (not built: make CUDA=1 or HIP=1)\n",
               ++n_test);
    return tap_done();
}
