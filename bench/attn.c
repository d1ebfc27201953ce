/*
 * attn — the cpu route's attention kernel, per key and query head, at each SIMD level:
 *
 *   bin/bench/attn [KEYS [REPS [SEED]]]        default 2048 keys, 5 reps, seed 1
 *
 * One group of query heads against KEYS keys and values (ob_ops attn_group: scores, the
 * maximum, the weights, the value sums per chunk; cpu/kernels/ops.h), in the shapes of the
 * models the project runs: head dimension and heads a key/value head (SmolLM2-135M 64 x 3,
 * Qwen3-0.6B 128 x 2, Gemma 3 270M 256 x 4), the cache as the cpu route holds it (a head's
 * positions together: hd halfs apart). The figure is the best of REPS calls, in ns per key and
 * head; every level this CPU runs (OB_SIMD and OB_CPU_LACKS aside), so that their ratio is read
 * off one run. The keys and values (fp16 of normal values) and the queries are seeded.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "arith/arith.h"
#include "cpu/kernels/ops.h"
#include "host/simd.h"
#include "bench.h"

static uint64_t rng_state;

/* a normal value (Box-Muller) */
static float rnd_normal(void)
{
    double u = bench_unit(&rng_state), v = bench_unit(&rng_state);
    return (float)(sqrt(-2.0 * log(u + 0x1p-60)) * cos(6.283185307179586 * v));
}

static const struct {
    const char *model;
    int hd, nq;
} shapes[] = {{"SmolLM2-135M", 64, 3}, {"Qwen3-0.6B", 128, 2}, {"Gemma 3 270M", 256, 4}};

int main(int argc, char **argv)
{
    long arg[3] = {2048, 5, 1};                   /* KEYS, REPS, SEED */
    int bad = argc > 4;
    for (int i = 1; i < argc && i < 4; i++) {
        char *end;
        arg[i - 1] = strtol(argv[i], &end, 10);
        bad |= end == argv[i] || *end;
    }
    long keys = arg[0], reps = arg[1], seed = arg[2];
    if (bad || keys < 1 || keys > 1 << 20 || reps < 1 || reps > 10000 || seed < 0) {
        fprintf(stderr, "usage: attn [KEYS [REPS [SEED]]]  (KEYS 1..1048576, REPS 1..10000)\n");
        return 2;
    }
    int best = ob_isa_best();
    printf("# %ld keys, best of %ld calls; ns per key and query head\n", keys, reps);
    printf("%-14s %4s %6s", "model", "hd", "heads");
    for (int isa = 0; isa <= best; isa++)
        printf(" %9s", ob_isa_name(isa));
    printf("\n");
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        int hd = shapes[c].hd, nq = shapes[c].nq;
        size_t n = (size_t)keys;
        uint16_t *k = malloc(n * (size_t)hd * 2), *v = malloc(n * (size_t)hd * 2);
        float *q = malloc((size_t)nq * hd * sizeof(float)), *s = malloc((size_t)nq * n * 4);
        float *oc = malloc(2 * (size_t)nq * hd * sizeof(float));
        float *out = malloc((size_t)nq * hd * sizeof(float));
        if (!k || !v || !q || !s || !oc || !out) {
            fprintf(stderr, "attn: out of memory for %ld keys\n", keys);
            free(k), free(v), free(q), free(s), free(oc), free(out);
            return 1;
        }
        rng_state = (uint64_t)seed;
        for (size_t i = 0; i < n * (size_t)hd; i++) {
            k[i] = ob_f32_to_fp16(rnd_normal());
            v[i] = ob_f32_to_fp16(rnd_normal());
        }
        for (int i = 0; i < nq * hd; i++)
            q[i] = rnd_normal();
        printf("%-14s %4d %6d", shapes[c].model, hd, nq);
        for (int isa = 0; isa <= best; isa++) {
            const struct ob_ops *o = ob_ops(isa);
            double t = INFINITY;
            for (long r = 0; r < reps; r++) {
                double t0 = bench_now();
                o->attn_group(q, nq, k, v, hd, (int)n, hd, ob_attn_scale(hd), s, oc, out);
                double dt = bench_now() - t0;
                t = dt < t ? dt : t;
            }
            printf(" %9.2f", t * 1e9 / (double)n / nq);
        }
        printf("\n");
        free(k), free(v), free(q), free(s), free(oc), free(out);
    }
    return 0;
}
