/*
 * 1b-gen — request records in, generation records out.
 *
 *   1b-gen -m MODEL [-d ROUTE] [options] [FILE...]     (standard input when no FILE)
 *
 *   1b-gen --url URL [-m NAME] [options] [FILE...]   (a server route: OpenAI-compatible)
 *
 * Every record is a request (prompt or messages, sampling fields); every output line is its
 * result: the tokens with ids, bytes, float32 log-probabilities with their bit patterns and
 * top alternatives, the text and the finish reason (1b(7), RECORDS). With --parallel N the
 * requests run N at a time through the continuous-batching engine; results still come out in
 * input order (or as they finish with --unordered), and their bits do not depend on N.
 *
 * With --url the same records go to a server (lib/net/oai-client.h has the wire mapping): N
 * requests in flight at once with --parallel N, results still in input order. The result records have the
 * same shape, with the route set to the URL and the float32 values read from the wire's
 * decimals (those that were not exactly float32 are counted per record in nonf32_values and
 * in total on standard error).
 *
 * Exit status (1b(7)): 0 ok, 2 usage, 3 a bad record (every earlier result written) or, with
 * --url, a reply that cannot be used (refused with a 4xx, not a completion, no log-probabilities:
 * written as a record with an "error" field, and the run goes on), 4 route unavailable (with
 * --url: unreachable, or not ready within --wait), 5 other failure (with --url: a 5xx reply or
 * a timeout, also written as an error record).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1b.h"
#include "engine.h"
#include "net/oai-client.h"
#include "record.h"
#include "tok.h"

#define PROG "1b-gen"

enum {
    OPT_PARALLEL = 256, OPT_CHUNK, OPT_CTX, OPT_REPEAT, OPT_KEEP_GOING, OPT_UNORDERED,
    OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_SEED, OPT_TOP_LOGPROBS, OPT_CACHE_SLOTS,
     OPT_URL, OPT_THINKING,
};

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the model (GGUF, or an archive holding one); with --url its name"},
    {"device", 'd', "ROUTE", "route: cpu (default), ref"},
    {"url", OPT_URL, "URL", "a server route: send the requests to URL (OpenAI-compatible)"},
    {"thinking", OPT_THINKING, "on|off", "default \"thinking\" of records without one"},
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
    OB_OPT_ROWS_SERVER,
    OB_OPT_ROWS_SHARED,
    {0},
};

struct opts {
    const char *model, *route, *url;
    int threads, parallel, chunk, ctx, cache_slots, repeat, thinking;
    struct ob_server_opts srv;
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
    const char *name;              /* the input and line it came from, for messages */
    uint64_t line;
    bool done, failed, oom;
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
    bool out_failed;               /* a write to standard output failed (and was reported) */
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
            p->oom = true;
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
    if (f->reason == OB_FINISH_ERROR || p->oom) {
        cJSON_AddStringToObject(p->rec, "error", p->oom ? "out of memory"
                                                 : f->error ? f->error : "failed");
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

/* write finished results: the leading ones (ordered) or all (unordered); a failed request's
 * record carries its error, which is also reported on standard error */
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
        if (p->failed) {
            const cJSON *err = cJSON_GetObjectItemCaseSensitive(p->rec, "error");
            ob_seterr(0, "%s:%llu: id %s: %s", p->name, (unsigned long long)p->line, p->r.id,
                      cJSON_IsString(err) ? err->valuestring : "failed");
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            R->status = OB_EXIT_FAILURE;
        }
        int e = ob_jsonl_write(stdout, p->rec);
        if (e) {
            R->out_failed = true;
            return ob_errprefix(e, "stdout");
        }
        R->written++;
        R->in_flight--;
        *pp = p->next;
        if (!*pp)
            R->tail = pp;
        pending_free(p);
    }
    return 0;
}

