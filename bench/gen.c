/*
 * gen.c — end-to-end speed of a route (cpu by default): prefill and decode tokens per second
 * through the batching engine, and aggregate decode speed of several sequences decoded together.
 *
 *   bin/bench/gen -m MODEL [-d ROUTE] [--gpu N] [-t 1,2] [--prompt 512] [--gen 64]
 *                 [--widths 1,2,4,8,16] [--depth N] [--reps 3] [--bandwidth GBPS]
 *                 [--llama-bench PATH] [--json]
 *
 * For each thread count:
 *   prefill    one request with a --prompt-token prompt (ids spread over the vocabulary),
 *              max_tokens 0, whole prompt in one step: prompt tokens / seconds;
 *   decode W   W requests with short distinct prompts decoding --gen tokens together (with
 *              --parallel W): tokens generated after the last of them started, divided by the
 *              time from then to the end; the speed-up over W = 1 says how much of a step's
 *              cost the weights (read once per step for all rows) make;
 *   decode@N   with --depth N: one sequence decoding after a prompt of N tokens (the prompt's
 *              prefill not timed), so that attention reads N keys and values a layer.
 * Each figure is the best of --reps runs (the least disturbed by other load on the machine);
 * llama-bench's too (the best of its -r runs, not its average).
 * With --bandwidth (the device's memory bandwidth in GB/s: 4800 for an H200), each decode
 * figure is also given as a share of the bound that bandwidth sets: a decode step reads every
 * weight matrix once (the embedding only one row a token unless the output is tied to it), so
 * W sequences decoded together are bounded by W x bandwidth / bytes a step.
 * With --llama-bench PATH, llama.cpp's llama-bench runs on the same file in the same run
 * (-p PROMPT -n GEN -t T; with --depth N once more as -p 0 -n GEN -d N) and the ratio
 * 1b / llama.cpp is printed (a model llama.cpp cannot
 * load gives its error instead). Build llama.cpp by hand; never commit it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode-rate.h"
#include "engine.h"
#include "../cmd/cli.h"


struct seqtime {
    double first;                  /* time of the first token */
    int n;                         /* tokens */
    int n_after;                   /* tokens after the barrier time */
};

struct dec {
    struct seqtime *s;
    int w;
    double barrier;                /* when every sequence had its first token */
    int started;
};

static void d_token(void *user, uint64_t h, const struct ob_token_info *t)
{
    struct seqtime *s = user;
    double x = bench_now();
    if (s->n++ == 0)
        s->first = x;
}

static void d_finish(void *user, uint64_t h, const struct ob_finish *f)
{
}

/* the CPU's model name (Linux /proc/cpuinfo), for the table's header */
static const char *cpu_model(void)
{
    static char name[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            const char *v = strchr(line, ':');
            if (v) {
                snprintf(name, sizeof name, "%s", v + 2);
                name[strcspn(name, "\n")] = 0;
            }
            break;
        }
    if (f)
        fclose(f);
    return name;
}

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the GGUF model"},
    {"device", 'd', "ROUTE", "the route: cpu (default), ref, hrx, hrx-sim"},
    {"gpu", 'g', "N", "the route's device (default 0)"},
    {"bandwidth", 'B', "GBPS", "memory bandwidth of the device: decode as a share of its bound"},
    {"threads", 't', "LIST", "thread counts (default 1,2)"},
    {"prompt", 'p', "N", "prefill prompt length (default 512)"},
    {"gen", 'n', "N", "tokens decoded per sequence (default 64)"},
    {"widths", 'w', "LIST", "decode widths (default 1,2,4,8,16)"},
    {"depth", 'D', "N", "also decode one sequence after N tokens of context (default 0: not)"},
    {"reps", 'r', "N", "runs per figure; the best is kept (default 3)"},
    {"llama-bench", 'L', "PATH", "also run this llama-bench on the same file"},
    {"json", 'j', NULL, "one JSON record instead of the table"},
    OB_OPT_ROWS_SHARED,
    {0},
};

/* prefill seconds of one prompt */
static double prefill_once(struct ob_engine *e, const int32_t *prompt, int n)
{
    struct seqtime st = {0};
    struct ob_request r = {.prompt = prompt, .n_prompt = n, .sampling = OB_SAMPLING_GREEDY,
                           .max_tokens = 0, .cache_prompt = false, .on_token = d_token,
                           .on_finish = d_finish, .user = &st};
    double t0 = bench_now();
    if (ob_engine_submit(e, &r, NULL) || ob_engine_run(e))
        return -1;
    return bench_now() - t0;
}

