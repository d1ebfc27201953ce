/*
 * q4nx.c — the Q4NX tile (lib/arith/q4nx.h) and the npu routes' host kernels (TAP):
 *  - the dequantiser is s * q + z value by value, and the quantiser gives back bit for bit a
 *    block that already is a Q4NX grid;
 *  - the quantiser's error on values from Q4_1 and Q4_K blocks stays near bf16's rounding of
 *    the step (a search that missed a source grid's step would be several times worse) and on
 *    gaussian values near 4-bit's; it refuses non-finite values and bf16 overflow;
 *  - the row kernel of every ISA level this CPU has, 1..4 activation rows per call, against
 *    ob_dot_q4nx bit for bit: quantised and raw random tiles (subnormal, zero, negative zero,
 *    Inf and NaN steps and zeros among them), 1..41 tiles a row;
 *  - ob_q4nx_matmul: every row of a many-row product equals the one-row reference, for 1, 2,
 *    3 and 7 threads and every level.
 * Prints the first differing value when something differs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels/kernels.h"
#include "host/pool.h"
#include "host/simd.h"
#include "npu/npu.h"
#include "quant.h"
#include "tap.h"

static float frand(void)
{
    return (float)((int64_t)(tap_rand() >> 40) - (1 << 23)) / (float)(1 << 23);
}

static float gauss(void)
{
    return frand() + frand() + frand();
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* relative rms error of Q4NX on n values (a multiple of 32) */
static double rel_err(const float *x, int n)
{
    struct ob_block_q4nx *b = malloc((size_t)n / 32 * sizeof *b);
    float *y = malloc((size_t)n * sizeof *y);
    double se = 0, ss = 0;
    if (ob_quant_row(OB_Q4NX, x, b, n) || ob_dequant_row(OB_Q4NX, b, y, n))
        se = INFINITY;
    for (int i = 0; i < n; i++) {
        se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        ss += (double)x[i] * x[i];
    }
    free(b);
    free(y);
    return sqrt(se / ss);
}

static void test_format(void)
{
    /* dequantiser: the exact expression, value by value */
    struct ob_block_q4nx b;
    b.s = ob_f32_to_bf16(0.0371f);
    b.z = ob_f32_to_bf16(-0.29f);
    for (int j = 0; j < 16; j++)
        b.qs[j] = (uint8_t)(tap_rand() & 0xff);
    float y[32];
    ob_dequant_q4nx(&b, y);
    int bad = 0;
    for (int j = 0; j < 32; j++) {
        int q = j < 16 ? b.qs[j] & 15 : b.qs[j - 16] >> 4;
        bad += bits(y[j]) != bits(ob_bf16_to_f32(b.s) * (float)q + ob_bf16_to_f32(b.z));
    }
    ok(bad == 0, "dequantiser: x_j = s * q_j + z with Q4_0's nibble order (%d differ)", bad);

    /* a block that is a Q4NX grid (q 0 and 15 present) comes back bit for bit */
    int exact = 0, n = 200;
    for (int t = 0; t < n; t++) {
        float s = ob_bf16_to_f32(ob_f32_to_bf16(0.001f + (float)(tap_rand() % 1000) * 1e-4f));
        float z = -8.0f * s;
        float x[32];
        struct ob_block_q4nx q;
        for (int j = 0; j < 32; j++)
            x[j] = s * (float)(j == 0 ? 0 : j == 1 ? 15 : (int)(tap_rand() % 16)) + z;
        float yy[32];
        if (ob_quant_row(OB_Q4NX, x, &q, 32) == 0 && ob_dequant_row(OB_Q4NX, &q, yy, 32) == 0)
            exact += memcmp(x, yy, sizeof x) == 0;
    }
    ok(exact == n, "quantiser: %d of %d blocks that are Q4NX grids come back bit for bit", exact, n);

    /* error: Q4_1 and Q4_K values (16-level grids) lose only what bf16 rounding costs */
    enum { N = 256 * 256 };
    float *x = malloc(N * sizeof *x), *y2 = malloc(N * sizeof *y2);
    void *blk = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++)
        x[i] = gauss() * 0.05f;
    double eg = rel_err(x, N);
    ok(eg > 0.05 && eg < 0.08, "quantiser: gaussian values, relative rms error %.4f (4 bits)", eg);
    uint32_t src[2] = {OB_Q4_1, OB_Q4_K};
    for (int k = 0; k < 2; k++) {
        ob_quant_row(src[k], x, blk, N);
        ob_dequant_row(src[k], blk, y2, N);
        double e = rel_err(y2, N);
        ok(e < 0.0045, "quantiser: %s values, relative rms error %.5f (< 0.0045: the source's "
           "grid found, then bf16's rounding)", ob_type_name(src[k]), e);
    }
    free(blk);
    free(y2);

    /* refusals */
    float bad_x[32] = {0};
    struct ob_block_q4nx q;
    bad_x[3] = NAN;
    ok(ob_quant_row(OB_Q4NX, bad_x, &q, 32) == OB_ERANGE, "quantiser refuses NaN");
    bad_x[3] = 3.4e38f;
    bad_x[4] = -3.4e38f;
    ok(ob_quant_row(OB_Q4NX, bad_x, &q, 32) == OB_ERANGE, "quantiser refuses a range beyond bf16");
    ok(ob_quant_row(OB_Q4NX, x, &q, 31) == OB_EUSAGE, "quantiser refuses 31 values");
    /* an all-equal block */
    for (int j = 0; j < 32; j++)
        bad_x[j] = 1.5f;
    float yy[32];
    ok(ob_quant_row(OB_Q4NX, bad_x, &q, 32) == 0 && ob_dequant_row(OB_Q4NX, &q, yy, 32) == 0 &&
       memcmp(yy, bad_x, sizeof yy) == 0, "an all-equal block: s = 0, z its value");
    free(x);
}