static int submit(struct run *R, const cJSON *rec, const struct ob_req *parsed, int repeat,
                  const char *name, uint64_t line)
{
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return ob_seterr(OB_ENOMEM, "out of memory");
    p->tok = ob_model_tok(R->m);
    p->name = name;
    p->line = line;
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
            if (r > 0 && R->o->thinking >= 0 && !cJSON_GetObjectItemCaseSensitive(rec, "thinking"))
                cJSON_AddBoolToObject(rec, "thinking", R->o->thinking);
            if (r < 0 || (e = ob_req_parse(rec, R->m, &R->o->d, ob_jsonl_line(in), &q))) {
                if (r < 0)
                    e = r;
                else
                    ob_errprefix(e, "%s:%llu: id %s", name, (unsigned long long)ob_jsonl_line(in),
                                 q.id ? q.id : "?");
                if (r >= 0)
                    ob_req_free(&q);
                cJSON_Delete(rec);
                if (e == OB_EIO || e == OB_ENOMEM)
                    break;                     /* the caller reports it */
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
                e = 0;                         /* reported: not again by the caller */
                R->bad++;
                if (!R->o->keep_going)
                    *stop = true;
                continue;
            }
            for (int k = 0; k < R->o->repeat && !e; k++)
                e = submit(R, rec, &q, k, name, ob_jsonl_line(in));
            if (e && e != OB_ENOMEM) {         /* refused by the engine: a bad record */
                ob_errprefix(e, "%s:%llu: id %s", name, (unsigned long long)ob_jsonl_line(in),
                             q.id);
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
                e = 0;
                R->bad++;
                if (!R->o->keep_going)
                    *stop = true;
            }
            ob_req_free(&q);
            cJSON_Delete(rec);
            if (e)
                break;
        }
        if (e)
            break;
        if (R->in_flight == 0)
            break;
        /* a failing step ends its requests with an error: each is reported with its record */
        ob_engine_step(R->eng);
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

/* ---- the URL route ---------------------------------------------------------------------------- */

/* one request (one repeat) sent to the server */
struct upending {
    cJSON *req;                    /* the request record, shared by its repeats and the reader
                                      while it sends them: *req_refs holders */
    int *req_refs;
    struct ob_oai_cli_req q;
    int repeat;
    cJSON *rec;                    /* the result, once its reply is in */
    int err;                       /* the reply's OB_E* (0: usable) */
    char msg[512];
    bool done;
    struct upending *next;
};

struct urun {
    struct opts *o;
    const char *base;              /* the route name in records */
    char *endpoint_chat, *endpoint_cmpl;
    struct ob_http *h;
    struct ob_oai_cli_params params;
    struct upending *head, **tail;
    int active, pending;
    long written, bad;
    int64_t nonf32;
    int status;                    /* worst reply status so far (3 or 5) */
    bool unreachable;
    bool out_failed;               /* a write to standard output failed (and was reported) */
};

static void upending_free(struct upending *p)
{
    if (--*p->req_refs == 0) {
        cJSON_Delete(p->req);
        free(p->req_refs);
    }
    ob_oai_cli_req_free(&p->q);
    cJSON_Delete(p->rec);
    free(p);
}

/* write finished results: the leading ones (ordered) or all (unordered); stop at the first
 * request the server could not be reached for */
static int uflush(struct urun *U)
{
    for (struct upending **pp = &U->head; *pp;) {
        struct upending *p = *pp;
        if (!p->done || (p->err == OB_EDEVICE)) {
            if (p->done && p->err == OB_EDEVICE && !U->unreachable) {
                fprintf(stderr, PROG ": %s\n", p->msg);
                U->unreachable = true;
            }
            if (!U->o->unordered || U->unreachable)
                break;
            pp = &p->next;
            continue;
        }
        if (p->err) {
            ob_seterr(0, "%s: id %s: %s", U->base, p->q.id, p->msg);   /* escaped */
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            int st = p->err == OB_EFORMAT ? OB_EXIT_DATA : OB_EXIT_FAILURE;
            if (st > U->status)
                U->status = st;
        }
        int e = ob_jsonl_write(stdout, p->rec);
        if (e) {
            U->out_failed = true;
            return ob_errprefix(e, "stdout");
        }
        U->written++;
        U->pending--;
        *pp = p->next;
        if (!*pp)
            U->tail = pp;
        upending_free(p);
    }
    return 0;
}