/* aggregate decode tokens per second of w sequences, each after a prompt of np tokens */
static double decode_once(struct ob_engine *e, int w, int gen, int n_vocab, int np)
{
    struct seqtime *st = calloc((size_t)w, sizeof *st);
    int32_t *prompt = malloc((size_t)np * sizeof *prompt);
    for (int k = 0; k < w; k++) {
        for (int i = 0; i < np; i++)
            prompt[i] = (int32_t)((k * 131 + i * 7919 + 17) % n_vocab);
        struct ob_request r = {.prompt = prompt, .n_prompt = np, .sampling = OB_SAMPLING_GREEDY,
                               .max_tokens = gen, .cache_prompt = false, .on_token = d_token,
                               .on_finish = d_finish, .user = &st[k]};
        if (ob_engine_submit(e, &r, NULL)) {
            free(st);
            free(prompt);
            return -1;
        }
    }
    free(prompt);
    const int *n[4096];
    for (int k = 0; k < w; k++)
        n[k] = &st[k].n;
    double tps = decode_rate(e, w, n);
    free(st);
    return tps;
}

/* llama-bench's tokens/s for a prompt (p) or generation (n) test after d tokens of context,
 * the best of its -r runs; -1 if it failed */
static void llama_bench(const char *exe, const char *model, int threads, int p, int n, int d,
                        int reps, double *pp, double *tg)
{
    char cmd[4096];
    *pp = *tg = -1;
    snprintf(cmd, sizeof cmd, "'%s' -m '%s' -p %d -n %d -d %d -t %d -r %d -o jsonl 2>/dev/null",
             exe, model, p, n, d, threads, reps);
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    char line[16384];
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *np = cJSON_GetObjectItemCaseSensitive(j, "n_prompt");
        const cJSON *ng = cJSON_GetObjectItemCaseSensitive(j, "n_gen");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "avg_ts");
        const cJSON *sm = cJSON_GetObjectItemCaseSensitive(j, "samples_ts"), *x;
        if (cJSON_IsNumber(np) && cJSON_IsNumber(ng) && cJSON_IsNumber(ts)) {
            /* the best run, as 1b's figures are the best of --reps (avg_ts where the samples
             * are absent) */
            double best = cJSON_IsArray(sm) ? -1 : ts->valuedouble;
            cJSON_ArrayForEach(x, sm)
                if (cJSON_IsNumber(x) && x->valuedouble > best)
                    best = x->valuedouble;
            if (np->valueint > 0 && ng->valueint == 0)
                *pp = best;
            if (ng->valueint > 0 && np->valueint == 0)
                *tg = best;
        }
        cJSON_Delete(j);
    }
    pclose(f);
}

/* bytes of weights a decode step reads: every tensor but the token embedding, which is read
 * one row a token unless the output projection is tied to it */
