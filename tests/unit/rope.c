/*
 * rope.c — the RoPE tables of lib/rope.c (TAP):
 *
 *   rope                       the checks below
 *   rope long                  also every base of {1e4, 1e5, 5e5, 1e6, 1e7} and n_rot of
 *                              {8, 16, 32, 48, 64, 80, 96, 128, 160, 256} at n_ctx 40960, and
 *                              n_ctx 2^23 and 2^22 for two narrow tables
 *   rope sample N SEED         N random entries of the tables of the configurations below, one
 *                              line each, for tests/py/rope_oracle.py: base n_rot i p theta cs sn
 *                              (base and theta as hex doubles, cs and sn as float bits)
 *
 *  - theta_i against glibc's pow, for every configuration;
 *  - every entry of the tables of the models the tests use (stories260K; the synth presets;
 *    SmolLM2-135M; gemma-3-270m) and of bases 1e4, 1e6 at n_ctx 40960, bitwise against the
 *    float64 recipe the tables had when glibc computed them:
 *        theta = pow(base, -2.0 * i / n_rot);  a = (double)p * theta;  (float)cos(a)
 *    (the first differing entry, with glibc's double and our value, is printed);
 *  - cos 0 = 1 and sin 0 = +0 exactly; the table of a shorter context is a prefix.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rope.h"
#include "tap.h"

struct conf {
    double base;
    int n_rot, n_ctx;
    const char *what;
};

static const struct conf confs[] = {
    {10000.0, 8, 2048, "stories260K"},
    {10000.0, 16, 2048, "synth llama-tiny"},
    {1000000.0, 16, 4096, "synth qwen3-tiny"},
    {1000000.0, 64, 4096, "synth qwen3-small"},
    {1000000.0, 128, 40960, "synth qwen3-0.6b shape"},
    {100000.0, 64, 8192, "SmolLM2-135M"},
    {1000000.0, 256, 32768, "gemma-3-270m"},
    {10000.0, 128, 40960, "base 1e4, n_rot 128"},
    {10000.0, 64, 40960, "base 1e4, n_rot 64"},
    {1000000.0, 64, 40960, "base 1e6, n_rot 64"},
};
#define NCONF (int)(sizeof confs / sizeof confs[0])

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* the tables as lib/forward.c computed them with libm */
static void libm_tables(double base, int n_rot, int n_ctx, float *c, float *s)
{
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        double theta = pow(base, -2.0 * i / (double)n_rot);
        for (int p = 0; p < n_ctx; p++) {
            double a = (double)p * theta;
            c[(size_t)p * half + i] = (float)cos(a);
            s[(size_t)p * half + i] = (float)sin(a);
        }
    }
}

/* one configuration against libm: the number of differing entries (0 when equal) */
static long compare(double base, int n_rot, int n_ctx, const char *what, int print_ok)
{
    size_t n = (size_t)n_ctx * (size_t)(n_rot / 2);
    float *c0 = malloc(n * sizeof *c0), *s0 = malloc(n * sizeof *s0);
    float *c1 = malloc(n * sizeof *c1), *s1 = malloc(n * sizeof *s1);
    if (!c0 || !s0 || !c1 || !s1) {
        ok(0, "out of memory");
        exit(1);
    }
    libm_tables(base, n_rot, n_ctx, c0, s0);
    ob_rope_fill(base, n_rot, n_ctx, c1, s1);
    long bad = 0;
    char why[300] = "";
    for (size_t k = 0; k < n; k++)
        for (int w = 0; w < 2; w++) {
            float a = w ? s0[k] : c0[k], b = w ? s1[k] : c1[k];
            if (fbits(a) == fbits(b))
                continue;
            if (!bad) {
                int half = n_rot / 2, i = (int)(k % (size_t)half), p = (int)(k / (size_t)half);
                double th = pow(base, -2.0 * i / (double)n_rot), ang = (double)p * th;
                snprintf(why, sizeof why, ": first at i=%d p=%d: %s(%a) libm %a -> %08x, ours %08x",
                         i, p, w ? "sin" : "cos", ang, w ? sin(ang) : cos(ang), fbits(a), fbits(b));
            }
            bad++;
        }
    if (print_ok || bad)
        ok(bad == 0, "%s (base %g, n_rot %d, n_ctx %d): %zu cos and sin entries equal glibc's "
           "(%ld differ)%s", what, base, n_rot, n_ctx, n, bad, why);
    free(c0);
    free(s0);
    free(c1);
    free(s1);
    return bad;
}