/* take one finished transfer (waiting up to wait_s) and turn it into its result record */
static int ucollect(struct urun *U, double wait_s)
{
    struct ob_http_result *r;
    int k = ob_http_next(U->h, wait_s, &r);
    if (k <= 0)
        return k;
    struct upending *p = r->user;
    U->active--;
    p->rec = ob_oai_cli_result(p->req, &p->q, p->repeat, U->base, r, &p->err);
    ob_http_result_free(r);
    if (!p->rec)
        return ob_seterr(OB_ENOMEM, "out of memory");
    if (p->err)
        snprintf(p->msg, sizeof p->msg, "%s", ob_errmsg());
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(p->rec, "nonf32_values");
    if (cJSON_IsRaw(nf))                   /* written by us as a raw integer */
        U->nonf32 += strtoll(nf->valuestring, NULL, 10);
    p->done = true;
    return 1;
}

static int usubmit(struct urun *U, cJSON *req, int *refs, const struct ob_oai_cli_req *q,
                   int repeat)
{
    struct upending *p = calloc(1, sizeof *p);
    if (!p)
        return ob_seterr(OB_ENOMEM, "out of memory");
    p->repeat = repeat;
    p->q = *q;
    p->q.id = strdup(q->id);
    p->q.body = strdup(q->body);
    int e = !p->q.id || !p->q.body ? ob_seterr(OB_ENOMEM, "out of memory")
            : ob_http_start(U->h, q->chat ? U->endpoint_chat : U->endpoint_cmpl, p->q.body, p);
    if (e) {
        /* not yet sharing the request: the caller still owns it */
        ob_oai_cli_req_free(&p->q);
        free(p);
        return e;
    }
    p->req = req;
    p->req_refs = refs;
    (*refs)++;
    *U->tail = p;
    U->tail = &p->next;
    U->active++;
    U->pending++;
    return 0;
}

static int urun_stream(struct urun *U, FILE *f, const char *name, bool *stop)
{
    struct ob_jsonl *in;
    int e = ob_jsonl_open(f, name, &in);
    if (e)
        return e;
    int par = U->o->parallel;
    bool eof = false;
    /* the record being sent: its repeats go out one by one, within the window */
    cJSON *cur = NULL;
    int *cur_refs = NULL, next_rep = 0;
    struct ob_oai_cli_req cur_q;
    memset(&cur_q, 0, sizeof cur_q);
    for (;;) {
        /* keep --parallel requests on the wire, and a bounded number waiting to be written */
        while (!e && !U->unreachable && U->active < par && U->pending < 4 * par) {
            if (cur && next_rep < U->o->repeat) {
                e = usubmit(U, cur, cur_refs, &cur_q, next_rep++);
                continue;
            }
            if (cur) {                         /* every repeat sent: drop the reader's hold */
                if (--*cur_refs == 0) {
                    cJSON_Delete(cur);
                    free(cur_refs);
                }
                ob_oai_cli_req_free(&cur_q);
                cur = NULL;
            }
            if (*stop || eof)
                break;
            cJSON *rec = NULL;
            int r = ob_jsonl_next(in, &rec);
            if (r == 0) {
                eof = true;
                break;
            }
            if (r < 0 || (e = ob_oai_cli_request(rec, &U->params, ob_jsonl_line(in), &cur_q))) {
                if (r < 0)
                    e = r;
                else
                    ob_errprefix(e, "%s:%llu: id %s", name, (unsigned long long)ob_jsonl_line(in),
                                 cur_q.id ? cur_q.id : "?");
                ob_oai_cli_req_free(&cur_q);
                cJSON_Delete(rec);
                if (e == OB_EIO || e == OB_ENOMEM)
                    break;
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
                e = 0;
                U->bad++;
                if (!U->o->keep_going)
                    *stop = true;
                continue;
            }
            if (!(cur_refs = calloc(1, sizeof *cur_refs))) {
                ob_oai_cli_req_free(&cur_q);
                cJSON_Delete(rec);
                e = ob_seterr(OB_ENOMEM, "out of memory");
                break;
            }
            *cur_refs = 1;                     /* the reader's hold, until every repeat is sent */
            cur = rec;
            next_rep = 0;
        }
        if (e)
            break;
        if (U->active > 0) {
            int k = ucollect(U, 1.0);
            if (k < 0) {
                e = k;
                break;
            }
        }
        if ((e = uflush(U)))
            break;
        /* everything sent has been written (or the server is gone), and nothing more comes */
        if (U->unreachable || (U->active == 0 && !cur && (eof || *stop)))
            break;
    }
    if (cur && --*cur_refs == 0) {
        cJSON_Delete(cur);
        free(cur_refs);
    }
    ob_oai_cli_req_free(&cur_q);
    ob_jsonl_close(in);
    return e;
}