/*
 * raw tiles: random bytes with finite fields; with specials, one step or zero of one tile is a
 * hard case (zero, -0, subnormal, Inf, a quiet or signalling NaN with payload). One per row, so
 * that the reference's result never depends on which of two NaNs an addition keeps (which the
 * C standard leaves to the compiler), as tests/unit/kernels.c does.
 */
static void raw_tiles(struct ob_block_q4nx *b, int n, bool specials)
{
    static const uint16_t hard[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x7f80, 0xff80,
                                    0x7fc0, 0x7f81, 0xffaa};
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 16; j++)
            b[i].qs[j] = (uint8_t)tap_rand();
        b[i].s = ob_f32_to_bf16(frand() * 0.1f);
        b[i].z = ob_f32_to_bf16(frand() * 0.5f);
    }
    if (specials) {
        uint16_t h = hard[tap_rand() % (sizeof hard / sizeof hard[0])];
        int i = (int)(tap_rand() % (uint64_t)n);
        if (tap_rand() % 2)
            b[i].s = h;
        else
            b[i].z = h;
    }
}

static void test_kernels(int best)
{
    enum { NB = 41, R = OB_Q4NX_MAXR };
    struct ob_block_q4nx w[NB];
    struct ob_act_a8 a[R][NB];
    float x[NB * 32];
    for (int isa = OB_ISA_SCALAR; isa <= OB_ISA_AVX512; isa++) {
        if (isa > best) {
            printf("ok %d - rows at level %s # SKIP cpu lacks %s\n", ++n_test, ob_isa_name(isa),
                   ob_isa_name(isa));
            continue;
        }
        ob_q4nx_rows_fn f = ob_q4nx_rows(isa);
        int checked = 0, bad = 0;
        char first[256] = "";
        for (int round = 0; round < 300; round++) {
            int nb = 1 + round % NB, nr = 1 + round % R, kind = round % 3;
            if (kind == 0) {       /* quantised tiles of gaussian rows */
                for (int i = 0; i < nb * 32; i++)
                    x[i] = gauss();
                ob_quant_row(OB_Q4NX, x, w, nb * 32);
            } else {
                raw_tiles(w, nb, kind == 2);
            }
            for (int r = 0; r < nr; r++) {
                for (int i = 0; i < nb * 32; i++)
                    x[i] = round % 5 == 4 && i % 7 == 0 ? 0.0f : gauss() * (float)(1 + r);
                ob_quantize_a8(x, a[r], nb * 32);
            }
            float out[R];
            f(w, a, sizeof a[0], nr, nb * 32, out);
            for (int r = 0; r < nr; r++) {
                float ref = ob_dot_q4nx(w, a[r], nb);
                checked++;
                if (bits(ref) != bits(out[r]) && !bad++)
                    snprintf(first, sizeof first, "round %d, %d tiles, row %d of %d: %08x "
                             "(%g), reference %08x (%g)", round, nb, r, nr, bits(out[r]),
                             (double)out[r], bits(ref), (double)ref);
            }
        }
        ok(bad == 0, "rows at level %s: %d dot products equal ob_dot_q4nx bit for bit%s%s",
           ob_isa_name(isa), checked, bad ? ": first differs at " : "", first);
    }
}

static void test_matmul(int best)
{
    enum { K = 32 * 19, N = 37, NR = 13 };
    struct ob_block_q4nx *w = malloc((size_t)N * (K / 32) * sizeof *w);
    struct ob_act_a8 *x = malloc((size_t)NR * (K / 32) * sizeof *x);
    float *f = malloc(K * sizeof *f), y[NR * N], ref[NR * N];
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < K; i++)
            f[i] = gauss();
        ob_quant_row(OB_Q4NX, f, w + (size_t)n * (K / 32), K);
    }
    for (int r = 0; r < NR; r++) {
        for (int i = 0; i < K; i++)
            f[i] = gauss();
        ob_quantize_a8(f, x + (size_t)r * (K / 32), K);
    }
    for (int r = 0; r < NR; r++)
        for (int n = 0; n < N; n++)
            ref[r * N + n] = ob_dot_q4nx(w + (size_t)n * (K / 32), x + (size_t)r * (K / 32), K / 32);
    struct ob_matrix m = {OB_Q4NX, K, N, (K / 32) * sizeof *w, w};
    static const int threads[] = {1, 2, 3, 7};
    for (int isa = OB_ISA_SCALAR; isa <= best; isa++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
            struct ob_pool *pool;
            ob_pool_new(threads[t], &pool);
            for (int nr = 1; nr <= NR; nr += 4) {
                memset(y, 0xff, sizeof y);
                int e = ob_q4nx_matmul(pool, isa, &m, x, (K / 32) * sizeof *x, nr, y, N);
                ok(e == 0 && memcmp(y, ref, (size_t)nr * N * sizeof *y) == 0,
                   "matmul %s, %d threads, %d rows: every output the one-row reference's bits",
                   ob_isa_name(isa), threads[t], nr);
            }
            ob_pool_free(pool);
        }
    struct ob_matrix q8 = {OB_Q8_0, K, N, 34 * (K / 32), w};
    ok(ob_q4nx_matmul(NULL, OB_ISA_SCALAR, &q8, x, 0, 1, y, N) == OB_EUNSUPP,
       "matmul refuses a matrix that is not Q4NX");
    free(w);
    free(x);
    free(f);
}

int main(void)
{
    tap_seed(4242);
    int best = ob_isa_best();
    test_format();
    test_kernels(best);
    test_matmul(best);
    return tap_done();
}