static void thetas(void)
{
    long bad = 0, n = 0;
    char why[200] = "";
    for (int k = 0; k < NCONF; k++)
        for (int i = 0; i < confs[k].n_rot / 2; i++, n++) {
            double want = pow(confs[k].base, -2.0 * i / (double)confs[k].n_rot);
            double got = ob_rope_theta(confs[k].base, i, confs[k].n_rot);
            if (memcmp(&want, &got, sizeof want) != 0) {
                if (!bad)
                    snprintf(why, sizeof why, ": base %g n_rot %d i %d: pow %a, ours %a",
                             confs[k].base, confs[k].n_rot, i, want, got);
                bad++;
            }
        }
    ok(bad == 0, "theta_i equals glibc's pow for all %ld pairs of the configurations%s", n, why);
}

static void edges(void)
{
    float c[64 * 8], s[64 * 8], c2[4096 * 8], s2[4096 * 8];
    ob_rope_fill(10000.0, 16, 64, c, s);
    int bad = 0;
    for (int i = 0; i < 8; i++)
        bad += fbits(c[i]) != 0x3f800000u || fbits(s[i]) != 0u;
    ok(bad == 0, "position 0: cos = 1 and sin = +0 exactly for every pair");
    ob_rope_fill(10000.0, 16, 4096, c2, s2);
    ok(memcmp(c, c2, sizeof c) == 0 && memcmp(s, s2, sizeof s) == 0,
       "the table for 64 positions is the prefix of the one for 4096");
    /* base 2^16, n_rot 16: theta_4 = 2^-8 exactly, so p = 256 is the angle 1 */
    ob_rope_fill(65536.0, 16, 257, c2, s2);
    ok(ob_rope_theta(65536.0, 4, 16) == 0x1p-8 && c2[256 * 8 + 4] == 0.54030230586813971740f &&
       s2[256 * 8 + 4] == 0.84147098480789650665f, "an exact power: theta = 2^-8, cos 1, sin 1");
}

static void sample(int n, uint64_t seed)
{
    tap_seed(seed);
    static float c[40960 * 128], s[40960 * 128];
    for (int k = 0; k < NCONF; k++) {
        const struct conf *f = &confs[k];
        int half = f->n_rot / 2;
        ob_rope_fill(f->base, f->n_rot, f->n_ctx, c, s);
        for (int j = 0; j < n; j++) {
            /* every fourth entry at the last positions or the smallest angles */
            int i = (int)(tap_rand() % (uint64_t)half), p = (int)(tap_rand() % (uint64_t)f->n_ctx);
            if (j % 4 == 1)
                p = f->n_ctx - 1 - (int)(tap_rand() % 64);
            if (j % 4 == 2)
                i = half - 1;
            size_t at = (size_t)p * half + i;
            printf("%a %d %d %d %a %08x %08x\n", f->base, f->n_rot, i, p,
                   ob_rope_theta(f->base, i, f->n_rot), fbits(c[at]), fbits(s[at]));
        }
    }
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "sample") == 0) {
        sample(atoi(argv[2]), strtoull(argv[3], NULL, 10));
        return 0;
    }
    thetas();
    edges();
    for (int k = 0; k < NCONF; k++)
        compare(confs[k].base, confs[k].n_rot, confs[k].n_ctx, confs[k].what, 1);
    if (argc == 2 && strcmp(argv[1], "long") == 0) {
        static const double bases[] = {1e4, 1e5, 5e5, 1e6, 1e7};
        static const int rots[] = {8, 16, 32, 48, 64, 80, 96, 128, 160, 256};
        long bad = 0, n = 0;
        for (int b = 0; b < 5; b++)
            for (int r = 0; r < 10; r++, n++)
                bad += compare(bases[b], rots[r], 40960, "long", 0) != 0;
        ok(bad == 0, "long: %ld configurations (5 bases x 10 n_rot, n_ctx 40960) equal glibc's "
           "(%ld differ)", n, bad);
        /* long contexts: angles up to 2^23 (theta_0 = 1: integer angles, no rounding of a) */
        compare(10000.0, 4, 1 << 23, "long context", 1);
        compare(1000000.0, 6, 1 << 22, "long context", 1);
    }
    return tap_done();
}
