/*
 * spec.c — speculative decoding, measured: decode tokens/s with and without prompt lookup
 * (--spec ngram) or a draft model (--draft MODEL) on the kinds of request in a prompts file
 * (bench/spec-prompts.jsonl: code editing, extraction and quoting, an open story), at each
 * width, side by side in one run.
 *
 *   bin/bench/spec -m MODEL [--draft MODEL] [-t N] [--widths 1,8] [--gen N] [--reps 3]
 *                  [--spec-max K] [--prompts FILE] [--json]
 *
 * For each kind and width W: W copies of the request (greedy unless the record says, no
 * prompt cache) decode together, plain and speculating in turn; the figure is generated
 * tokens after every copy had its first one, over the time from then to the end (the best of
 * --reps). Beside it: the share of drafted tokens accepted, the tokens a verify step yields
 * (accepted + 1), and the machine's ceiling for the speed-up: those tokens over the cost of a
 * verify step against a plain one. That cost is measured here, on this machine: the forward
 * pass of k + 1 rows of each of W sequences (k the mean drafted) against that of one row of
 * each, at the same depth (the best of 30): at width 8, a step of 8 (k + 1) rows against
 * one of 8. Where a step's cost grows with its rows (compute-bound decode), the ceiling is
 * low and so is the speed-up; where the weights' memory traffic dominates, a verify step
 * costs little more than a plain one. With a draft model the cost of drafting joins the
 * verify step's: its k guesses for each of the W sequences together at that depth (the best
 * of 30), in plain steps ("dcost"). "same" checks the first copy's tokens and bits against plain
 * decoding's (the test suite proves it; the bench only shows it).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode-rate.h"
#include "local.h"
#include "record.h"
#include "../cmd/cli.h"


enum { MAXW = 16, MAXK = 8, MAXT = 4096 };

struct seq {
    int n;
    uint64_t fp;                   /* FNV-1a of ids and logprob bits */
};

static void on_token(void *user, uint64_t h, const struct ob_token_info *t)
{
    struct seq *s = user;
    uint32_t v[2] = {(uint32_t)t->id, 0};
    memcpy(&v[1], &t->logprob, 4);
    const unsigned char *p = (const unsigned char *)v;
    if (s->n++ == 0)
        s->fp = 1469598103934665603ull;
    for (int k = 0; k < 8; k++)
        s->fp = (s->fp ^ p[k]) * 1099511628211ull;
}

static void on_finish(void *user, uint64_t h, const struct ob_finish *f)
{
}

struct fig {
    double tps;                    /* best of the reps */
    uint64_t fp;                   /* the first copy's */
    uint64_t drafted, accepted, vsteps;
    int tokens;
};

/* W copies of q decoding together with speculation `spec`, once; out keeps the best speed
 * over the calls; false on an error */
static bool run(struct ob_local *L, const struct ob_req *q, int w, int spec, struct fig *out)
{
    {
        struct seq s[MAXW] = {{0}};
        struct ob_engine_stats s0, s1;
        ob_engine_stats(L->eng, &s0);
        for (int k = 0; k < w; k++) {
            struct ob_request rq = {
                .prompt = q->ids, .n_prompt = q->n_ids, .sampling = q->s,
                .max_tokens = q->max_tokens, .cache_prompt = false, .stop = q->stop,
                .n_stop = q->n_stop, .stop_ids = q->stop_ids, .n_stop_ids = q->n_stop_ids,
                .spec = spec, .on_token = on_token, .on_finish = on_finish, .user = &s[k],
            };
            if (ob_engine_submit(L->eng, &rq, NULL))
                return false;
        }
        const int *n[MAXW];
        for (int k = 0; k < w; k++)
            n[k] = &s[k].n;
        double tps = decode_rate(L->eng, w, n);
        if (tps < 0)
            return false;
        ob_engine_stats(L->eng, &s1);
        if (tps > out->tps)
            out->tps = tps;
        out->fp = s[0].fp;
        out->tokens = s[0].n;
        out->drafted = s1.spec_drafted - s0.spec_drafted;
        out->accepted = s1.spec_accepted - s0.spec_accepted;
        out->vsteps = s1.spec_steps - s0.spec_steps;
    }
    return true;
}

/* seconds of the best of 30 forward passes of rows [depth, depth + n) of each of slots
 * 0 .. w - 1 (all wanting logits), their positions before depth filled first. The slots'
 * caches are the engine's; every request of this bench runs without the prompt cache, so
 * nothing reads what this writes. */