static double step_bytes(const struct ob_model *m)
{
    const struct ob_gguf *g = ob_model_gguf(m);
    double b = 0;
    bool tied = ob_model_hparams(m)->tied_output;
    for (uint64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
        const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
        if (tied || strcmp(t->name, "token_embd.weight") != 0)
            b += (double)t->nbytes;
    }
    return b;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *lb = NULL, *route = "cpu";
    int gpu = 0;
    double bw = 0;
    int threads[8] = {1, 2}, nt = 2, widths[16] = {1, 2, 4, 8, 16}, nw = 5;
    int plen = 512, gen = 64, reps = 3, depth = 0;
    bool json = false;
    struct ob_cmdline cl = {"gen", "gen -m MODEL [options]",
                            "Prefill and decode tokens/s of a route (optionally beside "
                            "llama.cpp's llama-bench).",
                            options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'd': route = optarg; break;
        case 'g': cl.bad = !ob_opt_int("gpu", optarg, 0, 255, &gpu); break;
        case 'B': cl.bad = !ob_opt_num("bandwidth", optarg, 0.001, 1e6, &bw); break;
        case 't': cl.bad = !(nt = ob_opt_int_list("threads", optarg, 1, 256, threads, 8)); break;
        case 'w': cl.bad = !(nw = ob_opt_int_list("widths", optarg, 1, 4096, widths, 16)); break;
        case 'p': cl.bad = !ob_opt_int("prompt", optarg, 1, 1 << 16, &plen); break;
        case 'n': cl.bad = !ob_opt_int("gen", optarg, 2, 1 << 16, &gen); break;
        case 'r': cl.bad = !ob_opt_int("reps", optarg, 1, 1000, &reps); break;
        case 'D': cl.bad = !ob_opt_int("depth", optarg, 0, 1 << 20, &depth); break;
        case 'L': lb = optarg; break;
        case 'j': json = true; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (!cl.bad && (!model || optind < argc)) {
        fprintf(stderr, "gen: %s\n", model ? "no operands are taken" : "no model (-m MODEL)");
        cl.bad = true;
    }
    if (cl.bad) {
        if (cl.msg[0])
            cli_bad(&cl);
        fprintf(stderr, "try 'gen --help'\n");
        return OB_EXIT_USAGE;
    }
    struct ob_model *m;
    if (ob_model_open(model, &m)) {
        fprintf(stderr, "gen: %s\n", ob_errmsg());
        return 3;
    }
    int n_vocab = (int)ob_model_hparams(m)->n_vocab, maxw = 1;
    for (int i = 0; i < nw; i++)
        maxw = widths[i] > maxw ? widths[i] : maxw;
    int32_t *prompt = malloc((size_t)plen * sizeof *prompt);
    for (int i = 0; i < plen; i++)
        prompt[i] = (int32_t)((i * 7919 + 13) % n_vocab);
    double sb = step_bytes(m);
    if (!json) {
        printf("model %s, route %s, %.1f MB of weights a decode step\ncpu %s\n", model, route,
               sb / 1e6, cpu_model());
        printf("%-8s %10s %10s", "threads", "prefill", "decode");
        if (depth)
            printf(" %9s@%d", "decode", depth);
        printf("  %s%s\n", "aggregate decode tok/s at widths (speed-up over width 1)",
               bw > 0 ? "[% of the bandwidth bound]" : "");
    }
    for (int ti = 0; ti < nt; ti++) {
        struct ob_ctx *ctx;
        struct ob_engine *e;
        int nctx = (plen > depth ? plen : depth) + gen + 16;
        struct ob_ctx_params cp = {route, threads[ti], maxw, nctx, 512, {.index = gpu}};
        struct ob_engine_params ep = {1, 0};
        int err;
        if ((err = ob_ctx_new(m, &cp, &ctx)) || (err = ob_engine_new(ctx, &ep, &e))) {
            fprintf(stderr, "gen: %s\n", ob_errmsg());
            return ob_exit_status(err);
        }
        double pre = 0, dec[16] = {0};
        for (int r = 0; r < reps; r++) {
            double t = prefill_once(e, prompt, plen);
            if (t > 0 && (pre == 0 || plen / t > pre))
                pre = plen / t;
        }
        ob_engine_free(e);
        for (int wi = 0; wi < nw; wi++) {
            struct ob_engine_params ew = {widths[wi], 0};
            if (ob_engine_new(ctx, &ew, &e))
                return 5;
            for (int r = 0; r < reps; r++) {
                double v = decode_once(e, widths[wi], gen, n_vocab, 8);
                if (v > dec[wi])
                    dec[wi] = v;
            }
            ob_engine_free(e);
        }
        double decd = 0;
        if (depth) {
            struct ob_engine_params e1 = {1, 0};
            if (ob_engine_new(ctx, &e1, &e))
                return 5;
            for (int r = 0; r < reps; r++) {
                double v = decode_once(e, 1, gen, n_vocab, depth);
                if (v > decd)
                    decd = v;
            }
            ob_engine_free(e);
        }
        double lpp = -1, ltg = -1, ltgd = -1, unused;
        if (lb) {
            llama_bench(lb, model, threads[ti], plen, gen, 0, reps, &lpp, &ltg);
            if (depth)
                llama_bench(lb, model, threads[ti], 0, gen, depth, reps, &unused, &ltgd);
        }
        if (json) {
            printf("{\"model\":\"%s\",\"route\":\"%s\",\"threads\":%d,\"isa\":\"%s\","
                   "\"step_bytes\":%.0f,\"prefill_tps\":%.2f", model, route, threads[ti],
                   ob_ctx_device(ctx), sb, pre);
            for (int wi = 0; wi < nw; wi++) {
                printf(",\"decode_tps_w%d\":%.2f", widths[wi], dec[wi]);
                if (bw > 0)
                    printf(",\"bound_pct_w%d\":%.2f", widths[wi],
                           100.0 * dec[wi] * sb / (widths[wi] * bw * 1e9));
            }
            if (depth)
                printf(",\"depth\":%d,\"decode_depth_tps\":%.2f", depth, decd);
            if (lb)
                printf(",\"llama_prefill_tps\":%.2f,\"llama_decode_tps\":%.2f", lpp, ltg);
            if (lb && depth)
                printf(",\"llama_decode_depth_tps\":%.2f", ltgd);
            printf("}\n");
        } else {
            char lab[32];
            snprintf(lab, sizeof lab, "%d %s", threads[ti], ob_ctx_device(ctx));
            printf("%-8s %10.1f %10.1f ", lab, pre, dec[0]);
            if (depth)
                printf("%16.1f ", decd);
            for (int wi = 0; wi < nw; wi++) {
                printf(" w%d %.1f (x%.2f)", widths[wi], dec[wi], dec[0] > 0 ? dec[wi] / dec[0] : 0);
                if (bw > 0)
                    printf("[%.1f%%]", 100.0 * dec[wi] * sb / (widths[wi] * bw * 1e9));
            }
            printf("\n");
            if (lb) {
                if (lpp > 0 && ltg > 0) {
                    printf("%-8s %10.1f %10.1f ", "llama", lpp, ltg);
                    if (depth)
                        printf("%16.1f ", ltgd);
                    printf("  llama-bench (this file); 1b/llama.cpp: prefill x%.2f, decode x%.2f",
                           pre / lpp, dec[0] / ltg);
                    if (depth && ltgd > 0)
                        printf(", decode@%d x%.2f", depth, decd / ltgd);
                    printf("\n");
                } else
                    printf("%-8s llama-bench could not run on this file\n", "llama");
            }
        }
        fflush(stdout);
        ob_ctx_free(ctx);
    }
    free(prompt);
    ob_model_close(m);
    return 0;
}
