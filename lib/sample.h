/*
 * sample.h — log-probabilities and token sampling from a row of logits (to be folded into
 * 1b.h; the conventions of 1b.h hold here too).
 *
 * Logits are float32[n_vocab], computed canonically elsewhere. Everything here is a
 * deterministic function of the logits' bits, the parameters and (seed, position): no global
 * state, no libm (ob_expf and ob_logf from arith.h; otherwise + - * / in float32, and float64
 * sums in a fixed order), nothing that depends on threads, batching or the machine. Logits may
 * be -Inf (a masked token); NaN or +Inf, or a row that is all -Inf, fail with OB_ERANGE.
 *
 * LOG-PROBABILITIES are the canonical log-softmax of the raw logits over the whole vocabulary,
 * whatever the sampling parameters: (m, log l) = ob_logsumexp(z) and
 * logprob_i = ob_logprob(z_i, m, log l) = (z_i - m) - log l. The top-k list holds the k best
 * tokens ordered by logprob descending, ties by token id ascending.
 *
 * SAMPLING. temperature T = 0 is greedy: the argmax of z, ties to the lowest id (the other
 * parameters are then ignored). For T > 0 the pipeline is, with every step in this order:
 *  1. candidates C: with 0 < top_k < n_vocab, the top_k tokens by (z descending, id
 *     ascending); otherwise every token.
 *  2. weights: zmax = max z; for each candidate, in float32, s_i = (z_i - zmax) / T, then
 *     e_i = ob_expf(s_i) (so the best candidate has e = 1 exactly, and e_i = 0 below
 *     e^-104). S = the float64 sum of e_i over C in increasing id, one after another.
 *  3. top_p (1 = off): order C by (z descending, id ascending) — e_i is non-increasing along
 *     it — and let c_j be the float64 running sum of e along that order; keep the shortest
 *     prefix whose c_j >= top_p * S (the product in float64; all of C if none reaches it).
 *  4. min_p (0 = off): keep the candidates with e_i >= min_p (float32 compare), i.e.
 *     p_i >= min_p * p_max, since the best candidate has e = 1. Steps 3 and 4 both keep a
 *     prefix of the order of step 3, so the result F is the shorter prefix; top_p's S counts
 *     all of C, before min_p.
 *  5. draw: r = ob_sample_rand24(seed, position), u = r * 2^-24 in [0, 1). W = the float64 sum
 *     of e_i over F in increasing id, one after another; target = W * u (float64). The token
 *     is the first of F in increasing id whose running sum (the same sums as W) exceeds
 *     target. As u < 1, target < W and a token with e > 0 is always found; a token of F is
 *     chosen with probability e_i / W up to the 2^-24 resolution of u.
 * Why this shape: only the top_p cut needs the sorted order, and only as far as the cut (found
 * from a histogram of the weights, see sample.c), so no step sorts the whole vocabulary; the
 * float64 sums keep every decision within about 1e-12 of exact arithmetic on the float32
 * weights, so that a float64 oracle of this pipeline disagrees only where a decision sits
 * within float32 rounding of a boundary.
 *
 * position is the absolute position in its sequence of the token being sampled (the caller
 * provides it): the same (logits bits, parameters, seed, position) always give the same token,
 * whatever was batched with it.
 *
 * Ownership and threads: a struct ob_sample_scratch holds working memory only (no result
 * depends on what it held before); one thread uses one scratch at a time. The functions
 * without a scratch argument may be called from any thread.
 */
#ifndef OB_SAMPLE_H
#define OB_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "1b.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OB_MAX_TOP 20              /* top_logprobs a record may ask for */

struct ob_sampling {
    float temperature;             /* 0 = greedy; finite, >= 0 */
    uint32_t top_k;                /* 0 (or >= n_vocab) = off */
    float top_p;                   /* in [0, 1]; 1 = off */
    float min_p;                   /* in [0, 1]; 0 = off */
    uint64_t seed;
};

/* Greedy decoding: the parameters a zero-initialised struct does not give (top_p = 1). */
#define OB_SAMPLING_GREEDY ((struct ob_sampling){.temperature = 0.0f, .top_p = 1.0f})

