/*
 * sample.c — log-probabilities and the sampling pipeline defined in sample.h.
 *
 * Cost per call for a vocabulary of V tokens: one pass to check the row and find its maximum,
 * one pass of ob_expf for the weights (candidates only under top_k), and one or two passes to
 * draw. Selections never sort the vocabulary:
 *  - top_k and top_logprobs keep the k best in a binary heap whose root is the worst kept
 *    element, so most tokens cost one comparison;
 *  - the top_p cut needs the candidates in sorted order only up to the cut. The weights are
 *    binned by the top 12 bits of their float32 pattern (sign 0, exponent, 3 mantissa bits: a
 *    bin spans a factor of at most 1.125), bin masses are added from the heaviest bin down
 *    until they reach top_p * S, and only the tokens at or above that bin's lower edge are
 *    sorted. That set is closed upwards in e, hence in z, so it is a prefix of the sorted
 *    order and the running sums over it are exactly those of a full sort. Should rounding
 *    leave the running sum just short of the threshold, the next bin down is added and the
 *    prefix sorted again.
 *    The prefix is sorted by a stable radix sort on the logit's bits (gathered in id order, so
 *    equal logits stay in id order).
 * The result never depends on how much was sorted: every decision is the one of the
 * definition in sample.h.
 *
 * Speed: the library is compiled without -mfma, so an fmaf of ob_expf is a libm call (~30 ns
 * per token, 5 ms for a 151936-token row). The exponentials of both per-token loops (weights,
 * log-sum-exp) therefore run through the host's exp and expsum kernels (host/softmax.h) of the
 * level ob_isa_select picks (OB_SIMD=scalar forces the references): bitwise the references at
 * every level (tests/unit/ops.c, and tests/unit/sample.c compares the levels here). With T = 1 the
 * weights are the log-sum-exp's terms exactly ((z - zmax) / 1 = z - zmax), so
 * ob_sample_token adds them up in ob_logsumexp's shape instead of computing them twice. The
 * row's check and maximum are the level's row_max too: the plain loop, whose early exit on a
 * NaN kept it scalar, took 1.7 % of a width-8 decode (the other thread waiting meanwhile;
 * perf, AVX2 level, 2 threads, an AVX-512 Xeon), row_max 0.5 %.
 */
#include <float.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "arith/arith.h"
#include "host/simd.h"
#include "host/softmax.h"
#include "sample.h"

#define NBIN 1024                  /* float32 bits >> 20 of a weight in [0, 1]: <= 0x3f8 */
#define BIN_SHIFT 20

/* A candidate: logit, id, weight. */
struct cand {
    float z;
    int32_t id;
    float e;
};

struct ob_sample_scratch {
    uint32_t n_vocab;
    float *e;                      /* [n_vocab] weights by id (all tokens are candidates) */
    struct cand *a;                /* [n_vocab] candidates in sorted order, or the heap */
    struct cand *b;                /* [n_vocab] candidates by id (top_k) */
    uint32_t *f;                   /* [n_vocab] the ids of F (draw) */
    double *run;                   /* [n_vocab / RUN + 1]: the float64 sum of the weights after
                                    * every RUN tokens, as weights() adds them */
    double mass[NBIN];             /* weight per bin (top_p) */
    uint32_t cnt[NBIN];            /* tokens per bin */
    const struct ob_softmax *ops;  /* exp and expsum of the ISA level (OB_SIMD) */
};

/* ---- the per-token loops --------------------------------------------------------------------- */

#define RUN 512                    /* tokens between the running sums kept (ss->run) */

/* e[i] = ob_expf((z[i] - zmax) / T) and their float64 sum in increasing i, the sum so far kept
 * after every RUN of them (ss->run: the draw starts from the last one below its target); with
 * mass/cnt, the weight histogram of the top_p search. The tempered logits and their
 * exponentials come from the ISA's kernels. */
