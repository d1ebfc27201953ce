/*
 * sample — what picking a token costs the host, per row of logits (lib/sample.c), on one core:
 *
 *   bin/bench/sample [VOCAB [REPS [SEED]]]     default 151936 (Qwen3's), 5 reps, seed 1
 *
 * Rows of normal logits (sigma 2.5, as tests/unit/sample.c's speed lines), 64 of them, each
 * configuration timed over all 64, REPS times; the best time a row is printed, in us. The
 * configurations: greedy, with 5 top logprobs, tempered (T 1, T 0.8, with 5 top logprobs),
 * the filters (top_k + top_p, top_p 0.9 and 0.999, min_p), and teacher forcing (scoring the
 * row's best token, and a token from the middle of the vocabulary, which ranks it over more
 * of the row). The SIMD level is the one OB_SIMD selects (the best this CPU has when unset):
 * run it once a level to compare them. A step of W rows costs W times a row's figure, spread
 * over the route's threads (lib/engine.c pick_one).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "1b.h"
#include "sample.h"
#include "host/simd.h"
#include "bench.h"

#define ROWS 64

static uint64_t rng_state;
static double rnd_unit(void)
{
    return bench_unit(&rng_state);
}

struct config {
    const char *name;
    struct ob_sampling p;
    int top;                       /* top_logprobs */
    int score;                     /* 0 sample; 1 score the best token; 2 a middle one */
};

int main(int argc, char **argv)
{
    int64_t vocab = 151936, reps = 5, seed = 1;
    if ((argc > 1 && ob_parse_i64(argv[1], 1, 1 << 24, &vocab)) ||
        (argc > 2 && ob_parse_i64(argv[2], 1, 1000, &reps)) ||
        (argc > 3 && ob_parse_i64(argv[3], 0, INT64_MAX, &seed)) || argc > 4) {
        fprintf(stderr, "usage: sample [VOCAB [REPS [SEED]]]\n");
        return 2;
    }
    int isa;
    if (ob_isa_select(&isa)) {
        fprintf(stderr, "sample: %s\n", ob_errmsg());
        return 4;
    }
    uint32_t V = (uint32_t)vocab;
    float *z = malloc((size_t)ROWS * V * sizeof *z);
    int32_t best[ROWS];
    struct ob_sample_scratch *ss = NULL;
    if (!z || ob_sample_scratch_new(V, &ss)) {
        fprintf(stderr, "sample: out of memory\n");
        free(z);
        return 5;
    }
    rng_state = (uint64_t)seed;
    for (int r = 0; r < ROWS; r++) {
        float *row = z + (size_t)r * V;
        best[r] = 0;
        for (uint32_t i = 0; i < V; i++) {
            double u1 = rnd_unit() + 0x1p-54, u2 = rnd_unit();
            row[i] = (float)(2.5 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
            best[r] = row[i] > row[best[r]] ? (int32_t)i : best[r];
        }
    }
    const struct config cs[] = {
        {"greedy", {0.0f, 0, 1.0f, 0.0f, 1}, 0, 0},
        {"greedy, 5 top logprobs", {0.0f, 0, 1.0f, 0.0f, 1}, 5, 0},
        {"T 1", {1.0f, 0, 1.0f, 0.0f, 1}, 0, 0},
        {"T 0.8", {0.8f, 0, 1.0f, 0.0f, 1}, 0, 0},
        {"T 0.8, 5 top logprobs", {0.8f, 0, 1.0f, 0.0f, 1}, 5, 0},
        {"T 0.7 top_k 20 top_p 0.8", {0.7f, 20, 0.8f, 0.0f, 1}, 0, 0},
        {"T 1 top_p 0.9", {1.0f, 0, 0.9f, 0.0f, 1}, 0, 0},
        {"T 1 top_p 0.999", {1.0f, 0, 0.999f, 0.0f, 1}, 0, 0},
        {"T 1 min_p 0.05", {1.0f, 0, 1.0f, 0.05f, 1}, 0, 0},
        {"score the best token", {0}, 0, 1},
        {"score a middle token", {0}, 0, 2},
        {"score the best, 5 top logprobs", {0}, 5, 1},
    };
    printf("# bench/sample: %u logits a row (normal, sigma 2.5), %s, best of %d runs of %d rows\n",
           V, ob_isa_name(isa), (int)reps, ROWS);
    printf("%-34s %10s\n", "configuration", "us a row");
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        double t_best = 1e30;
        for (int k = 0; k < reps; k++) {
            double t0 = bench_now();
            for (int r = 0; r < ROWS; r++) {
                const float *row = z + (size_t)r * V;
                struct ob_token_info ti;
                int e = cs[c].score
                            ? ob_score_token(row, V, cs[c].score == 1 ? best[r] : (int32_t)(V / 2),
                                             cs[c].top, &ti)
                            : ob_sample_token(ss, row, V, &cs[c].p, (uint64_t)(k * ROWS + r),
                                              cs[c].top, &ti);
                if (e) {
                    fprintf(stderr, "sample: %s: %s\n", cs[c].name, ob_errmsg());
                    return 1;
                }
            }
            double t = (bench_now() - t0) / ROWS;
            t_best = t < t_best ? t : t_best;
        }
        printf("%-34s %10.1f\n", cs[c].name, t_best * 1e6);
    }
    ob_sample_scratch_free(ss);
    free(z);
    return 0;
}
