/*
 * ref.c — the ref route (lib/ref/backend-ref.c) through the public API; driven by tests/t4400-ref.sh.
 *
 *   ref check MODEL TOKENS OUT.f64
 *       TAP. Runs TOKENS (comma-separated ids at positions 0, 1, ...) on route ref as one
 *       prefill batch and writes the float64 logits of every position to OUT.f64 (raw
 *       little-endian doubles, [n_tokens][n_vocab]) for tests/oracle/forward.py; checks that
 *       out32 is (float)out64, and that these ways give the same float64 bits as the one batch:
 *       one token per call (decode), batches split into pieces of 3 rows, the prompt cache
 *       (the first half copied into another slot with ob_ctx_kv_copy, the rest run there), two
 *       sequences interleaved in one batch, and 2 or 3 threads instead of 1.
 *   ref compare MODEL TOKENS
 *       the same tokens on routes cpu (float32 canonical arithmetic) and ref; prints one JSON
 *       line: max and mean |delta logprob| over every position and the whole vocabulary
 *       (cpu: ob_logsumexp / ob_logprob in float32; ref: a float64 log-sum-exp), the largest
 *       |delta logit| and the rms logit for scale, and how often the argmax token agrees.
 *   ref blas [ARG ...]
 *       after ob_blas_env: the OpenBLAS kernel set in use, $OPENBLAS_CORETYPE and every argument
 *       in brackets, one per line (the re-exec must keep argv exactly).
 *
 * Exit status: 0 when every check passed, 1 when one failed, 2 on usage errors.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "arith/arith.h"
#include "tap.h"


static void die(const char *what, int e)
{
    fprintf(stderr, "ref: %s: %s (%s)\n", what, ob_errmsg(), ob_strerror(e));
    exit(1);
}

/* "1,2,3" -> ids; the count in *n */
static int32_t *parse_tokens(const char *s, int *n)
{
    int cap = 16, k = 0;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    while (t && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || (*end && *end != ','))
            break;
        if (k == cap && !(t = realloc(t, (size_t)(cap *= 2) * sizeof *t)))
            break;
        t[k++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    if (!t || *s || k == 0) {
        fprintf(stderr, "ref: bad token list\n");
        exit(2);
    }
    *n = k;
    return t;
}

static struct ob_ctx *ctx(struct ob_model *m, const char *route, int threads, int slots,
                          int n_ctx, int max_batch)
{
    struct ob_ctx_params p = {route, threads, slots, n_ctx, max_batch};
    struct ob_ctx *c;
    int e = ob_ctx_new(m, &p, &c);
    if (e)
        die("context", e);
    return c;
}

/* rows [0, n) of one sequence, slot `slot`, positions pos0.., all logits wanted, one call */
static void run(struct ob_ctx *c, const int32_t *tok, int n, int slot, int pos0, float *o32,
                double *o64)
{
    int32_t *pos = malloc((size_t)n * sizeof *pos), *seq = malloc((size_t)n * sizeof *seq);
    int32_t *want = malloc((size_t)n * sizeof *want);
    if (!pos || !seq || !want)
        die("run", OB_ENOMEM);
    for (int i = 0; i < n; i++) {
        pos[i] = pos0 + i;
        seq[i] = slot;
        want[i] = i;
    }
    int e = ob_ctx_forward(c, n, tok, pos, seq, want, n, o32, o64);
    if (e)
        die("forward", e);
    free(pos);
    free(seq);
    free(want);
}

/* are a and b the same bits? describe the largest difference when not */
static int same(const double *a, const double *b, size_t n, char *msg, size_t cap)
{
    if (memcmp(a, b, n * sizeof *a) == 0) {
        snprintf(msg, cap, "bitwise equal");
        return 1;
    }
    double md = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= md)) {
            md = fabs(a[i] - b[i]);
            at = i;
        }
    snprintf(msg, cap, "differ: max |delta| %.3g at value %zu (%.17g vs %.17g)", md, at, a[at],
             b[at]);
    return 0;
}

