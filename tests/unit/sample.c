/*
 * sample.c — tests of log-probabilities and sampling (lib/sample.c).
 *
 *   sample                 TAP self-tests: row checks, greedy ties, top_logprobs order and
 *                          ties, logprobs against the canonical statistics, each filter on
 *                          small hand-made vocabularies, the draw against its definition,
 *                          determinism, seeds and positions, empirical distributions
 *                          (chi-square), speed on a 151936-token row
 *   sample run FILE        the cases of FILE (written by tests/py/sample_oracle.py): one
 *                          JSON line per case {"token","n_cand","m","logl","top":[[id,bits]]}
 *                          with floats as 8-hex-digit bit patterns
 *
 * FILE layout, little-endian, repeated per case:
 *   u32 n, f32 temperature, u32 top_k, f32 top_p, f32 min_p, u64 seed, u64 position,
 *   u32 top_logprobs, then f32 logits[n].
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "1b.h"
#include "arith/arith.h"
#include "sample.h"
#include "tap.h"


static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* a test-local generator (xorshift64*), independent of the library's */
static uint64_t rs = 88172645463325252ull;
static double urand(void)
{
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return (double)((rs * 2685821657736338717ull) >> 11) * 0x1p-53;
}

static float nrand(float sigma)
{
    double u = urand(), v = urand();
    return (float)(sigma * sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

static const float NEG_INF = -__builtin_inff();

static struct ob_sampling params(float T, uint32_t k, float p, float mp, uint64_t seed)
{
    return (struct ob_sampling){.temperature = T, .top_k = k, .top_p = p, .min_p = mp,
                                .seed = seed};
}

/* ---- rows, parameters, greedy ------------------------------------------------------------- */

static void test_checks(void)
{
    struct ob_sample_scratch *ss;
    ob_sample_scratch_new(8, &ss);
    struct ob_sampling g = OB_SAMPLING_GREEDY;
    float bad[3][4] = {{0, NAN, 1, 2}, {0, __builtin_inff(), 1, 2},
                       {NEG_INF, NEG_INF, NEG_INF, NEG_INF}};
    int32_t id;
    float m, l;
    for (int i = 0; i < 3; i++) {
        int e1 = ob_sample(ss, bad[i], 4, &g, 0, &id);
        int e2 = ob_logits_lse(bad[i], 4, &m, &l);
        ok(e1 == OB_ERANGE && e2 == OB_ERANGE, "row %d refused: %s", i, ob_errmsg());
    }
    float masked[4] = {NEG_INF, 1, NEG_INF, 0.5f};
    struct ob_sampling t1 = params(1, 0, 1, 0, 1);
    int e = ob_sample(ss, masked, 4, &t1, 0, &id);
    ok(!e && (id == 1 || id == 3) && !ob_logits_lse(masked, 4, &m, &l) && m == 1.0f,
       "-Inf logits are masked tokens");
    struct ob_sampling badp[] = {params(-1, 0, 1, 0, 0), params(NAN, 0, 1, 0, 0),
                                 params(__builtin_inff(), 0, 1, 0, 0), params(1, 0, 1.5f, 0, 0),
                                 params(1, 0, -0.1f, 0, 0), params(1, 0, 1, -0.1f, 0),
                                 params(1, 0, 1, 2, 0)};
    for (size_t i = 0; i < sizeof badp / sizeof *badp; i++) {
        e = ob_sample(ss, masked, 4, &badp[i], 0, &id);
        ok(e == OB_EUSAGE, "parameters %zu refused: %s", i, ob_errmsg());
    }
    float big[9] = {0};
    e = ob_sample(ss, big, 9, &g, 0, &id);
    ok(e == OB_EUSAGE, "a row longer than the scratch is refused: %s", ob_errmsg());
    ob_sample_scratch_free(ss);
}

static void test_greedy(void)
{
    struct ob_sample_scratch *ss;
    ob_sample_scratch_new(16, &ss);
    float z[6] = {1, 3, -2, 3, 0, 3};
    struct ob_sampling g = OB_SAMPLING_GREEDY;
    int32_t id = -1, a = -1;
    ob_sample(ss, z, 6, &g, 0, &id);
    ob_argmax(z, 6, &a);
    ok(id == 1 && a == 1, "greedy: ties go to the lowest id (got %d, argmax %d)", id, a);
    struct ob_sampling g2 = params(0, 5, 0.1f, 0.9f, 12345);
    int same = 1;
    for (uint64_t pos = 0; pos < 100; pos++) {
        ob_sample(ss, z, 6, &g2, pos, &id);
        same &= id == 1;
    }
    ok(same, "greedy ignores top_k, top_p, min_p, seed and position");
    struct ob_sampling k1 = params(1.3f, 1, 1, 0, 9);
    same = 1;
    for (uint64_t pos = 0; pos < 100; pos++) {
        ob_sample(ss, z, 6, &k1, pos, &id);
        same &= id == 1;
    }
    ok(same, "top_k 1 samples the argmax (lowest id among ties)");
    ob_sample_scratch_free(ss);
}

/* ---- log-probabilities -------------------------------------------------------------------- */

static int cmp_lp(const void *pa, const void *pb)
{
    const struct ob_top_lp *a = pa, *b = pb;
    if (a->logprob != b->logprob)
        return a->logprob < b->logprob ? 1 : -1;
    return (a->id > b->id) - (a->id < b->id);
}

static void test_logprobs(void)
{
    /* ties by id */
    float z[6] = {1, 3, 3, 2, 3, NEG_INF};
    float m, l;
    struct ob_top_lp top[6];
    ob_logits_lse(z, 6, &m, &l);
    ob_top_logprobs(z, 6, m, l, 6, top);
    int want[6] = {1, 2, 4, 3, 0, 5};
    int good = 1;
    for (int i = 0; i < 6; i++)
        good &= top[i].id == want[i] && top[i].logprob == ob_logprob(z[want[i]], m, l);
    ok(good, "top_logprobs: by logprob, ties by id, -Inf last");

    /* ties of the logprob value between different logits: z - m rounds to the same float */
    float zt[3] = {20.5f, 0.5f, nextafterf(0.5f, 1.0f)};
    ob_logits_lse(zt, 3, &m, &l);
    float l1 = ob_logprob(zt[1], m, l), l2 = ob_logprob(zt[2], m, l);
    ob_top_logprobs(zt, 3, m, l, 2, top);
    ok(l1 == l2 && top[0].id == 0 && top[1].id == 1,
       "top_logprobs: equal logprobs of different logits order by id (%.9g %.9g: %d %d)", l1, l2,
       top[0].id, top[1].id);

    /* a full vocabulary: the canonical statistics, exact logprobs, the top 20 against a sort */
    enum { V = 151936 };
    float *r = malloc(V * sizeof *r);
    struct ob_top_lp *all = malloc(V * sizeof *all);
    for (int i = 0; i < V; i++)
        r[i] = nrand(3.0f);
    r[777] = r[778] = r[779] = 14.0f;        /* ties at the top */
    float mc, lc;
    ob_logsumexp(r, V, &mc, &lc);
    int e = ob_logits_lse(r, V, &m, &l);
    ok(!e && ob_f32_bits(m) == ob_f32_bits(mc) && ob_f32_bits(l) == ob_f32_bits(lc),
       "ob_logits_lse gives ob_logsumexp's bits");
    double sum = 0;
    for (int i = 0; i < V; i++) {
        all[i] = (struct ob_top_lp){i, ob_logprob(r[i], m, l)};
        sum += exp((double)all[i].logprob);
    }
    ok(fabs(sum - 1.0) < 1e-5, "logprobs sum to 1 in float64 (|sum - 1| = %.3g < 1e-5)",
       fabs(sum - 1.0));
    qsort(all, V, sizeof *all, cmp_lp);
    struct ob_top_lp t20[OB_MAX_TOP];
    ob_top_logprobs(r, V, m, l, OB_MAX_TOP, t20);
    good = 1;
    for (int i = 0; i < OB_MAX_TOP; i++)
        good &= t20[i].id == all[i].id &&
                ob_f32_bits(t20[i].logprob) == ob_f32_bits(all[i].logprob);
    ok(good && t20[0].id == 777 && t20[1].id == 778 && t20[2].id == 779,
       "top 20 of 151936 equal a full sort, bit for bit, ties by id");

    /* ob_score_token's rank: the token's place in that sort, from 1; ties by id */
    struct ob_token_info st;
    int32_t *place = malloc(V * sizeof *place);
    for (int i = 0; i < V; i++)
        place[all[i].id] = i + 1;
    int32_t probe[] = {777, 778, 779, 0, 1, 4242, V - 1, all[V - 1].id, all[V / 2].id};
    good = 1;
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        e = ob_score_token(r, V, probe[i], 3, &st);
        good &= !e && st.id == probe[i] && st.rank == place[probe[i]] && st.n_top == 3 &&
                st.top[0].id == 777;
    }
    free(place);
    ok(good, "ob_score_token: rank = place in the full sort (ties by id), from 1");
    good = 1;
    ob_logits_lse(z, 6, &m, &l);
    for (int i = 0; i < 6; i++)
        good &= !ob_score_token(z, 6, want[i], 0, &st) && st.rank == i + 1;
    ob_logits_lse(zt, 3, &m, &l);
    good &= !ob_score_token(zt, 3, 2, 0, &st) && st.rank == 3 &&
            !ob_score_token(zt, 3, 1, 0, &st) && st.rank == 2;
    ok(good, "ob_score_token: tied logits, equal logprobs of different logits and -Inf ranked "
             "as top_logprobs orders them");
    e = ob_score_token(r, V, V, 3, &st);
    ok(e == OB_ERANGE && st.id == -1 && st.rank == 0, "ob_score_token: id outside: %s",
       ob_errmsg());
    ob_logits_lse(r, V, &m, &l);

    /* ob_sample_token reports the same numbers */
    struct ob_sample_scratch *ss;
    ob_sample_scratch_new(V, &ss);
    struct ob_sampling p = params(0.8f, 0, 0.95f, 0, 3);
    struct ob_token_info ti;
    int32_t id;
    e = ob_sample_token(ss, r, V, &p, 17, 5, &ti);
    ob_sample(ss, r, V, &p, 17, &id);
    good = !e && ti.id == id && ti.n_top == 5 && ti.m == m && ti.logl == l &&
           ob_f32_bits(ti.logprob) == ob_f32_bits(ob_logprob(r[id], m, l));
    for (int i = 0; i < 5; i++)
        good &= ti.top[i].id == all[i].id && ti.top[i].logprob == all[i].logprob;
    ok(good && ti.rank == 0, "ob_sample_token: token, logprob, statistics and top list agree");
    r[5] = NAN;
    e = ob_sample_token(ss, r, V, &p, 17, 5, &ti);
    ok(e == OB_ERANGE && ti.id == -1 && ti.n_top == 0, "ob_sample_token: NaN row: %s",
       ob_errmsg());
    ob_sample_scratch_free(ss);
    free(r);
    free(all);
}

/* ---- filters -------------------------------------------------------------------------------- */

/* the candidate ids of F, compared with a -1 terminated list */
static void expect_f(struct ob_sample_scratch *ss, const float *z, uint32_t n,
                     struct ob_sampling p, const int *want, const char *what)
{
    int32_t ids[64];
    float w[64];
    uint32_t k = 0;
    int e = ob_sample_candidates(ss, z, n, &p, ids, w, &k);
    uint32_t nw = 0;
    while (want[nw] >= 0)
        nw++;
    int good = !e && k == nw;
    for (uint32_t i = 0; good && i < k; i++)
        good = ids[i] == want[i];
    ok(good, "%s", what);
    if (!good) {
        printf("#   got ");
        for (uint32_t i = 0; i < k; i++)
            printf(" %d", ids[i]);
        printf("\n");
    }
}

#define F(...) ((const int[]){__VA_ARGS__, -1})

static void test_filters(void)
{
    struct ob_sample_scratch *ss;
    ob_sample_scratch_new(64, &ss);
    /* sorted: 4 5 (z 3, e 1) 0 (e^-1 .368) 1 (e^-2 .135) 7 (e^-2.5 .082) 2 (e^-3 .050)
     * 3 (e^-4 .018) 6 (-Inf, 0); S = 2.6534 */
    float z[8] = {2, 1, 0, -1, 3, 3, NEG_INF, 0.5f};
    expect_f(ss, z, 8, params(1, 0, 1, 0, 0), F(0, 1, 2, 3, 4, 5, 6, 7), "no filter: all");
    expect_f(ss, z, 8, params(1, 3, 1, 0, 0), F(0, 4, 5), "top_k 3");
    expect_f(ss, z, 8, params(1, 1, 1, 0, 0), F(4), "top_k 1: the lower id of a tie");
    expect_f(ss, z, 8, params(1, 8, 1, 0, 0), F(0, 1, 2, 3, 4, 5, 6, 7), "top_k = n: off");
    expect_f(ss, z, 8, params(1, 0, 0.5f, 0, 0), F(4, 5), "top_p 0.5 (P 1.33: cum 1, 2)");
    expect_f(ss, z, 8, params(1, 0, 0.8f, 0, 0), F(0, 4, 5), "top_p 0.8 (P 2.12: cum 2.37)");
    expect_f(ss, z, 8, params(1, 0, 0.0f, 0, 0), F(4), "top_p 0: the first in order");
    expect_f(ss, z, 8, params(1, 0, 0.999f, 0, 0), F(0, 1, 2, 3, 4, 5, 7),
             "top_p 0.999 (P 2.6507: cum reaches it at id 3)");
    expect_f(ss, z, 8, params(1, 0, 1, 0.1f, 0), F(0, 1, 4, 5), "min_p 0.1 (e >= 0.1)");
    expect_f(ss, z, 8, params(1, 0, 1, 1.0f, 0), F(4, 5), "min_p 1 keeps the tied best");
    expect_f(ss, z, 8, params(1, 3, 0.8f, 0, 0), F(4, 5),
             "top_k 3 then top_p 0.8 (S over the top 3: P 1.89)");
    expect_f(ss, z, 8, params(1, 0, 0.999f, 0.1f, 0), F(0, 1, 4, 5),
             "top_p and min_p: the shorter prefix");
    expect_f(ss, z, 8, params(1, 0, 0.5f, 0.1f, 0), F(4, 5), "min_p and top_p: top_p shorter");
    expect_f(ss, z, 8, params(0.5f, 0, 1, 0.2f, 0), F(4, 5),
             "temperature 0.5 sharpens (id 0: e^-2 < 0.2)");
    expect_f(ss, z, 8, params(2.0f, 0, 1, 0.2f, 0), F(0, 1, 2, 4, 5, 7),
             "temperature 2 flattens (id 2: e^-1.5 = .22 kept; id 3: e^-2 = .14 dropped)");
    float flat[4] = {1, 1, 1, 1};
    expect_f(ss, flat, 4, params(1, 0, 0.5f, 0, 0), F(0, 1), "top_p cuts a tie by id");
    expect_f(ss, flat, 4, params(1, 2, 1, 0, 0), F(0, 1), "top_k cuts a tie by id");

    /* the weights: e of the best is exactly 1, the others ob_expf((z - zmax) / T), on each
     * path (all tokens, all tokens with the top_p histogram, top_k) */
    static const struct ob_sampling wp[] = {{0.7f, 0, 1.0f, 0.0f, 0}, {0.7f, 0, 0.9999f, 0.0f, 0},
                                            {0.7f, 7, 1.0f, 0.0f, 0}};
    for (int c = 0; c < 3; c++) {
        int32_t ids[8];
        float w[8];
        uint32_t k;
        ob_sample_candidates(ss, z, 8, &wp[c], ids, w, &k);
        int good = k == (c == 1 ? 7 : c == 2 ? 7 : 8);
        for (uint32_t i = 0; good && i < k; i++)
            good = ob_f32_bits(w[i]) == ob_f32_bits(ob_expf((z[ids[i]] - 3.0f) / 0.7f));
        ok(good && w[4] == 1.0f, "weights are ob_expf((z - zmax) / T), bit for bit (path %d)", c);
    }
    ob_sample_scratch_free(ss);
}

/* ---- draws ----------------------------------------------------------------------------------- */

/* The draw of sample.h step 5 written again: walk F in id order with float64 running sums. */
static int32_t draw_ref(const int32_t *ids, const float *w, uint32_t k, uint64_t seed,
                        uint64_t pos)
{
    double W = 0, c = 0;
    for (uint32_t i = 0; i < k; i++)
        W += w[i];
    double target = W * ((double)ob_sample_rand24(seed, pos) * 0x1p-24);
    for (uint32_t i = 0; i < k; i++) {
        c += w[i];
        if (c > target)
            return ids[i];
    }
    return -1;
}

static void test_draw(void)
{
    enum { V = 1000 };
    struct ob_sample_scratch *ss;
    ob_sample_scratch_new(V, &ss);
    float z[V];
    for (int i = 0; i < V; i++)
        z[i] = nrand(2.0f);
    static const struct ob_sampling ps[] = {
        {1.0f, 0, 1.0f, 0.0f, 1}, {0.7f, 40, 1.0f, 0.0f, 2}, {1.0f, 0, 0.9f, 0.0f, 3},
        {1.2f, 0, 1.0f, 0.05f, 4}, {0.8f, 100, 0.95f, 0.01f, 5}};
    int32_t ids[V];
    float w[V];
    uint32_t k;
    for (size_t c = 0; c < sizeof ps / sizeof *ps; c++) {
        ob_sample_candidates(ss, z, V, &ps[c], ids, w, &k);
        int good = k > 0;
        for (uint64_t pos = 0; good && pos < 5000; pos++) {
            int32_t id;
            ob_sample(ss, z, V, &ps[c], pos, &id);
            good = id == draw_ref(ids, w, k, ps[c].seed, pos);
        }
        ok(good, "params %zu (%u candidates): 5000 draws follow the definition", c, k);
    }

    /* targets that fall exactly on a running sum: on a row of 4 equal logits the weights are 1,
     * W = 4 and target = 4 r 2^-24 is an integer when r is a multiple of 2^22; the token is
     * the first whose running sum EXCEEDS the target (r = 0 picks id 0, r = 2^23 picks id 2).
     * Such r come once in 2^22 positions: search for them. A masked first token (e = 0) must
     * never be drawn, not even with r = 0. */
    float four[4] = {0.5f, 0.5f, 0.5f, 0.5f}, masked[3] = {NEG_INF, 1.0f, 0.0f};
    struct ob_sampling q = {1.0f, 0, 1.0f, 0.0f, 1};
    int found = 0, exact = 1, zero_seen = 0;
    for (uint64_t pos = 0; pos < (1ull << 26) && found < 12; pos++) {
        uint32_t r = ob_sample_rand24(q.seed, pos);
        if (r & ((1u << 22) - 1))
            continue;
        int32_t want = (int32_t)(r >> 22), got, got_m;
        ob_sample(ss, four, 4, &q, pos, &got);
        ob_sample(ss, masked, 3, &q, pos, &got_m);
        exact &= got == want && got_m != 0;
        zero_seen |= r == 0;
        found++;
    }
    ok(found >= 8 && exact, "targets on a running sum: the first sum that exceeds them (%d "
       "positions, r = 0 among them: %s)", found, zero_seen ? "yes" : "no");

    /* the same over 2048 equal logits, where the draw starts from the running sums kept every
     * 512 tokens (sample.c RUN): W = 2048 and target = r 2^-13, an integer for r a multiple of
     * 2^13, the pick then target itself (the first i with i + 1 > target); targets on the kept
     * sums themselves (512, 1024, 1536) searched for too */
    static float flat2k[2048];
    struct ob_sample_scratch *s2;
    ob_sample_scratch_new(2048, &s2);
    int on_kept = 0, ints = 0;
    exact = 1;
    for (uint64_t pos = 0; pos < (1ull << 27) && (ints < 300 || on_kept < 2); pos++) {
        uint32_t r = ob_sample_rand24(q.seed, pos);
        if (r & ((1u << 13) - 1))
            continue;
        bool kept = r == 512u << 13 || r == 1024u << 13 || r == 1536u << 13;
        if (ints >= 300 && !kept)
            continue;
        int32_t got;
        ob_sample(s2, flat2k, 2048, &q, pos, &got);
        exact &= got == (int32_t)(r >> 13);
        on_kept += kept;
        ints++;
    }
    ob_sample_scratch_free(s2);
    ok(ints >= 300 && on_kept >= 1 && exact, "targets on a running sum over 2048 tokens: the "
       "first sum that exceeds them (%d positions, %d on a kept sum)", ints, on_kept);

    /* determinism: the same inputs give the same token, whatever the scratch held before */
    float z2[V];
    for (int i = 0; i < V; i++)
        z2[i] = nrand(1.0f);
    struct ob_sampling p = {0.9f, 0, 0.95f, 0.0f, 42};
    int32_t first, id;
    ob_sample(ss, z, V, &p, 123, &first);
    int same = 1;
    for (int r = 0; r < 1000; r++) {
        ob_sample(ss, z2, V, &ps[r % 5], (uint64_t)r, &id);    /* disturb the scratch */
        ob_sample(ss, z, V, &p, 123, &id);
        same &= id == first;
    }
    ok(same, "1000 repeats give the same token");

    /* positions and seeds change the draw */
    float flat[V] = {0};
    struct ob_sampling f1 = {1.0f, 0, 1.0f, 0.0f, 1}, f2 = f1;
    f2.seed = 2;
    int seen[V] = {0}, distinct = 0, differ = 0;
    for (uint64_t pos = 0; pos < 2000; pos++) {
        int32_t a, b;
        ob_sample(ss, flat, V, &f1, pos, &a);
        ob_sample(ss, flat, V, &f2, pos, &b);
        distinct += !seen[a]++;
        differ += a != b;
    }
    /* 2000 uniform draws over 1000 tokens leave about 1000 (1 - e^-2) = 865 distinct ones */
    ok(distinct > 800 && differ > 1950,
       "positions give different draws (%d distinct of 2000), seeds too (%d of 2000 differ)",
       distinct, differ);
    uint32_t r0 = ob_sample_rand24(0, 0), r1 = ob_sample_rand24(0, 1), r2 = ob_sample_rand24(1, 0);
    ok(r0 < (1u << 24) && r0 != r1 && r0 != r2 && r1 != r2, "rand24: 24 bits, keyed by both");
    ob_sample_scratch_free(ss);
}

/*
 * Empirical distribution: N draws, counts against the probabilities p_i = w_i / W (weights from
 * ob_sample_candidates, i.e. the pipeline's own filtered distribution; the weights themselves
 * are tested above). Pearson's chi-square with (k - 1) degrees of freedom; the bound is the
 * 1e-4 upper quantile, so a correct sampler fails for about one choice of seeds in 10^4 —
 * the seeds are fixed, so the test is deterministic. The 2^-24 grid of u biases a probability
 * by less than 6e-8, far below the N = 200000 resolution. Tokens outside F must never come.
 */
static void chi_square(struct ob_sample_scratch *ss, const float *z, uint32_t n,
                       struct ob_sampling p, bool over_seeds, const char *what)
{
    enum { N = 200000 };
    int32_t ids[64];
    float w[64];
    uint32_t k;
    ob_sample_candidates(ss, z, n, &p, ids, w, &k);
    double W = 0;
    for (uint32_t i = 0; i < k; i++)
        W += w[i];
    long cnt[64] = {0};
    long outside = 0;
    for (long t = 0; t < N; t++) {
        int32_t id;
        struct ob_sampling q = p;
        uint64_t pos = (uint64_t)t;
        if (over_seeds) {
            q.seed = p.seed + (uint64_t)t;
            pos = 77;
        }
        ob_sample(ss, z, n, &q, pos, &id);
        uint32_t j = 0;
        while (j < k && ids[j] != id)
            j++;
        if (j == k)
            outside++;
        else
            cnt[j]++;
    }
    double chi = 0;
    int dof = -1;
    for (uint32_t i = 0; i < k; i++) {
        double ex = N * (w[i] / W);
        if (ex > 0) {
            chi += (cnt[i] - ex) * (cnt[i] - ex) / ex;
            dof++;
        } else if (cnt[i]) {
            outside++;
        }
    }
    /* chi-square 1e-4 upper quantiles for 1..7 degrees of freedom */
    static const double q4[8] = {0, 15.14, 18.42, 21.11, 23.51, 25.74, 27.86, 29.88};
    ok(dof >= 1 && dof <= 7 && chi < q4[dof] && outside == 0,
       "%s: chi-square %.2f < %.2f (%d dof), %ld outside F", what, chi,
       dof >= 1 && dof <= 7 ? q4[dof] : 0.0, dof, outside);
}

static void test_distribution(void)
{
    struct ob_sample_scratch *ss;
    ob_sample_scratch_new(8, &ss);
    float z[8] = {2, 1, 0, -1, 3, 3, NEG_INF, 0.5f};
    chi_square(ss, z, 8, params(1, 0, 1, 0, 7), false, "T 1 over positions");
    chi_square(ss, z, 8, params(1, 0, 1, 0, 1000), true, "T 1 over seeds");
    chi_square(ss, z, 8, params(0.7f, 3, 1, 0, 8), false, "T 0.7, top_k 3");
    chi_square(ss, z, 8, params(1, 0, 0.8f, 0, 9), false, "top_p 0.8");
    chi_square(ss, z, 8, params(1.5f, 0, 1, 0.1f, 10), false, "T 1.5, min_p 0.1");
    ob_sample_scratch_free(ss);
}

/* The exp and expsum kernels of the best SIMD level (the default) and the scalar references
 * (OB_SIMD=scalar) give the same bits; the log-sum-exp that ob_sample_token takes from the
 * T = 1 weights equals ob_logsumexp. */
static void test_paths(void)
{
    enum { V = 4099 };
    struct ob_sample_scratch *fast, *plain;
    const char *old = getenv("OB_SIMD");
    char *keep = old ? strdup(old) : NULL;
    ob_sample_scratch_new(V, &fast);
    setenv("OB_SIMD", "scalar", 1);
    ob_sample_scratch_new(V, &plain);
    if (keep)
        setenv("OB_SIMD", keep, 1);
    else
        unsetenv("OB_SIMD");
    free(keep);
    float *z = malloc(V * sizeof *z), *w1 = malloc(V * sizeof *w1), *w2 = malloc(V * sizeof *w2);
    int32_t *i1 = malloc(V * sizeof *i1), *i2 = malloc(V * sizeof *i2);
    static const float temps[] = {1.0f, 0.6f, 1.7f, 0.05f, 33.0f};
    int same = 1, lse_same = 1, rows = 0;
    for (int r = 0; r < 40; r++) {
        for (int i = 0; i < V; i++)
            z[i] = r % 4 == 3 && i % 7 == 0 ? NEG_INF :
                   nrand(r % 2 ? 8.0f : 1.5f) + 1000.0f * (r % 5 == 4);
        for (size_t t = 0; t < sizeof temps / sizeof *temps; t++) {
            struct ob_sampling p = params(temps[t], r % 3 ? 0 : 50, r % 2 ? 0.9f : 1.0f, 0, 1);
            uint32_t k1, k2;
            struct ob_token_info a, b;
            float m, l;
            ob_sample_candidates(fast, z, V, &p, i1, w1, &k1);
            ob_sample_candidates(plain, z, V, &p, i2, w2, &k2);
            ob_sample_token(fast, z, V, &p, (uint64_t)r, 3, &a);
            ob_sample_token(plain, z, V, &p, (uint64_t)r, 3, &b);
            ob_logsumexp(z, V, &m, &l);
            same &= k1 == k2 && !memcmp(i1, i2, k1 * sizeof *i1) &&
                    !memcmp(w1, w2, k1 * sizeof *w1) && a.id == b.id;
            lse_same &= ob_f32_bits(a.m) == ob_f32_bits(m) &&
                        ob_f32_bits(a.logl) == ob_f32_bits(l) &&
                        ob_f32_bits(b.m) == ob_f32_bits(m) && ob_f32_bits(b.logl) == ob_f32_bits(l);
            rows++;
        }
    }
    ok(same, "best SIMD level and scalar references: same candidates, weights and tokens (%d "
       "rows)", rows);
    ok(lse_same, "ob_sample_token's m and log l are ob_logsumexp's bits (fused at T = 1 too)");
    free(z);
    free(w1);
    free(w2);
    free(i1);
    free(i2);
    ob_sample_scratch_free(fast);
    ob_sample_scratch_free(plain);
}

/* ---- speed ---------------------------------------------------------------------------------- */

static void test_speed(void)
{
    enum { V = 151936, R = 20 };
    struct ob_sample_scratch *ss;
    ob_sample_scratch_new(V, &ss);
    float *z = malloc(V * sizeof *z);
    for (int i = 0; i < V; i++)
        z[i] = nrand(2.5f);
    static const struct { struct ob_sampling p; const char *name; } c[] = {
        {{0.0f, 0, 1.0f, 0.0f, 1}, "greedy"},
        {{1.0f, 0, 1.0f, 0.0f, 1}, "T 1"},
        {{0.7f, 20, 0.8f, 0.0f, 1}, "T 0.7 top_k 20 top_p 0.8"},
        {{1.0f, 0, 0.9f, 0.0f, 1}, "T 1 top_p 0.9"},
        {{1.0f, 0, 0.999f, 0.0f, 1}, "T 1 top_p 0.999"},
        {{1.0f, 0, 1.0f, 0.05f, 1}, "T 1 min_p 0.05"},
    };
    /* the fastest of R calls: robust against a loaded machine */
    double worst = 0, ms;
    printf("# sampling a %d-token row (random normal logits, sigma 2.5), fastest of %d:\n", V, R);
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        int32_t id;
        ms = 1e9;
        for (int r = 0; r < R; r++) {
            double t0 = now();
            ob_sample(ss, z, V, &c[i].p, (uint64_t)r, &id);
            double t = (now() - t0) * 1e3;
            ms = t < ms ? t : ms;
        }
        worst = ms > worst ? ms : worst;
        printf("#   %-28s %7.3f ms\n", c[i].name, ms);
    }
    struct ob_token_info ti;
    ms = 1e9;
    for (int r = 0; r < R; r++) {
        double t0 = now();
        ob_sample_token(ss, z, V, &c[3].p, (uint64_t)r, OB_MAX_TOP, &ti);
        double t = (now() - t0) * 1e3;
        ms = t < ms ? t : ms;
    }
    printf("#   %-28s %7.3f ms\n", "T 1 top_p 0.9 + top 20", ms);
    worst = ms > worst ? ms : worst;
    /* A full sort of the row alone takes about 10 ms here (qsort); the SIMD levels sample any
     * configuration in under 10 ms, the scalar references (OB_SIMD=scalar: a libm call per
     * fmaf) in under 20. The bounds leave room for a slower machine while catching an O(V log V) sort
     * per token. */
    const char *simd = getenv("OB_SIMD");
    double bound = simd && !strcmp(simd, "scalar") ? 60.0 : 25.0;
    ok(worst < bound, "every configuration samples a 151936-token row in < %.0f ms (%.1f)",
       bound, worst);
    free(z);
    ob_sample_scratch_free(ss);
}