static double weights(const struct ob_sample_scratch *ss, const float *z, uint32_t n,
                      float zmax, float T, float *e, double *mass, uint32_t *cnt)
{
    ss->ops->scale(z, n, zmax, T, e);
    ss->ops->exp(e, e, n);
    double S = 0.0;
    for (uint32_t b = 0; b < n; b += RUN) {
        uint32_t end = n - b < RUN ? n : b + RUN;
        if (mass) {
            for (uint32_t i = b; i < end; i++) {
                float w = e[i];
                S += (double)w;
                uint32_t k = ob_f32_bits(w) >> BIN_SHIFT;
                mass[k] += (double)w;
                cnt[k]++;
            }
        } else {
            for (uint32_t i = b; i < end; i++)
                S += (double)e[i];
        }
        ss->run[b / RUN] = S;
    }
    return S;
}

/* log l of ob_logsumexp for a row whose maximum is m (the same operations in the same order);
 * with e != NULL the terms ob_expf(z[i] - m) are read from e[] instead of computed. */
static float lse(const struct ob_softmax *ops, const float *z, uint32_t n, float m,
                 const float *e)
{
    return ob_logf(e ? ob_sum_f32(e, (int)n) : ops->expsum(z, n, m));
}

/* the ops of the level OB_SIMD selects now (the best this CPU runs when unset; the references
 * when OB_SIMD or OB_CPU_LACKS is invalid, or OB_SIMD names a level the CPU lacks: the route
 * reports that error) */
static const struct ob_softmax *level_ops(void)
{
    int isa;
    if (ob_isa_select(&isa))
        isa = OB_ISA_SCALAR;
    return ob_softmax(isa);
}

/* level_ops() as first asked, for the calls without a scratch */
static const struct ob_softmax *sel_ops;
static pthread_once_t sel_once = PTHREAD_ONCE_INIT;

static void sel_init(void)
{
    sel_ops = level_ops();
}

static const struct ob_softmax *selected_ops(void)
{
    pthread_once(&sel_once, sel_init);
    return sel_ops;
}

/* ---- the row ------------------------------------------------------------------------------ */

/* NaN and +Inf are refused; -Inf is a masked token. *zmax = the largest logit (finite): the
 * ISA's row_max, ob_max_f32's value at every level. */
static int check_row(const struct ob_softmax *ops, const float *z, uint32_t n, float *zmax)
{
    if (!z || n == 0)
        return ob_seterr(OB_EUSAGE, "empty row of logits");
    if (n > INT_MAX)
        return ob_seterr(OB_EUSAGE, "%u logits are more than a row may hold", n);
    int bad;
    float m = ops->row_max(z, n, &bad);
    for (uint32_t i = 0; bad && i < n; i++)
        if (z[i] != z[i] || z[i] == ob_inf())
            return ob_seterr(OB_ERANGE, "logit of token %u is %s", i,
                             z[i] != z[i] ? "NaN" : "+Inf");
    if (m == -ob_inf())
        return ob_seterr(OB_ERANGE, "every logit is -Inf");
    *zmax = m;
    return 0;
}

int ob_logits_lse(const float *z, uint32_t n, float *m, float *logl)
{
    float zmax;
    int e = check_row(selected_ops(), z, n, &zmax);
    if (e)
        return e;
    /* ob_logsumexp's operations (its m is check_row's maximum: the same value on every row
     * check_row accepts), the sum of exponentials through the ISA's kernel */
    *m = zmax;
    *logl = lse(selected_ops(), z, n, zmax, NULL);
    return 0;
}

int ob_argmax(const float *z, uint32_t n, int32_t *id)
{
    float zmax;
    int e = check_row(selected_ops(), z, n, &zmax);
    if (e)
        return e;
    for (uint32_t i = 0; i < n; i++)
        if (z[i] == zmax) {
            *id = (int32_t)i;
            return 0;
        }
    return ob_seterr(OB_EINTERNAL, "argmax: maximum not found");
}

/* ---- ordering and selection --------------------------------------------------------------- */

/* a comes after b in the order (key descending, id ascending) */
static inline bool after(const struct cand *a, const struct cand *b)
{
    return a->z < b->z || (a->z == b->z && a->id > b->id);
}

static int cmp_order(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    return after(a, b) ? 1 : after(b, a) ? -1 : 0;
}

static int cmp_id(const void *pa, const void *pb)
{
    const struct cand *a = pa, *b = pb;
    return (a->id > b->id) - (a->id < b->id);
}

/* Sort key of a logit: ascending key = descending z; -0 and +0 are one value, as for '<'. */
static inline uint32_t desc_key(float z)
{
    uint32_t u = ob_f32_bits(z);
    if (u == 0x80000000u)
        u = 0;
    u = u & 0x80000000u ? ~u : u | 0x80000000u;      /* ascending key = ascending z */
    return ~u;
}