static int check(struct ob_model *m, const int32_t *tok, int n, const char *outpath)
{
    int V = (int)ob_model_hparams(m)->n_vocab;
    size_t nv = (size_t)n * (size_t)V;
    float *o32 = malloc(nv * sizeof *o32);
    double *base = malloc(nv * sizeof *base), *o64 = malloc(nv * sizeof *o64);
    if (!o32 || !base || !o64)
        die("check", OB_ENOMEM);
    char msg[256];
    const char *core;
    int bt, e;

    /* one batch, one BLAS thread: the reference of every other way */
    struct ob_ctx *c = ctx(m, "ref", 1, 2, n, n);
    run(c, tok, n, 0, 0, o32, base);
    ob_blas_info(&core, &bt);
    FILE *f = fopen(outpath, "wb");
    int wrote = f && fwrite(base, sizeof *base, nv, f) == nv;
    wrote = (f && fclose(f) == 0) && wrote;
    ok(wrote, "ref: %d positions x %d logits in one batch (OpenBLAS %s, %d thread) -> %s", n, V,
       core, bt, outpath);
    size_t bad = 0;
    for (size_t i = 0; i < nv; i++)
        bad += !(isfinite(base[i]) && ob_f32_bits(o32[i]) == ob_f32_bits((float)base[i]));
    ok(bad == 0, "out32 is (float)out64 and finite (%zu values differ)", bad);

    /* decode: one token per call */
    for (int i = 0; i < n; i++)
        run(c, tok + i, 1, 1, i, o32 + (size_t)i * V, o64 + (size_t)i * V);
    ok(same(base, o64, nv, msg, sizeof msg), "one token at a time == one batch: %s", msg);

    ob_ctx_free(c);

    /* prompt cache: the first half run in slot 0, copied to slot 1 of a fresh context, the rest
     * run there */
    int h = n / 2;
    c = ctx(m, "ref", 1, 2, n, n);
    memset(o64, 0, nv * sizeof *o64);
    run(c, tok, h, 0, 0, o32, o64);
    if ((e = ob_ctx_kv_copy(c, 1, 0, h)))
        die("kv_copy", e);
    run(c, tok + h, n - h, 1, h, o32, o64 + (size_t)h * V);
    ok(same(base, o64, nv, msg, sizeof msg), "prompt cache (%d positions copied) == one batch: "
       "%s", h, msg);
    ob_ctx_free(c);

    /* pieces of 3 rows */
    c = ctx(m, "ref", 1, 1, n, 3);
    run(c, tok, n, 0, 0, o32, o64);
    ok(same(base, o64, nv, msg, sizeof msg), "batches of 3 rows == one batch: %s", msg);
    ob_ctx_free(c);

    /* two sequences interleaved in one batch: tok in slot 1, tok reversed in slot 0 */
    int32_t *rev = malloc((size_t)n * sizeof *rev);
    int32_t *bt_tok = malloc(2 * (size_t)n * sizeof *bt_tok);
    int32_t *bt_pos = malloc(2 * (size_t)n * sizeof *bt_pos);
    int32_t *bt_seq = malloc(2 * (size_t)n * sizeof *bt_seq);
    int32_t *want = malloc(2 * (size_t)n * sizeof *want);
    float *w32 = malloc(2 * nv * sizeof *w32);
    double *w64 = malloc(2 * nv * sizeof *w64);
    if (!rev || !bt_tok || !bt_pos || !bt_seq || !want || !w32 || !w64)
        die("check", OB_ENOMEM);
    for (int i = 0; i < n; i++) {
        rev[i] = tok[n - 1 - i];
        bt_tok[2 * i] = rev[i];
        bt_seq[2 * i] = 0;
        bt_tok[2 * i + 1] = tok[i];
        bt_seq[2 * i + 1] = 1;
        bt_pos[2 * i] = bt_pos[2 * i + 1] = i;
    }
    for (int i = 0; i < 2 * n; i++)
        want[i] = i;
    c = ctx(m, "ref", 1, 2, n, 2 * n);
    e = ob_ctx_forward(c, 2 * n, bt_tok, bt_pos, bt_seq, want, 2 * n, w32, w64);
    if (e)
        die("forward", e);
    for (int i = 0; i < n; i++)
        memcpy(o64 + (size_t)i * V, w64 + (size_t)(2 * i + 1) * V, (size_t)V * sizeof *o64);
    ok(same(base, o64, nv, msg, sizeof msg), "interleaved with another sequence in one batch "
       "== alone: %s", msg);
    ob_ctx_free(c);

    /* 2 and 3 threads (whole weight panels per thread; OpenBLAS itself stays at 1) */
    for (int th = 2; th <= 3; th++) {
        c = ctx(m, "ref", th, 1, n, n);
        run(c, tok, n, 0, 0, o32, o64);
        ob_blas_info(&core, &bt);
        ok(same(base, o64, nv, msg, sizeof msg), "%d threads == 1 (OpenBLAS %s, %d thread): %s",
           th, core, bt, msg);
        ob_ctx_free(c);
    }

    free(rev);
    free(bt_tok);
    free(bt_pos);
    free(bt_seq);
    free(want);
    free(w32);
    free(w64);
    free(o32);
    free(o64);
    free(base);
    return tap_done();
}