/* ---- the oracle driver ----------------------------------------------------------------------- */

static int cmd_run(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return 1;
    }
    struct ob_sample_scratch *ss = NULL;
    uint32_t cap = 0;
    float *z = NULL;
    int rc = 0;
    for (;;) {
        uint32_t n, k, ntop;
        float T, tp, mp;
        uint64_t seed, pos;
        if (fread(&n, 4, 1, f) != 1)
            break;
        if (fread(&T, 4, 1, f) != 1 || fread(&k, 4, 1, f) != 1 || fread(&tp, 4, 1, f) != 1 ||
            fread(&mp, 4, 1, f) != 1 || fread(&seed, 8, 1, f) != 1 ||
            fread(&pos, 8, 1, f) != 1 || fread(&ntop, 4, 1, f) != 1 || ntop > OB_MAX_TOP) {
            rc = 1;
            break;
        }
        if (n > cap) {
            ob_sample_scratch_free(ss);
            free(z);
            cap = n;
            z = malloc((size_t)n * sizeof *z);
            if (!z || ob_sample_scratch_new(n, &ss)) {
                rc = 1;
                break;
            }
        }
        if (fread(z, 4, n, f) != n) {
            rc = 1;
            break;
        }
        struct ob_sampling p = {T, k, tp, mp, seed};
        struct ob_token_info ti;
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        float *w = malloc((size_t)n * sizeof *w);
        uint32_t nc = 0;
        int e = ob_sample_token(ss, z, n, &p, pos, (int)ntop, &ti);
        if (!e)
            e = ob_sample_candidates(ss, z, n, &p, ids, w, &nc);
        free(ids);
        free(w);
        if (e) {
            printf("{\"error\":\"%s\"}\n", ob_errmsg());
            continue;
        }
        printf("{\"token\":%d,\"n_cand\":%u,\"m\":\"%08x\",\"logl\":\"%08x\",\"top\":[", ti.id,
               nc, ob_f32_bits(ti.m), ob_f32_bits(ti.logl));
        for (int i = 0; i < ti.n_top; i++)
            printf("%s[%d,\"%08x\"]", i ? "," : "", ti.top[i].id, ob_f32_bits(ti.top[i].logprob));
        printf("]}\n");
    }
    if (rc)
        fprintf(stderr, "%s: bad case file\n", path);
    free(z);
    ob_sample_scratch_free(ss);
    fclose(f);
    return rc;
}