struct ob_top_lp {
    int32_t id;
    float logprob;
};

/* What ob_sample_token reports for one position. */
struct ob_token_info {
    int32_t id;                    /* the chosen token */
    float logprob;                 /* its canonical log-probability */
    float m, logl;                 /* the row's log-sum-exp statistics */
    int n_top;                     /* entries of top[] filled (the top_logprobs asked for) */
    struct ob_top_lp top[OB_MAX_TOP];
    int32_t rank;                  /* ob_score_token: the token's place, from 1, in the order of
                                    * top[] over the whole vocabulary; 0 from ob_sample_token */
};

/* ---- log-probabilities ---------------------------------------------------------------------- */

/* m and log l of ob_logsumexp after checking the row (see above). */
int ob_logits_lse(const float *z, uint32_t n, float *m, float *logl);

/* The k best tokens (k <= n) by logprob descending, ties by id ascending, with their
 * ob_logprob(z_i, m, logl). O(n + r log k) for r replacements in a k-heap. The row must have
 * passed ob_logits_lse (with these m, logl). */
int ob_top_logprobs(const float *z, uint32_t n, float m, float logl, uint32_t k,
                    struct ob_top_lp *out);

/* The lowest id among the largest logits (after checking the row). */
int ob_argmax(const float *z, uint32_t n, int32_t *id);

/* ---- sampling ----------------------------------------------------------------------------- */

/*
 * The random number of (seed, position): 24 bits of the (position + 1)-th output of a
 * splitmix64 generator whose state starts at mix(seed), i.e. h = mix(mix(seed) + (position +
 * 1) * 0x9e3779b97f4a7c15) >> 40 (arithmetic mod 2^64), where mix(x) is splitmix64's
 * finaliser: x ^= x >> 30; x *= 0xbf58476d1ce4e5b9; x ^= x >> 27; x *= 0x94d049bb133111eb;
 * x ^= x >> 31.
 */
uint32_t ob_sample_rand24(uint64_t seed, uint64_t position);

struct ob_sample_scratch;
/* Working memory for rows of up to n_vocab logits (28 bytes per token: 4 MiB for 151936). */
int ob_sample_scratch_new(uint32_t n_vocab, struct ob_sample_scratch **out);
void ob_sample_scratch_free(struct ob_sample_scratch *ss);

/* Check the parameters (OB_EUSAGE with the reason). */
int ob_sampling_check(const struct ob_sampling *p);

/* Sample one token of a row of n <= the scratch's n_vocab logits at `position`. */
int ob_sample(struct ob_sample_scratch *ss, const float *z, uint32_t n,
              const struct ob_sampling *p, uint64_t position, int32_t *token);

/*
 * The final candidates F of step 4 (for T > 0; for T = 0 the argmax alone, weight 1), in
 * increasing id, with their weights e_i; ids and w hold n entries. For tests and diagnostics.
 */
int ob_sample_candidates(struct ob_sample_scratch *ss, const float *z, uint32_t n,
                         const struct ob_sampling *p, int32_t *ids, float *w, uint32_t *n_out);

/*
 * All of one position at once, for generators: check the row, its log-sum-exp statistics,
 * the sampled token and its logprob, and the top_logprobs (0..OB_MAX_TOP) best tokens. On
 * failure out->id is -1 and out->n_top 0.
 */
int ob_sample_token(struct ob_sample_scratch *ss, const float *z, uint32_t n,
                    const struct ob_sampling *p, uint64_t position, int top_logprobs,
                    struct ob_token_info *out);

/*
 * Teacher forcing: the same report for a given token instead of a sampled one (its canonical
 * logprob, the row's statistics and top list), for scoring a known continuation, and its rank:
 * 1 + the number of tokens before it in the top list's order (logprob descending, ties by id
 * ascending), so that top[k] has rank k + 1 and no two tokens share one.
 */
int ob_score_token(const float *z, uint32_t n, int32_t id, int top_logprobs,
                   struct ob_token_info *out);

#ifdef __cplusplus
}
#endif
#endif