/* Stable LSD radix sort of a[0..n) by desc_key (tmp: n entries): elements given in increasing
 * id come out in the order (z descending, id ascending). */
static void radix_sort(struct cand *a, struct cand *tmp, uint32_t n)
{
    uint32_t cnt[4][256] = {{0}};
    for (uint32_t i = 0; i < n; i++) {
        uint32_t k = desc_key(a[i].z);
        for (int d = 0; d < 4; d++)
            cnt[d][k >> (8 * d) & 0xff]++;
    }
    struct cand *src = a, *dst = tmp;
    for (int d = 0; d < 4; d++) {
        if (cnt[d][desc_key(a[0].z) >> (8 * d) & 0xff] == n)
            continue;              /* every key has the same digit here */
        uint32_t off[256], o = 0;
        for (int b = 0; b < 256; b++) {
            off[b] = o;
            o += cnt[d][b];
        }
        for (uint32_t i = 0; i < n; i++)
            dst[off[desc_key(src[i].z) >> (8 * d) & 0xff]++] = src[i];
        struct cand *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

/* Heap of the k best seen so far, the worst at h[0]. */
static void sift_down(struct cand *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && after(&h[l], &h[w]))
            w = l;
        if (r < n && after(&h[r], &h[w]))
            w = r;
        if (w == i)
            return;
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void sift_up(struct cand *h, uint32_t i)
{
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!after(&h[i], &h[p]))
            return;
        struct cand t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static inline void offer(struct cand *h, uint32_t *nh, uint32_t k, struct cand x)
{
    if (*nh < k) {
        h[*nh] = x;
        sift_up(h, (*nh)++);
    } else if (after(&h[0], &x)) {
        h[0] = x;
        sift_down(h, k, 0);
    }
}

/*
 * The scans below go by blocks of LP_BLOCK logits and pass over a block whose largest logit's
 * logprob is below what they look for: ob_logprob rises with z (two subtractions, each rounding
 * monotonically), so no logprob of that block reaches it, and the result is the whole scan's.
 * The row was checked (no NaN, no +Inf); its maxima come from the level's row_max.
 */
#define LP_BLOCK 256

static float block_lp(const struct ob_softmax *ops, const float *z, uint32_t b, uint32_t e,
                      float m, float logl)
{
    int bad;
    return ob_logprob(ops->row_max(z + b, e - b, &bad), m, logl);
}

/* The k best of the row by (logprob desc, id asc) into out[0..k), using h[0..k) as the heap. */
static void top_lp(const struct ob_softmax *ops, const float *z, uint32_t n, float m,
                   float logl, uint32_t k, struct cand *h, struct ob_top_lp *out)
{
    uint32_t nh = 0;
    if (k == 0)
        return;
    for (uint32_t b = 0; b < n; b += LP_BLOCK) {
        uint32_t e = n - b < LP_BLOCK ? n : b + LP_BLOCK;
        if (nh == k && block_lp(ops, z, b, e, m, logl) < h[0].z)
            continue;              /* the common case: nothing better than the worst kept */
        for (uint32_t i = b; i < e; i++) {
            struct cand x = {ob_logprob(z[i], m, logl), (int32_t)i, 0.0f};
            if (nh == k && !after(&h[0], &x))
                continue;
            offer(h, &nh, k, x);
        }
    }
    qsort(h, nh, sizeof *h, cmp_order);
    for (uint32_t j = 0; j < nh; j++)
        out[j] = (struct ob_top_lp){h[j].id, h[j].z};
}

int ob_top_logprobs(const float *z, uint32_t n, float m, float logl, uint32_t k,
                    struct ob_top_lp *out)
{
    if (k == 0)
        return 0;
    if (k > n)
        return ob_seterr(OB_EUSAGE, "top_logprobs %u is more than the %u tokens", k, n);
    struct cand local[OB_MAX_TOP], *h = k <= OB_MAX_TOP ? local : malloc(k * sizeof *h);
    if (!h)
        return ob_seterr(OB_ENOMEM, "out of memory");
    top_lp(selected_ops(), z, n, m, logl, k, h, out);
    if (h != local)
        free(h);
    return 0;
}

/* ---- random numbers ------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

uint32_t ob_sample_rand24(uint64_t seed, uint64_t position)
{
    return (uint32_t)(mix64(mix64(seed) + (position + 1) * 0x9e3779b97f4a7c15ull) >> 40);
}

/* ---- the pipeline ---------------------------------------------------------------------------- */

int ob_sample_scratch_new(uint32_t n_vocab, struct ob_sample_scratch **out)
{
    struct ob_sample_scratch *s = calloc(1, sizeof *s);
    if (!s || n_vocab == 0 ||
        !(s->e = malloc((size_t)n_vocab * sizeof *s->e)) ||
        !(s->a = malloc((size_t)n_vocab * sizeof *s->a)) ||
        !(s->b = malloc((size_t)n_vocab * sizeof *s->b)) ||
        !(s->f = malloc((size_t)n_vocab * sizeof *s->f)) ||
        !(s->run = malloc(((size_t)n_vocab / RUN + 1) * sizeof *s->run))) {
        ob_sample_scratch_free(s);
        return n_vocab == 0 ? ob_seterr(OB_EUSAGE, "a vocabulary of 0 tokens") :
               ob_seterr(OB_ENOMEM, "out of memory");
    }
    s->n_vocab = n_vocab;
    s->ops = level_ops();           /* per scratch: OB_SIMD as it is now */
    *out = s;
    return 0;
}

void ob_sample_scratch_free(struct ob_sample_scratch *s)
{
    if (!s)
        return;
    free(s->e);
    free(s->a);
    free(s->b);
    free(s->run);
    free(s->f);
    free(s);
}

int ob_sampling_check(const struct ob_sampling *p)
{
    if (!p)
        return ob_seterr(OB_EUSAGE, "no sampling parameters");
    if (!(p->temperature >= 0.0f && p->temperature <= FLT_MAX))
        return ob_seterr(OB_EUSAGE, "temperature must be finite and >= 0");
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return ob_seterr(OB_EUSAGE, "top_p must be in [0, 1] (1 = off)");
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return ob_seterr(OB_EUSAGE, "min_p must be in [0, 1] (0 = off)");
    return 0;
}

/*
 * The final candidate set F of a row with T > 0, described without listing it: candidates C
 * (all tokens, weights in ss->e by id; or top_k of them in ss->b by id with their weights),
 * and F = { i in C : (z_i, i) not after the cut, e_i >= minp }.
 */
struct sel {
    bool all;                      /* C = every token */
    uint32_t nc;                   /* |C| when !all (in ss->b) */
    bool cut;                      /* top_p kept a proper prefix ending at (zc, idc) */
    float zc;
    int32_t idc;
    float minp;                    /* 0 when off: every weight passes */
    bool everything;               /* F = C (no cut, no min_p) */
    double S;                      /* the sum of the weights of C, in increasing id */
};

/* whether token id (z, weight e) is in F, as 0 or 1 from comparisons alone: no branch to
 * mispredict where F is any share of the row (ids and idc are never negative) */
static inline int in_f(const struct sel *s, float z, int32_t id, float e)
{
    return (!s->cut | (z > s->zc) | ((z == s->zc) & (id <= s->idc))) & (e >= s->minp);
}

/* Running sums along a[0..na) (sorted order): the first j with c_j >= P, or -1. */
static long cut_at(const struct cand *a, uint32_t na, double P)
{
    double c = 0.0;
    for (uint32_t j = 0; j < na; j++) {
        c += (double)a[j].e;
        if (c >= P)
            return (long)j;
    }
    return -1;
}

/* The tokens of C (all mode) with weight >= lo, into ss->a in sorted order. */
static uint32_t gather_sorted(struct ob_sample_scratch *ss, const float *z, uint32_t n, float lo)
{
    uint32_t na = 0;
    for (uint32_t i = 0; i < n; i++) {     /* without branches: the kept share is any */
        ss->a[na] = (struct cand){z[i], (int32_t)i, ss->e[i]};
        na += ss->e[i] >= lo;
    }
    if (na > 1)
        radix_sort(ss->a, ss->b, na);
    return na;
}

static void set_cut(struct sel *s, const struct cand *c)
{
    s->cut = true;
    s->zc = c->z;
    s->idc = c->id;
}

/* Steps 1-4 of sample.h for a checked row with maximum zmax and T > 0. */
static void select_f(struct ob_sample_scratch *ss, const float *z, uint32_t n, float zmax,
                     const struct ob_sampling *p, struct sel *s)
{
    const float T = p->temperature;
    const bool use_p = p->top_p < 1.0f;
    *s = (struct sel){.minp = p->min_p};
    double S = 0.0;
    if (p->top_k > 0 && p->top_k < n) {
        /* 1. the top_k by (z desc, id asc), then their weights */
        uint32_t k = p->top_k, nh = 0;
        for (uint32_t i = 0; i < n; i++) {
            struct cand x = {z[i], (int32_t)i, 0.0f};
            if (nh == k && !after(&ss->a[0], &x))
                continue;
            offer(ss->a, &nh, k, x);
        }
        qsort(ss->a, k, sizeof *ss->a, cmp_order);
        for (uint32_t j = 0; j < k; j++)
            ss->a[j].e = ob_expf((ss->a[j].z - zmax) / T);
        memcpy(ss->b, ss->a, k * sizeof *ss->b);
        qsort(ss->b, k, sizeof *ss->b, cmp_id);
        for (uint32_t j = 0; j < k; j++)
            S += (double)ss->b[j].e;
        s->nc = k;
        if (use_p) {
            long j = cut_at(ss->a, k, (double)p->top_p * S);
            if (j >= 0 && (uint32_t)j + 1 < k)
                set_cut(s, &ss->a[j]);
        }
        s->everything = !s->cut && p->min_p <= 0.0f;
        s->S = S;
        return;
    }
    s->all = true;
    if (use_p) {
        memset(ss->mass, 0, sizeof ss->mass);
        memset(ss->cnt, 0, sizeof ss->cnt);
    }
    S = weights(ss, z, n, zmax, T, ss->e, use_p ? ss->mass : NULL, use_p ? ss->cnt : NULL);
    if (use_p) {
        const double P = (double)p->top_p * S;
        double acc = 0.0;
        int bmin = 0;
        while (!ss->cnt[bmin])
            bmin++;
        for (int b = NBIN - 1; b >= bmin; b--) {
            if (!ss->cnt[b])
                continue;
            acc += ss->mass[b];
            if (acc < P && b > bmin)
                continue;
            float lo = ob_f32_from_bits((uint32_t)b << BIN_SHIFT);
            if (p->min_p > 0.0f && lo < p->min_p) {
                /* below min_p nothing is kept anyway: F is a prefix of { e >= min_p } */
                uint32_t na = gather_sorted(ss, z, n, p->min_p);
                long j = cut_at(ss->a, na, P);
                if (j >= 0 && (uint32_t)j + 1 < na)
                    set_cut(s, &ss->a[j]);
                break;
            }
            uint32_t na = gather_sorted(ss, z, n, lo);
            long j = cut_at(ss->a, na, P);
            if (j >= 0) {
                if ((uint32_t)j + 1 < n)
                    set_cut(s, &ss->a[j]);
                break;
            }
            /* rounding left the running sum short of P: take the next bin too */
        }
    }
    s->everything = !s->cut && p->min_p <= 0.0f;
    s->S = S;
}

/* Step 5. */
static int draw(struct ob_sample_scratch *ss, const float *z, uint32_t n, const struct sel *s,
                uint64_t seed, uint64_t position, int32_t *token)
{
    double u = (double)ob_sample_rand24(seed, position) * 0x1p-24;
    double W = 0.0, c = 0.0;
    if (s->all && s->everything) {
        W = s->S;                  /* the same sums in the same order as S */
        double target = W * u;
        uint32_t i = 0, r = 0;
        /* from the last running sum not above the target: the same sums (weights' in the same
         * order), and c only grows */
        while (r * RUN < n && ss->run[r] <= target)
            r++;
        if (r > 0) {
            c = ss->run[r - 1];
            i = r * RUN;
        }
        for (; i < n; i++) {
            c += (double)ss->e[i];
            if (c > target) {
                *token = (int32_t)i;
                return 0;
            }
        }
    } else if (s->all) {
        /* F's tokens in increasing id, found once; W and the running sum over them */
        uint32_t nf = 0;
        if (s->cut)                /* top_p's F, any share of the row: without branches */
            for (uint32_t i = 0; i < n; i++) {
                ss->f[nf] = i;
                nf += (uint32_t)in_f(s, z[i], (int32_t)i, ss->e[i]);
            }
        else                       /* min_p's alone, a few tokens as a rule */
            for (uint32_t i = 0; i < n; i++)
                if (ss->e[i] >= s->minp)
                    ss->f[nf++] = i;
        for (uint32_t j = 0; j < nf; j++)
            W += (double)ss->e[ss->f[j]];
        double target = W * u;
        for (uint32_t j = 0; j < nf; j++) {
            c += (double)ss->e[ss->f[j]];
            if (c > target) {
                *token = (int32_t)ss->f[j];
                return 0;
            }
        }
    } else {
        const struct cand *b = ss->b;
        for (uint32_t j = 0; j < s->nc; j++)
            if (in_f(s, b[j].z, b[j].id, b[j].e))
                W += (double)b[j].e;
        double target = W * u;
        for (uint32_t j = 0; j < s->nc; j++)
            if (in_f(s, b[j].z, b[j].id, b[j].e)) {
                c += (double)b[j].e;
                if (c > target) {
                    *token = b[j].id;
                    return 0;
                }
            }
    }
    return ob_seterr(OB_EINTERNAL, "sampling: no candidate left (W %g, u %g)", W, u);
}

static int prepare(struct ob_sample_scratch *ss, const float *z, uint32_t n,
                   const struct ob_sampling *p, float *zmax)
{
    int e = ob_sampling_check(p);
    if (e)
        return e;
    if (!ss || n > ss->n_vocab)
        return ob_seterr(OB_EUSAGE, "a row of %u logits needs a scratch for at least as many "
                         "(have %u)", n, ss ? ss->n_vocab : 0);
    return check_row(ss->ops, z, n, zmax);
}

/* *e_all (if given) tells whether ss->e now holds the weights of every token. */
static int sample_checked(struct ob_sample_scratch *ss, const float *z, uint32_t n, float zmax,
                          const struct ob_sampling *p, uint64_t position, int32_t *token,
                          bool *e_all)
{
    if (e_all)
        *e_all = false;
    if (p->temperature == 0.0f) {
        for (uint32_t i = 0; i < n; i++)
            if (z[i] == zmax) {
                *token = (int32_t)i;
                return 0;
            }
        return ob_seterr(OB_EINTERNAL, "argmax: maximum not found");
    }
    struct sel s;
    select_f(ss, z, n, zmax, p, &s);
    if (e_all)
        *e_all = s.all;
    return draw(ss, z, n, &s, p->seed, position, token);
}

int ob_sample(struct ob_sample_scratch *ss, const float *z, uint32_t n,
              const struct ob_sampling *p, uint64_t position, int32_t *token)
{
    float zmax;
    int e = prepare(ss, z, n, p, &zmax);
    if (e)
        return e;
    return sample_checked(ss, z, n, zmax, p, position, token, NULL);
}

int ob_sample_candidates(struct ob_sample_scratch *ss, const float *z, uint32_t n,
                         const struct ob_sampling *p, int32_t *ids, float *w, uint32_t *n_out)
{
    float zmax;
    int e = prepare(ss, z, n, p, &zmax);
    if (e)
        return e;
    uint32_t k = 0;
    if (p->temperature == 0.0f) {
        for (uint32_t i = 0; i < n && !k; i++)
            if (z[i] == zmax) {
                ids[k] = (int32_t)i;
                w[k++] = 1.0f;
            }
        *n_out = k;
        return 0;
    }
    struct sel s;
    select_f(ss, z, n, zmax, p, &s);
    if (s.all) {
        for (uint32_t i = 0; i < n; i++)
            if (in_f(&s, z[i], (int32_t)i, ss->e[i])) {
                ids[k] = (int32_t)i;
                w[k++] = ss->e[i];
            }
    } else {
        for (uint32_t j = 0; j < s.nc; j++)
            if (in_f(&s, ss->b[j].z, ss->b[j].id, ss->b[j].e)) {
                ids[k] = ss->b[j].id;
                w[k++] = ss->b[j].e;
            }
    }
    *n_out = k;
    return 0;
}

int ob_sample_token(struct ob_sample_scratch *ss, const float *z, uint32_t n,
                    const struct ob_sampling *p, uint64_t position, int top_logprobs,
                    struct ob_token_info *out)
{
    out->id = -1;
    out->n_top = 0;
    out->rank = 0;
    if (top_logprobs < 0 || top_logprobs > OB_MAX_TOP || (uint32_t)top_logprobs > n)
        return ob_seterr(OB_EUSAGE, "top_logprobs %d is outside [0, %d]", top_logprobs,
                         OB_MAX_TOP);
    float zmax;
    int32_t id;
    bool e_all;
    int e = prepare(ss, z, n, p, &zmax);
    if (e || (e = sample_checked(ss, z, n, zmax, p, position, &id, &e_all)))
        return e;
    /* ob_logsumexp's m is the same maximum; log l from the weights when they are its terms */
    out->m = zmax;
    out->logl = lse(ss->ops, z, n, zmax, e_all && p->temperature == 1.0f ? ss->e : NULL);
    struct cand heap[OB_MAX_TOP];
    top_lp(ss->ops, z, n, out->m, out->logl, (uint32_t)top_logprobs, heap, out->top);
    out->id = id;
    out->logprob = ob_logprob(z[id], out->m, out->logl);
    out->n_top = top_logprobs;
    out->rank = 0;
    return 0;
}

/* The least z whose logprob is above lp (or, with ge, at least lp), +Inf where none is below
 * +Inf: ob_logprob rises with z, so the z that pass are those from a threshold up, found by
 * bisection over the floats in order (their bits, the sign folded). */
static float lp_threshold(float lp, float m, float logl, bool ge)
{
    int64_t lo = -(int64_t)0x7f800000, hi = 0x7f800000;   /* -Inf .. +Inf */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        float z = mid < 0 ? -ob_f32_from_bits((uint32_t)-mid) : ob_f32_from_bits((uint32_t)mid);
        float x = ob_logprob(z, m, logl);
        if (ge ? x >= lp : x > lp)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < 0 ? -ob_f32_from_bits((uint32_t)-lo) : ob_f32_from_bits((uint32_t)lo);
}

/* 1 + the tokens before id in the order of top_lp: logprob descending, ties by id ascending.
 * Counted on the logits against the two thresholds (a comparison a token; the row has no NaN),
 * not on their logprobs: the same tokens; a block whose largest logit is below both has none. */
static int32_t vocab_rank(const float *z, uint32_t n, float m, float logl, int32_t id)
{
    const struct ob_softmax *ops = selected_ops();
    float lp = ob_logprob(z[id], m, logl);
    float above = lp_threshold(lp, m, logl, false), at = lp_threshold(lp, m, logl, true);
    uint32_t before = 0;
    for (uint32_t b = 0; b < n; b += LP_BLOCK) {
        uint32_t e = n - b < LP_BLOCK ? n : b + LP_BLOCK;
        int bad;
        if (ops->row_max(z + b, e - b, &bad) < at)
            continue;
        for (uint32_t i = b; i < e; i++)
            before += (z[i] >= above) | ((z[i] >= at) & (i < (uint32_t)id));
    }
    return (int32_t)before + 1;
}

int ob_score_token(const float *z, uint32_t n, int32_t id, int top_logprobs,
                   struct ob_token_info *out)
{
    out->id = -1;
    out->n_top = 0;
    out->rank = 0;
    if (id < 0 || (uint32_t)id >= n)
        return ob_seterr(OB_ERANGE, "token id %d is outside the vocabulary of %u", id, n);
    if (top_logprobs < 0 || top_logprobs > OB_MAX_TOP || (uint32_t)top_logprobs > n)
        return ob_seterr(OB_EUSAGE, "top_logprobs %d is outside [0, %d]", top_logprobs,
                         OB_MAX_TOP);
    int e = ob_logits_lse(z, n, &out->m, &out->logl);
    if (e || (e = ob_top_logprobs(z, n, out->m, out->logl, (uint32_t)top_logprobs, out->top)))
        return e;
    out->id = id;
    out->logprob = ob_logprob(z[id], out->m, out->logl);
    out->n_top = top_logprobs;
    out->rank = vocab_rank(z, n, out->m, out->logl, id);
    return 0;
}
