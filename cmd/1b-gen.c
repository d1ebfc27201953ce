/*
 * 1b-gen — request records in, generation records out.
 *
 *   1b-gen -m MODEL [-d ROUTE] [options] [FILE...]     (standard input when no FILE)
 *
 * Every record is a request (prompt or messages, sampling fields); every output line is its
 * result: the tokens with ids, bytes, float32 log-probabilities with their bit patterns and
 * top alternatives, the text and the finish reason (1b(7), RECORDS). With --parallel N the
 * requests run N at a time through the continuous-batching engine; results still come out in
 * input order (or as they finish with --unordered), and their bits do not depend on N.
 *
 * Exit status (1b(7)): 0 ok, 2 usage, 3 a bad record (every earlier result written),
 * 4 route unavailable, 5 other failure.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1b.h"
#include "engine.h"
#include "record.h"
#include "tok.h"

#define PROG "1b-gen"

enum {
    OPT_PARALLEL = 256, OPT_CHUNK, OPT_CTX, OPT_REPEAT, OPT_KEEP_GOING, OPT_UNORDERED,
    OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_SEED, OPT_TOP_LOGPROBS, OPT_CACHE_SLOTS, OPT_LIST,
    OPT_VERSION,
};

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the model (GGUF, or an archive holding one)"},
    {"device", 'd', "ROUTE", "route: cpu (default), ref"},
    {"threads", 't', "N", "threads (default: the CPUs available)"},
    {"parallel", OPT_PARALLEL, "N", "requests decoded together (default 1)"},
    {"chunk", OPT_CHUNK, "N", "prompt tokens prefilled per step; 0 = whole prompts (default 512)"},
    {"ctx", OPT_CTX, "N", "context length per sequence (default 4096, or the model's if less)"},
    {"cache-slots", OPT_CACHE_SLOTS, "N", "extra KV slots kept as prompt cache (default 0)"},
    {"repeat", OPT_REPEAT, "N", "run every request N times (results numbered by \"repeat\")"},
    {"keep-going", OPT_KEEP_GOING, NULL, "skip bad records instead of stopping (exit 3 at the end)"},
    {"unordered", OPT_UNORDERED, NULL, "write results as they finish, not in input order"},
    {"max-tokens", OPT_MAX_TOKENS, "N", "default max_tokens of records without one (default 128)"},
    {"temperature", OPT_TEMPERATURE, "T", "default temperature (default 0: greedy)"},
    {"seed", OPT_SEED, "N", "default seed (default 0)"},
    {"top-logprobs", OPT_TOP_LOGPROBS, "N", "default top_logprobs, 0-20 (default 0)"},
    {"help", 'h', NULL, "show this help"},
    {"version", OPT_VERSION, NULL, "show the version"},
    {"list-options", OPT_LIST, NULL, "list options for shell completion", .hidden = true},
    {0},
};

struct opts {
    const char *model, *route;
    int threads, parallel, chunk, ctx, cache_slots, repeat;
    bool keep_going, unordered;
    struct ob_req_defaults d;
};

/* one request (one repeat) on its way through the engine */
struct pending {
    cJSON *rec;                    /* the result being built */
    struct ob_req r;
    const struct ob_tok *tok;
    char *text;
    size_t text_len, text_cap;
    bool done, failed;
    struct pending *next;
};

struct run {
    struct opts *o;
    struct ob_model *m;
    struct ob_engine *eng;
    const char *sha, *route;
    struct pending *head, **tail;  /* in input order */
    int in_flight;
    long written, bad, gen_tokens;
    int status;
};

static void on_token(void *user, uint64_t h, const struct ob_token_info *ti)
{
    struct pending *p = user;
    cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(p->rec, "tokens"),
                         ob_token_json(p->tok, ti, p->r.logprobs));
    const char *b;
    size_t n;
    ob_tok_piece(p->tok, ti->id, &b, &n);
    if (p->text_len + n + 1 > p->text_cap) {
        size_t cap = p->text_cap ? 2 * p->text_cap : 256;
        while (cap < p->text_len + n + 1)
            cap *= 2;
        char *t = realloc(p->text, cap);
        if (!t) {
            p->failed = true;
            return;
        }
        p->text = t;
        p->text_cap = cap;
    }
    memcpy(p->text + p->text_len, b, n);
    p->text_len += n;
}