static double step_cost(struct ob_local *L, int depth, int w, int n, float *logits)
{
    int32_t tok[MAXW * (MAXK + 1)], pos[MAXW * (MAXK + 1)], seq[MAXW * (MAXK + 1)];
    int32_t want[MAXW * (MAXK + 1)];
    for (int i = 0; i < w * n; i++) {
        tok[i] = (int32_t)(100 + 7 * (i % n));
        pos[i] = depth + i % n;
        seq[i] = i / n;
        want[i] = i;
    }
    double best = 1e9;
    for (int r = 0; r < 30; r++) {
        double t0 = bench_now();
        if (ob_ctx_forward(L->ctx, w * n, tok, pos, seq, want, w * n, logits, NULL))
            return -1;
        double t = bench_now() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

/* seconds of the best of 30 draft calls of k guesses after n tokens for each of w sequences
 * (together, as the engine asks), the drafter's caches holding all but the last (so each
 * call feeds one row of each, then k - 1 guesses) */
static double draft_cost(struct ob_local *L, int n, int w, int k)
{
    int32_t *t = malloc((size_t)n * sizeof *t), out[MAXW][OB_SPEC_MAX];
    struct ob_draft_seq q[MAXW];
    if (!t)
        return -1;
    for (int i = 0; i < n; i++)
        t[i] = (int32_t)(1 + (i * 7919) % 1000);
    double best = 1e9;
    for (int r = 0; r < 31 && best > 0; r++) {
        for (int i = 0; i < w; i++)
            q[i] = (struct ob_draft_seq){.t = t, .n = n, .k = k, .out = out[i]};
        double t0 = bench_now();
        if (ob_drafter_draft_many(L->draft, q, w) < 0)
            best = -1;
        double dt = bench_now() - t0;
        if (r > 0 && dt < best && best > 0)         /* the first call fills the caches */
            best = dt;
    }
    free(t);
    return best;
}

/* positions [0, depth) of slots 0 .. w - 1, a slot at a time in passes of at most 256 rows */
static int fill(struct ob_local *L, int depth, int w)
{
    int32_t tok[256], pos[256], seq[256];
    for (int k = 0; k < w; k++)
        for (int p0 = 0; p0 < depth; p0 += 256) {
            int n = depth - p0 < 256 ? depth - p0 : 256;
            for (int i = 0; i < n; i++) {
                tok[i] = (int32_t)(1 + ((p0 + i) * 7919) % 1000);
                pos[i] = p0 + i;
                seq[i] = k;
            }
            int e = ob_ctx_forward(L->ctx, n, tok, pos, seq, NULL, 0, NULL, NULL);
            if (e)
                return e;
        }
    return 0;
}

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the GGUF model (one with a chat template)"},
    {"draft", 'D', "MODEL", "speculate with this draft model instead of prompt lookup"},
    {"threads", 't', "N", "threads (default 2)"},
    {"widths", 'w', "LIST", "widths (default 1,8)"},
    {"gen", 'n', "N", "max_tokens of every request (default: the records')"},
    {"reps", 'r', "N", "runs per figure; the best is kept (default 3)"},
    {"spec-max", 'k', "K", "drafted tokens per sequence and step, 1-8 (default 8)"},
    {"prompts", 'p', "FILE", "request records, one per kind (default bench/spec-prompts.jsonl)"},
    {"json", 'j', NULL, "JSON lines instead of the table"},
    OB_OPT_ROWS_SHARED,
    {0},
};

int main(int argc, char **argv)
{
    const char *model = NULL, *draft = NULL, *prompts = "bench/spec-prompts.jsonl";
    int threads = 2, widths[4] = {1, 8}, nw = 2, gen = 0, reps = 3, kmax = 8;
    bool json = false;
    struct ob_cmdline cl = {"spec", "spec -m MODEL [options]",
                            "Decode tokens/s with and without speculative decoding.", options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'D': draft = optarg; break;
        case 't': cl.bad = !ob_opt_int("threads", optarg, 1, 256, &threads); break;
        case 'w': cl.bad = !(nw = ob_opt_int_list("widths", optarg, 1, MAXW, widths, 4)); break;
        case 'n': cl.bad = !ob_opt_int("gen", optarg, 2, MAXT, &gen); break;
        case 'r': cl.bad = !ob_opt_int("reps", optarg, 1, 100, &reps); break;
        case 'k': cl.bad = !ob_opt_int("spec-max", optarg, 1, MAXK, &kmax); break;
        case 'p': prompts = optarg; break;
        case 'j': json = true; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (cl.bad || !model) {
        fprintf(stderr, "spec: %s\n", !cl.bad ? "no model (-m MODEL)"
                                       : cli_reason(&cl));
        return 2;
    }
    int wmax = 1;
    for (int i = 0; i < nw; i++)
        wmax = widths[i] > wmax ? widths[i] : wmax;
    struct ob_local_params lp = OB_LOCAL_PARAMS_DEFAULT;
    lp.model = model;
    lp.threads = threads;
    lp.parallel = wmax;
    lp.n_ctx = 2048;
    lp.spec_max = kmax;
    lp.draft_model = draft;
    int mode = draft ? OB_SPEC_DRAFT : OB_SPEC_NGRAM;
    struct ob_local *L;
    int e = ob_local_open(&lp, &L);
    FILE *f = e ? NULL : fopen(prompts, "r");
    if (e || !f) {
        fprintf(stderr, "spec: %s\n", e ? ob_errmsg() : "cannot open the prompts file");
        return 1;
    }
    float *logits = malloc((size_t)wmax * (MAXK + 1) * ob_model_hparams(L->m)->n_vocab *
                           sizeof *logits);
    if (!json)
        printf("# %s%s%s, %d threads, spec-max %d; decode tokens/s (best of %d)\n", model,
               draft ? ", draft " : "", draft ? draft : "", threads, kmax, reps);
    if (!json)
        printf("%-8s %3s %9s %9s %7s %8s %8s %8s %8s %9s %5s\n", "kind", "w", "plain",
               draft ? "draft" : "ngram", "x", "accept", "tok/vst", "vcost", "dcost",
               "ceiling", "same");
    char *line = NULL;
    size_t cap = 0;
    uint64_t ln = 0;
    while (getline(&line, &cap, f) > 0) {
        ln++;
        cJSON *rec = NULL;
        struct ob_req q;
        struct ob_req_defaults d = {.max_tokens = 128};
        if (ob_json_parse(line, strlen(line), 0, &rec) ||
            ob_req_parse(rec, L->m, &d, ln, &q)) {
            fprintf(stderr, "spec: %s:%llu: %s\n", prompts, (unsigned long long)ln, ob_errmsg());
            cJSON_Delete(rec);
            continue;
        }
        if (gen)
            q.max_tokens = gen;
        for (int i = 0; i < nw; i++) {
            /* plain and speculating in turn, so that both see the same spells of load */
            struct fig pl = {0}, sp = {0};
            for (int r = 0; r < reps; r++)
                if (!run(L, &q, widths[i], OB_SPEC_OFF, &pl) ||
                    !run(L, &q, widths[i], mode, &sp)) {
                    fprintf(stderr, "spec: %s\n", ob_errmsg());
                    return 1;
                }
            /* the cost of a verify step of the mean drafted length, at the mean depth */
            double kbar = sp.vsteps ? (double)sp.drafted / (double)sp.vsteps : 0;
            int k = (int)lround(kbar);
            int depth = q.n_ids + pl.tokens / 2;
            double vcost = 1, dcost = 0, ceiling = 1;
            double per = sp.vsteps ? 1.0 + (double)sp.accepted / (double)sp.vsteps : 1;
            if (k >= 1 && !fill(L, depth, widths[i])) {
                double c1 = step_cost(L, depth, widths[i], 1, logits);
                double ck = step_cost(L, depth, widths[i], k + 1, logits);
                double cd = draft ? draft_cost(L, depth, widths[i], k) : 0;
                if (c1 > 0 && ck > 0 && cd >= 0) {
                    vcost = ck / c1;
                    dcost = cd / c1;
                    ceiling = per / (vcost + dcost);
                }
            }
            const char *kind = q.id;
            double acc = sp.drafted ? (double)sp.accepted / (double)sp.drafted : 0;
            if (json)
                printf("{\"kind\":\"%s\",\"width\":%d,\"threads\":%d,\"plain_tps\":%.2f,"
                       "\"spec_tps\":%.2f,\"speedup\":%.3f,\"drafted\":%llu,\"accepted\":%llu,"
                       "\"verify_steps\":%llu,\"tokens_per_verify\":%.2f,\"verify_cost\":%.2f,"
                       "\"draft_cost\":%.2f,\"ceiling\":%.2f,\"mode\":\"%s\",\"same\":%s}\n",
                       kind, widths[i], threads, pl.tps, sp.tps, sp.tps / pl.tps,
                       (unsigned long long)sp.drafted, (unsigned long long)sp.accepted,
                       (unsigned long long)sp.vsteps, per, vcost, dcost, ceiling,
                       draft ? "draft" : "ngram", pl.fp == sp.fp ? "true" : "false");
            else
                printf("%-8s %3d %9.1f %9.1f %6.2fx %7.0f%% %8.2f %8.2f %8.2f %8.2fx %5s\n",
                       kind, widths[i], pl.tps, sp.tps, sp.tps / pl.tps, 100 * acc, per, vcost,
                       dcost, ceiling, pl.fp == sp.fp ? "yes" : "NO");
            fflush(stdout);
        }
        ob_req_free(&q);
        cJSON_Delete(rec);
    }
    free(line);
    fclose(f);
    free(logits);
    ob_local_free(L);
    return 0;
}
