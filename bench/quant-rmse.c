/*
 * quant-rmse — round-trip error and speed of every reference quantiser in lib/quant.c, on one
 * core:
 *
 *   bin/bench/quant-rmse [ROWS [COLS [SEED]]]      default 64 x 4096, seed 2
 *
 * The matrix is the one tests/unit/quant.c reports on (same generator and seed): gaussian-ish
 * values (a sum of four uniforms), rows of eight scales, 1 in 256 values an outlier x12.
 * For each type: bits per weight, RMSE and RMSE relative to the data's rms, quantise and
 * dequantise speed in ns per value, and the quantise time a Qwen3-0.6B-sized model
 * (600M weights) would take at that speed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "1b.h"
#include "quant.h"

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rnd_unit(void) { return (double)(rnd() >> 11) * 0x1p-53; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int64_t rows = 64, cols = 4096, seed = 2;
    if ((argc > 1 && ob_parse_i64(argv[1], 1, 1 << 20, &rows)) ||
        (argc > 2 && ob_parse_i64(argv[2], 256, 1 << 24, &cols)) ||
        (argc > 3 && ob_parse_i64(argv[3], 0, INT64_MAX, &seed)) || argc > 4 || cols % 256) {
        fprintf(stderr, "usage: quant-rmse [ROWS [COLS (a multiple of 256) [SEED]]]\n");
        return 2;
    }
    size_t n = (size_t)rows * (size_t)cols;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint8_t *q = malloc(n * sizeof(float));
    if (!x || !y || !q) {
        fprintf(stderr, "quant-rmse: out of memory\n");
        return 5;
    }
    rng_state = (uint64_t)seed;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            double g = (rnd_unit() + rnd_unit() + rnd_unit() + rnd_unit() - 2.0) * 1.7320508;
            g *= 0.01 * (1 + r % 8);
            if (rnd() % 256 == 0)
                g *= 12;
            x[r * cols + c] = (float)g;
        }
    double rms = 0;
    for (size_t i = 0; i < n; i++)
        rms += (double)x[i] * x[i];
    rms = sqrt(rms / n);

    static const uint32_t types[] = {OB_F32, OB_F16, OB_BF16, OB_Q8_0, OB_Q6_K, OB_Q5_1,
                                     OB_Q5_K, OB_Q5_0, OB_Q4_1, OB_Q4_K, OB_Q4_0, OB_Q3_K,
                                     OB_Q2_K};
    printf("%lld x %lld values, seed %lld, rms %.6g\n", (long long)rows, (long long)cols,
           (long long)seed, rms);
    printf("%-5s %6s %12s %10s %12s %12s %12s\n", "type", "bpw", "rmse", "rmse/rms",
           "quant ns/v", "dequant ns/v", "600M quant s");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        uint32_t t = types[ti];
        double t0 = now();
        int rc = ob_quant_row(t, x, q, (int64_t)n);
        double t1 = now();
        if (!rc)
            rc = ob_dequant_row(t, q, y, (int64_t)n);
        double t2 = now();
        if (rc) {
            fprintf(stderr, "quant-rmse: %s: %s\n", ob_type_name(t), ob_errmsg());
            return 5;
        }
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        double e = sqrt(s / n), qns = (t1 - t0) * 1e9 / n;
        printf("%-5s %6.3f %12.6g %10.6f %12.2f %12.2f %12.1f\n", ob_type_name(t),
               8.0 * ob_type_size(t) / ob_type_blck(t), e, e / rms, qns, (t2 - t1) * 1e9 / n,
               qns * 600e6 * 1e-9);
    }
    free(x);
    free(y);
    free(q);
    return 0;
}