static void on_finish(void *user, uint64_t h, const struct ob_finish *f)
{
    struct pending *p = user;
    if (f->reason == OB_FINISH_ERROR) {
        cJSON_AddStringToObject(p->rec, "error", f->error ? f->error : "failed");
        p->failed = true;
    }
    ob_result_finish(p->rec, p->text, f->text_len, ob_finish_name(f->reason), f->n_gen,
                     f->n_cached, f->prefill_s, f->decode_s, f->n_prompt - f->n_cached);
    p->done = true;
}

static void pending_free(struct pending *p)
{
    cJSON_Delete(p->rec);
    ob_req_free(&p->r);
    free(p->text);
    free(p);
}

/* write finished results: the leading ones (ordered) or all (unordered) */
static int flush(struct run *R)
{
    for (struct pending **pp = &R->head; *pp;) {
        struct pending *p = *pp;
        if (!p->done) {
            if (!R->o->unordered)
                break;
            pp = &p->next;
            continue;
        }
        int e = ob_jsonl_write(stdout, p->rec);
        if (e)
            return e;
        if (p->failed)
            R->status = OB_EXIT_FAILURE;
        R->written++;
        R->in_flight--;
        *pp = p->next;
        if (!*pp)
            R->tail = pp;
        pending_free(p);
    }
    return 0;
}

static int submit(struct run *R, const cJSON *rec, const struct ob_req *parsed, int repeat)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return ob_seterr(OB_ENOMEM, "out of memory");
    p->tok = ob_model_tok(R->m);
    /* each repeat owns a copy of the parsed request */
    p->r = *parsed;
    p->r.id = strdup(parsed->id);
    p->r.ids = malloc((size_t)parsed->n_ids * sizeof *p->r.ids);
    p->r.stop = parsed->n_stop ? calloc((size_t)parsed->n_stop, sizeof(char *)) : NULL;
    if (!p->r.id || !p->r.ids || (parsed->n_stop && !p->r.stop)) {
        ob_req_free(&p->r);
        free(p);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    memcpy(p->r.ids, parsed->ids, (size_t)parsed->n_ids * sizeof *p->r.ids);
    for (int i = 0; i < parsed->n_stop; i++)
        p->r.stop[i] = strdup(parsed->stop[i]);
    p->rec = ob_result_begin(rec, &p->r, repeat, R->route, ob_model_name(R->m), R->sha);
    struct ob_request q = {
        .prompt = p->r.ids, .n_prompt = p->r.n_ids, .sampling = p->r.s,
        .max_tokens = p->r.max_tokens, .top_logprobs = p->r.logprobs ? p->r.top_logprobs : 0,
        .cache_prompt = p->r.cache_prompt, .stop = p->r.stop, .n_stop = p->r.n_stop,
        .stop_ids = p->r.stop_ids, .n_stop_ids = p->r.n_stop_ids,
        .on_token = on_token, .on_finish = on_finish, .user = p,
    };
    int e = ob_engine_submit(R->eng, &q, NULL);
    if (e) {
        pending_free(p);
        return e;
    }
    *R->tail = p;
    R->tail = &p->next;
    R->in_flight++;
    return 0;
}

static void progress(const struct run *R)
{
    struct ob_engine_stats s;
    ob_engine_stats(R->eng, &s);
    fprintf(stderr, "\r" PROG ": %ld written, %d running, %d queued, %llu tokens   ", R->written,
            s.live, s.queued, (unsigned long long)s.tokens_generated);
}