static int run_url(struct opts *o, int argc, char **argv, int first)
{
    struct ob_oai_cli *cli;
    int e = ob_oai_cli_open(o->url, &o->srv, &cli);
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        if (e != OB_EUSAGE)
            fclose(stdout);
        return ob_exit_status(e);
    }
    if (cli->note[0])
        fprintf(stderr, PROG ": warning: %s\n", cli->note);
    const char *route = cli->route;
    struct urun U = {.o = o, .base = route, .h = cli->http, .status = OB_EXIT_OK};
    U.tail = &U.head;
    U.params = (struct ob_oai_cli_params){.max_tokens = o->d.max_tokens,
                                          .temperature = o->d.temperature, .seed = o->d.seed,
                                          .top_logprobs = o->d.top_logprobs,
                                          .thinking = o->thinking,
                                          .model = o->model ? o->model : cli->model};
    U.endpoint_chat = ob_oai_cli_url(cli, "/v1/chat/completions");
    U.endpoint_cmpl = ob_oai_cli_url(cli, "/v1/completions");
    if (!U.endpoint_chat || !U.endpoint_cmpl)
        e = ob_seterr(OB_ENOMEM, "out of memory");
    bool stop = false;
    int read_status = 0;
    static char *const dash[] = {"-"};
    char *const *ops = first == argc ? dash : argv + first;
    int n_ops = first == argc ? 1 : argc - first;
    for (int i = 0; i < n_ops && !e && !stop && !U.unreachable; i++) {
        FILE *f;
        int oe = ob_open_input(ops[i], &f);
        if (oe) {                          /* like a bad record: --keep-going goes on */
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            if (ob_exit_status(oe) > read_status)
                read_status = ob_exit_status(oe);
            stop = !o->keep_going;
            continue;
        }
        e = urun_stream(&U, f, ops[i], &stop);
        if (f != stdin)
            fclose(f);
    }
    if (e)
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
    if (U.nonf32)
        fprintf(stderr, PROG ": %s: %lld log-probabilit%s on the wire %s not float32 (rounded "
                "to float32; the wire value is kept as wire_logprob)\n", route,
                (long long)U.nonf32, U.nonf32 == 1 ? "y" : "ies", U.nonf32 == 1 ? "was" : "were");
    int status = U.status;
    if (U.unreachable)
        status = OB_EXIT_DEVICE;
    else if (e)
        status = ob_exit_status(e);
    else if (read_status > status)
        status = read_status;
    if (!U.unreachable && !e && U.bad && status < OB_EXIT_DATA)
        status = OB_EXIT_DATA;
    while (U.head) {
        struct upending *p = U.head;
        U.head = p->next;
        upending_free(p);
    }
    free(U.endpoint_chat);
    free(U.endpoint_cmpl);
    ob_oai_cli_close(cli);
    if (ob_stdout_close()) {
        if (!U.out_failed)
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return OB_EXIT_FAILURE;
    }
    return status;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: " PROG " -m MODEL [options] [FILE...]  (see " PROG " --help)\n");
    return OB_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    ob_blas_env(argc, argv);               /* before getopt permutes argv: may re-exec */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct opts o = {.route = "cpu", .threads = cpus > 0 ? (int)cpus : 1, .parallel = 1,
                     .chunk = 512, .ctx = 0, .repeat = 1, .thinking = -1,
                     .srv = OB_SERVER_OPTS_DEFAULT,
                     .d = {.max_tokens = 128, .temperature = 0, .seed = 0, .top_logprobs = 0}};
    const char *in_process_opt = NULL;     /* the first option given that --url cannot use */
    struct ob_cmdline cl = {PROG, PROG " -m MODEL [options] [FILE...]\n       " PROG
                            " --url URL [-m NAME] [options] [FILE...]",
                            "Generate from request records (JSON lines); write result records.",
                            options};
    int c, iv;
    double dv;
    int64_t lv;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'd': o.route = optarg; in_process_opt = "-d"; break;
        case 't': cl.bad = !ob_opt_int(PROG, "threads", optarg, 1, 1024, &o.threads); in_process_opt = "-t"; break;
        case OPT_PARALLEL: cl.bad = !ob_opt_int(PROG, "parallel", optarg, 1, 256, &o.parallel); break;
        case OPT_CHUNK:
            cl.bad = !ob_opt_int(PROG, "chunk", optarg, 0, 1 << 20, &o.chunk);
            in_process_opt = "--chunk";
            break;
        case OPT_CTX: cl.bad = !ob_opt_int(PROG, "ctx", optarg, 1, 1 << 24, &o.ctx); in_process_opt = "--ctx"; break;
        case OPT_CACHE_SLOTS:
            cl.bad = !ob_opt_int(PROG, "cache-slots", optarg, 0, 256, &o.cache_slots);
            in_process_opt = "--cache-slots";
            break;
        case OPT_URL: o.url = optarg; break;
        case OB_OPT_WAIT:
        case OB_OPT_TIMEOUT:
        case OB_OPT_RETRIES: cl.bad = !ob_opt_server(PROG, c, optarg, &o.srv); break;
        case OPT_THINKING:
            cl.bad = !ob_opt_choice(PROG, "thinking", optarg, ob_opt_words_on_off, &o.thinking);
            break;
        case OPT_REPEAT: cl.bad = !ob_opt_int(PROG, "repeat", optarg, 1, 1 << 20, &o.repeat); break;
        case OPT_KEEP_GOING: o.keep_going = true; break;
        case OPT_UNORDERED: o.unordered = true; break;
        case OPT_MAX_TOKENS: cl.bad = !ob_opt_int(PROG, "max-tokens", optarg, 0, 1 << 24, &o.d.max_tokens); break;
        case OPT_TOP_LOGPROBS: cl.bad = !ob_opt_int(PROG, "top-logprobs", optarg, 0, OB_MAX_TOP, &o.d.top_logprobs); break;
        case OPT_TEMPERATURE:
            if (ob_parse_f64(optarg, &dv) || !(dv >= 0 && dv <= 100)) {
                fprintf(stderr, PROG ": --temperature: '%s' is not a number in [0, 100]\n", optarg);
                cl.bad = true;
            }
            o.d.temperature = (float)dv;
            break;
        case OPT_SEED:
            if (ob_parse_i64(optarg, 0, INT64_MAX, &lv)) {
                fprintf(stderr, PROG ": --seed: %s\n", ob_errmsg());
                cl.bad = true;
            }
            o.d.seed = (uint64_t)lv;
            break;
        }
    }
    if (cl.stop)
        return cl.status;
    (void)iv;
    if (cl.bad)
        return usage_error("%s", "invalid command line");
    if (o.url && in_process_opt)
        return usage_error("%s applies to in-process routes, not to --url", in_process_opt);
    if (o.url)
        return run_url(&o, argc, argv, optind);
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
    int open_status = 0;
    static char *const dash[] = {"-"};
    char *const *ops = optind == argc ? dash : argv + optind;
    int n_ops = optind == argc ? 1 : argc - optind;
    for (int i = 0; i < n_ops && !e && !stop; i++) {
        FILE *f;
        int oe = ob_open_input(ops[i], &f);
        if (oe) {                          /* like a bad record: --keep-going goes on */
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            if (ob_exit_status(oe) > open_status)
                open_status = ob_exit_status(oe);
            stop = !o.keep_going;
            continue;
        }
        e = run_stream(&R, f, ops[i], &stop);
        if (f != stdin)
            fclose(f);
    }
    if (e)
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
    int status = R.status;
    if (e && ob_exit_status(e) > status)
        status = ob_exit_status(e);
    if (open_status > status)
        status = open_status;
    if (R.bad && status < OB_EXIT_DATA)
        status = OB_EXIT_DATA;
    while (R.head) {                       /* results that could not be written */
        struct pending *p = R.head;
        R.head = p->next;
        pending_free(p);
    }
    ob_engine_free(R.eng);
    ob_ctx_free(ctx);
    ob_model_close(R.m);
    if (ob_stdout_close()) {
        if (!R.out_failed)
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return OB_EXIT_FAILURE;
    }
    return status;
}