static int compare(struct ob_model *m, const int32_t *tok, int n)
{
    int V = (int)ob_model_hparams(m)->n_vocab;
    size_t nv = (size_t)n * (size_t)V;
    float *c32 = malloc(nv * sizeof *c32), *r32 = malloc(nv * sizeof *r32);
    double *r64 = malloc(nv * sizeof *r64);
    if (!c32 || !r32 || !r64)
        die("compare", OB_ENOMEM);
    struct ob_ctx *c = ctx(m, "cpu", 2, 1, n, n);
    run(c, tok, n, 0, 0, c32, NULL);
    ob_ctx_free(c);
    c = ctx(m, "ref", 2, 1, n, n);
    run(c, tok, n, 0, 0, r32, r64);
    ob_ctx_free(c);

    double max_lp = 0, sum_lp = 0, max_z = 0, sum_z2 = 0, max_lp_top = 0;
    int top_agree = 0, at_pos = 0;
    for (int t = 0; t < n; t++) {
        const float *z = c32 + (size_t)t * V;
        const double *y = r64 + (size_t)t * V;
        float m32, logl;
        ob_logsumexp(z, V, &m32, &logl);
        double m64 = y[0];
        int a32 = 0, a64 = 0;
        for (int i = 1; i < V; i++) {
            m64 = y[i] > m64 ? y[i] : m64;
            a32 = z[i] > z[a32] ? i : a32;
            a64 = y[i] > y[a64] ? i : a64;
        }
        double s = 0;
        for (int i = 0; i < V; i++)
            s += exp(y[i] - m64);
        double lse = m64 + log(s);
        for (int i = 0; i < V; i++) {
            double d = fabs((double)ob_logprob(z[i], m32, logl) - (y[i] - lse));
            if (d > max_lp) {
                max_lp = d;
                at_pos = t;
            }
            sum_lp += d;
            double dz = fabs((double)z[i] - y[i]);
            max_z = dz > max_z ? dz : max_z;
            sum_z2 += y[i] * y[i];
        }
        double dtop = fabs((double)ob_logprob(z[a64], m32, logl) - (y[a64] - lse));
        max_lp_top = dtop > max_lp_top ? dtop : max_lp_top;
        top_agree += a32 == a64;
    }
    printf("{\"positions\":%d,\"vocab\":%d,\"max_abs_dlogp\":%.3e,\"mean_abs_dlogp\":%.3e,"
           "\"max_abs_dlogp_ref_top1\":%.3e,\"max_at_position\":%d,\"max_abs_dlogit\":%.3e,"
           "\"rms_logit\":%.3f,\"top1_agree\":%d}\n", n, V, max_lp, sum_lp / (double)nv,
           max_lp_top, at_pos, max_z, sqrt(sum_z2 / (double)nv), top_agree);
    free(c32);
    free(r32);
    free(r64);
    return 0;
}

int main(int argc, char **argv)
{
    int e = ob_blas_env(argc, argv);
    if (e)
        fprintf(stderr, "ref: warning: %s\n", ob_errmsg());
    if (argc >= 2 && strcmp(argv[1], "blas") == 0) {
        const char *core, *env = getenv("OPENBLAS_CORETYPE");
        int bt;
        ob_blas_info(&core, &bt);
        printf("core %s\nenv %s\nthreads %d\n", core, env ? env : "(unset)", bt);
        for (int i = 0; i < argc; i++)
            printf("arg[%s]\n", argv[i]);
        return 0;
    }
    if (argc < 4 || (strcmp(argv[1], "check") && strcmp(argv[1], "compare")) ||
        (strcmp(argv[1], "check") == 0 && argc != 5) ||
        (strcmp(argv[1], "compare") == 0 && argc != 4)) {
        fprintf(stderr, "usage: ref check MODEL TOKENS OUT.f64 | ref compare MODEL TOKENS | "
                "ref blas [ARG ...]\n");
        return 2;
    }
    int n;
    int32_t *tok = parse_tokens(argv[3], &n);
    struct ob_model *m;
    if ((e = ob_model_open(argv[2], &m)))
        die(argv[2], e);
    int rc = strcmp(argv[1], "check") == 0 ? check(m, tok, n, argv[4]) : compare(m, tok, n);
    ob_model_close(m);
    free(tok);
    return rc;
}