static int run_stream(struct run *R, FILE *f, const char *name, bool *stop)
{
    struct ob_jsonl *in;
    int e = ob_jsonl_open(f, name, &in);
    if (e)
        return e;
    bool tty = isatty(2);
    int limit = 2 * R->o->parallel;
    for (;;) {
        while (!*stop && R->in_flight < limit) {
            cJSON *rec = NULL;
            int r = ob_jsonl_next(in, &rec);
            if (r == 0)
                break;
            struct ob_req q;
            if (r < 0 || (e = ob_req_parse(rec, R->m, &R->o->d, ob_jsonl_line(in), &q))) {
                if (r < 0)
                    e = r;
                else
                    ob_errprefix(e, "%s:%llu: id %s", name, (unsigned long long)ob_jsonl_line(in),
                                 q.id ? q.id : "?");
                if (r >= 0)
                    ob_req_free(&q);
                cJSON_Delete(rec);
                if (e == OB_EIO || e == OB_ENOMEM) {
                    ob_jsonl_close(in);
                    return e;
                }
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
                R->bad++;
                if (!R->o->keep_going)
                    *stop = true;
                continue;
            }
            for (int k = 0; k < R->o->repeat && !e; k++)
                e = submit(R, rec, &q, k);
            ob_req_free(&q);
            cJSON_Delete(rec);
            if (e) {
                fprintf(stderr, PROG ": %s:%llu: %s\n", name,
                        (unsigned long long)ob_jsonl_line(in), ob_errmsg());
                R->bad++;
                if (!R->o->keep_going)
                    *stop = true;
            }
        }
        if (R->in_flight == 0)
            break;
        if ((e = ob_engine_step(R->eng)) < 0)
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
        if ((e = flush(R)))
            break;
        if (tty)
            progress(R);
        if (*stop && R->in_flight == 0)
            break;
    }
    if (tty)
        fputc('\n', stderr);
    ob_jsonl_close(in);
    return e;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: " PROG " -m MODEL [options] [FILE...]  (see " PROG " --help)\n");
    return OB_EXIT_USAGE;
}