/*
 * The top list and the rank scan the row in blocks and pass over a block whose largest logit's
 * logprob is below what they look for (sample.c LP_BLOCK): against a full sort on rows made to
 * tie: a cluster of logits within a few ulps of the maximum, where z - m is exact and
 * subtracting log l rounds many of them to one logprob (ties then go by id, across blocks),
 * exact duplicates of the worst kept in later blocks, masked (-Inf) stretches, and lengths
 * around the block size.
 */
static void test_blocks(void)
{
    static const uint32_t lens[] = {1, 255, 256, 257, 513, 4099, 20000};
    enum { NMAX = 20000 };
    float *z = malloc(NMAX * sizeof *z);
    struct ob_top_lp *all = malloc(NMAX * sizeof *all);
    int32_t *place = malloc(NMAX * sizeof *place);
    long bad = 0, rows = 0, ties = 0;
    for (int it = 0; it < 70; it++) {
        uint32_t n = lens[it % 7];
        float top = 0.5f + 0.125f * (float)(it % 5);   /* ulps far below log l's */
        for (uint32_t i = 0; i < n; i++)
            z[i] = top - 40.0f + nrand(5.0f);
        uint32_t nc = n < 64 ? n : 64;         /* the cluster: the maximum and ulps below it */
        for (uint32_t c = 0; c < nc; c++) {
            uint32_t at = (uint32_t)(tap_rand() % n);
            z[at] = top;
            for (uint32_t u = (uint32_t)(tap_rand() % 40); u > 0; u--)
                z[at] = nextafterf(z[at], 0.0f);
        }
        if (it % 3 == 1 && n > 300)            /* a masked stretch over a block boundary */
            for (uint32_t i = 200; i < 300; i++)
                z[i] = NEG_INF;
        float m, l;
        if (ob_logits_lse(z, n, &m, &l)) {
            bad++;
            continue;
        }
        for (uint32_t i = 0; i < n; i++)
            all[i] = (struct ob_top_lp){(int32_t)i, ob_logprob(z[i], m, l)};
        qsort(all, n, sizeof *all, cmp_lp);
        for (uint32_t i = 0; i + 1 < n && i < 40; i++)
            ties += all[i].logprob == all[i + 1].logprob && z[all[i].id] != z[all[i + 1].id];
        for (uint32_t i = 0; i < n; i++)
            place[all[i].id] = (int32_t)i + 1;
        uint32_t k = 1 + (uint32_t)(it % OB_MAX_TOP);
        k = k < n ? k : n;
        struct ob_top_lp t[OB_MAX_TOP];
        bad += ob_top_logprobs(z, n, m, l, k, t) != 0;
        for (uint32_t j = 0; j < k; j++)
            bad += t[j].id != all[j].id || ob_f32_bits(t[j].logprob) != ob_f32_bits(all[j].logprob);
        /* the best, tied ones below it (ties before them in other blocks), and others */
        int32_t probe[8] = {all[0].id, all[n > 1].id, all[n > 3 ? 3 : 0].id,
                            all[n > 7 ? 7 : 0].id, all[n > 15 ? 15 : 0].id, all[n / 2].id,
                            all[n - 1].id, (int32_t)(tap_rand() % n)};
        for (int q = 0; q < 8; q++) {
            struct ob_token_info st;
            bad += ob_score_token(z, n, probe[q], 0, &st) != 0 || st.rank != place[probe[q]];
        }
        rows++;
    }
    free(z);
    free(all);
    free(place);
    ok(bad == 0 && ties > 0, "top_logprobs and ob_score_token's rank, scanned by blocks: %ld rows "
       "(1 to 20000 logits, %ld equal logprobs of different logits at the top) equal a full sort "
       "(%ld differ)", rows, ties, bad);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "run"))
        return cmd_run(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: sample [run FILE]\n");
        return 2;
    }
    test_checks();
    test_greedy();
    test_logprobs();
    test_blocks();
    test_filters();
    test_draw();
    test_distribution();
    test_paths();
    test_speed();
    return tap_done();
}