static int int_opt(const char *name, const char *arg, int64_t lo, int64_t hi, int *out)
{
    int64_t v;
    if (ob_parse_i64(arg, lo, hi, &v)) {
        fprintf(stderr, PROG ": --%s: %s\n", name, ob_errmsg());
        return 1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    ob_blas_env(argc, argv);               /* before getopt permutes argv: may re-exec */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct opts o = {.route = "cpu", .threads = cpus > 0 ? (int)cpus : 1, .parallel = 1,
                     .chunk = 512, .ctx = 0, .repeat = 1,
                     .d = {.max_tokens = 128, .temperature = 0, .seed = 0, .top_logprobs = 0}};
    struct option *longs;
    char *shorts;
    if (ob_opt_build(options, &longs, &shorts))
        return OB_EXIT_FAILURE;
    int c, bad = 0, iv;
    double dv;
    int64_t lv;
    opterr = 0;
    while (!bad && (c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'd': o.route = optarg; break;
        case 't': bad = int_opt("threads", optarg, 1, 1024, &o.threads); break;
        case OPT_PARALLEL: bad = int_opt("parallel", optarg, 1, 256, &o.parallel); break;
        case OPT_CHUNK: bad = int_opt("chunk", optarg, 0, 1 << 20, &o.chunk); break;
        case OPT_CTX: bad = int_opt("ctx", optarg, 1, 1 << 24, &o.ctx); break;
        case OPT_CACHE_SLOTS: bad = int_opt("cache-slots", optarg, 0, 256, &o.cache_slots); break;
        case OPT_REPEAT: bad = int_opt("repeat", optarg, 1, 1 << 20, &o.repeat); break;
        case OPT_KEEP_GOING: o.keep_going = true; break;
        case OPT_UNORDERED: o.unordered = true; break;
        case OPT_MAX_TOKENS: bad = int_opt("max-tokens", optarg, 0, 1 << 24, &o.d.max_tokens); break;
        case OPT_TOP_LOGPROBS: bad = int_opt("top-logprobs", optarg, 0, OB_MAX_TOP, &o.d.top_logprobs); break;
        case OPT_TEMPERATURE:
            if (ob_parse_f64(optarg, &dv) || !(dv >= 0 && dv <= 100)) {
                fprintf(stderr, PROG ": --temperature: '%s' is not a number in [0, 100]\n", optarg);
                bad = 1;
            }
            o.d.temperature = (float)dv;
            break;
        case OPT_SEED:
            if (ob_parse_i64(optarg, 0, INT64_MAX, &lv)) {
                fprintf(stderr, PROG ": --seed: %s\n", ob_errmsg());
                bad = 1;
            }
            o.d.seed = (uint64_t)lv;
            break;
        case 'h':
            ob_opt_help(stdout, PROG " -m MODEL [options] [FILE...]",
                        "Generate from request records (JSON lines); write result records.",
                        options);
            return 0;
        case OPT_VERSION: puts(PROG " " OB_VERSION); return 0;
        case OPT_LIST: ob_opt_list(stdout, options); return 0;
        case ':':
            fprintf(stderr, PROG ": option '%s' needs an argument\n", argv[optind - 1]);
            bad = 1;
            break;
        default:
            fprintf(stderr, PROG ": unknown option '%s'\n", argv[optind - 1]);
            bad = 1;
        }
    }
    free(longs);
    free(shorts);
    (void)iv;
    if (bad)
        return usage_error("%s", "invalid command line");
    if (!o.model)
        return usage_error("%s", "no model (-m MODEL)");

    struct run R = {.o = &o, .route = o.route, .status = OB_EXIT_OK};
    R.tail = &R.head;
    struct ob_ctx *ctx = NULL;
    int e = ob_model_open(o.model, &R.m);
    if (!e) {
        const struct ob_hparams *hp = ob_model_hparams(R.m);
        if (!o.ctx)
            o.ctx = hp->n_ctx_train && hp->n_ctx_train < 4096 ? (int)hp->n_ctx_train : 4096;
        struct ob_ctx_params cp = {.route = o.route, .n_threads = o.threads,
                                   .n_slots = o.parallel + o.cache_slots, .n_ctx = o.ctx,
                                   .max_batch = 512};
        e = ob_ctx_new(R.m, &cp, &ctx);
    }
    if (!e)
        e = ob_model_sha256(R.m, &R.sha);
    struct ob_engine_params ep = {.parallel = o.parallel, .chunk = o.chunk};
    if (!e)
        e = ob_engine_new(ctx, &ep, &R.eng);
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        ob_ctx_free(ctx);
        ob_model_close(R.m);
        return ob_exit_status(e);
    }
    R.route = ob_ctx_route(ctx);

    bool stop = false;
    if (optind == argc) {
        e = run_stream(&R, stdin, "-", &stop);
    } else {
        for (int i = optind; i < argc && !e && !stop; i++) {
            FILE *f = strcmp(argv[i], "-") == 0 ? stdin : fopen(argv[i], "r");
            if (!f) {
                fprintf(stderr, PROG ": %s: cannot open\n", argv[i]);
                e = OB_EIO;
                R.status = OB_EXIT_DATA;
                break;
            }
            e = run_stream(&R, f, argv[i], &stop);
            if (f != stdin)
                fclose(f);
        }
    }
    if (e && e != OB_EIO)
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
    int status = R.status;
    if (e)
        status = status ? status : ob_exit_status(e);
    else if (R.bad)
        status = OB_EXIT_DATA;
    while (R.head) {                       /* results that could not be written */
        struct pending *p = R.head;
        R.head = p->next;
        pending_free(p);
    }
    ob_engine_free(R.eng);
    ob_ctx_free(ctx);
    ob_model_close(R.m);
    if (fclose(stdout) != 0) {
        perror(PROG ": stdout");
        return OB_EXIT_FAILURE;
    }
    return status;
}
