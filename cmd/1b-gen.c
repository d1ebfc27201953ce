/*
 * 1b-gen — request records in, generation records out.
 *
 *   1b-gen -m MODEL [-d ROUTE] [options] [FILE...]     (standard input when no FILE)
 *
 *   1b-gen -d URL [-m NAME] [options] [FILE...]     (a server route: OpenAI-compatible)
 *
 * Every record is a request (prompt or messages, sampling fields); every output line is its
 * result: the tokens with ids, bytes, float32 log-probabilities with their bit patterns and
 * top alternatives, the text and the finish reason (1b(7), RECORDS). With --parallel N the
 * requests run N at a time through the continuous-batching engine; results still come out in
 * input order (or as they finish with --unordered), and their bits do not depend on N.
 *
 * With -d URL (or --url URL) the same records go to a server (lib/net/oai-client.h has the
 * wire mapping): N requests in flight at once with --parallel N, results still in input order.
 * The result records are written by the same writer (ob_result_record), with the route set to
 * the URL and the float32 values read from the wire's decimals (those that were not exactly
 * float32 are counted per record in nonf32_values and in total on standard error).
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
#include "local.h"
#include "net/oai-client.h"
#include "record.h"
#include "sb.h"
#include "tok.h"
#include "cli.h"

#define PROG "1b-gen"

enum {
    OPT_PARALLEL = 256, OPT_REPEAT, OPT_KEEP_GOING, OPT_UNORDERED,
    OPT_MAX_TOKENS, OPT_TEMPERATURE, OPT_SEED, OPT_TOP_LOGPROBS, OPT_THINKING, OPT_VERBOSE,
};

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the model (GGUF, or an archive holding one); with a URL its name"},
    OB_OPT_ROWS_ROUTE,
    {"thinking", OPT_THINKING, "on|off", "default \"thinking\" of records without one"},
    {"parallel", OPT_PARALLEL, "N", "requests decoded together (default 1)"},
    OB_OPT_ROW_CHUNK,
    OB_OPT_ROW_CTX,
    OB_OPT_ROW_CACHE_SLOTS,
    OB_OPT_ROWS_SPEC,
    {"verbose", OPT_VERBOSE, NULL, "the engine's counters on stderr at the end (speculation's too)"},
    {"repeat", OPT_REPEAT, "N", "run every request N times (results numbered by \"repeat\")"},
    {"keep-going", OPT_KEEP_GOING, NULL, "skip bad records instead of stopping (exit 3 at the end)"},
    {"unordered", OPT_UNORDERED, NULL, "write results as they finish, not in input order"},
    {"max-tokens", OPT_MAX_TOKENS, "N", "default max_tokens of records without one (default 128)"},
    {"temperature", OPT_TEMPERATURE, "T", "default temperature (default 0: greedy)"},
    {"seed", OPT_SEED, "N", "default seed (default 0)"},
    {"top-logprobs", OPT_TOP_LOGPROBS, "N", "default top_logprobs, 0-20 (default 0)"},
    OB_OPT_ROWS_SERVER,
    OB_OPT_ROW_MAX_LINE,
    OB_OPT_ROWS_SHARED,
    {0},
};

struct opts {
    const char *model;
    struct ob_route_opts r;        /* the route (in process: its model and parallel are above) */
    int parallel, repeat, thinking;
    bool keep_going, unordered, verbose;
    struct ob_req_defaults d;
};

/* ---- results, written in input order (both routes) ---------------------------------------- */

/* one result on its way out: the first member of a request's state on either route */
struct out {
    cJSON *rec;                    /* the result record; NULL when done without one (no memory
                                      for it: status says so) */
    bool done;                     /* rec is complete */
    bool fatal;                    /* done, but the route is gone (an unreachable server): why
                                      is reported once, and neither it nor anything after it
                                      is written */
    int status;                    /* a failed request: the exit status it calls for */
    char *why;                     /* a failed request: the message for standard error */
    struct out *next;
};

struct outq {
    struct out *head, **tail;      /* in input order */
    int pending;                   /* results queued and not yet written */
    bool unordered;
    long written;
    int status;                    /* the worst status of the results written */
    bool halted;                   /* a fatal result was reached */
    bool out_failed;               /* a write to standard output failed (and was reported) */
    void (*release)(struct out *);
};

static void out_add(struct outq *q, struct out *o)
{
    *q->tail = o;
    q->tail = &o->next;
    q->pending++;
}

/* the request failed: the record is written (it carries the error) and `why` reported */
static void out_fail(struct out *o, int status, bool fatal, const char *why)
{
    o->status = status;
    o->fatal = fatal;
    o->why = strdup(why);
}

/* write finished results: the leading ones (ordered) or every finished one (unordered) */
static int out_flush(struct outq *q)
{
    for (struct out **pp = &q->head; *pp;) {
        struct out *p = *pp;
        if (!p->done || p->fatal) {
            if (p->done && !q->halted) {
                fprintf(stderr, PROG ": %s\n", p->why ? p->why : "out of memory");
                q->halted = true;
            }
            if (!q->unordered || q->halted)
                break;
            pp = &p->next;
            continue;
        }
        if (p->status) {
            fprintf(stderr, PROG ": %s\n", p->why ? p->why : "out of memory");
            if (p->status > q->status)
                q->status = p->status;
        }
        int e = p->rec ? ob_jsonl_write(stdout, p->rec) : 0;   /* none: no memory for it */
        if (e) {
            q->out_failed = true;
            return ob_errprefix(e, "stdout");
        }
        q->written += p->rec != NULL;
        q->pending--;
        *pp = p->next;
        if (!*pp)
            q->tail = pp;
        q->release(p);
    }
    return 0;
}

/* results that could not be written */
static void out_drop(struct outq *q)
{
    while (q->head) {
        struct out *p = q->head;
        q->head = p->next;
        q->release(p);
    }
}

/* The exit status after the inputs (1b(7)): the worst of the results written, of the operands
 * that could not be opened or read, of bad records (3) and of the error that ended the run,
 * which is reported here; results still queued are dropped. */
static int end_status(struct outq *q, int e, int unopened, int read_failed, long bad)
{
    if (e)
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
    int status = q->status;
    if (e && ob_exit_status(e) > status)
        status = ob_exit_status(e);
    if (unopened > status)
        status = unopened;
    if (read_failed > status)
        status = read_failed;
    if (bad && status < OB_EXIT_DATA)
        status = OB_EXIT_DATA;
    out_drop(q);
    return status;
}

/* standard output closed: a write that failed there is a failure (exit 5) */
static int close_stdout(const struct outq *q, int status)
{
    if (ob_stdout_close()) {
        if (!q->out_failed)
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return OB_EXIT_FAILURE;
    }
    return status;
}

/* ---- reading requests (both routes) ----------------------------------------------------------- */

/* an operand that could not be opened (ob_errmsg() says why): reported; it counts in the exit
 * status as a bad record does, and --keep-going goes on to the next (ob_each_input) */
static int unopened(void)
{
    fprintf(stderr, PROG ": %s\n", ob_errmsg());
    return 0;
}

/* a record that cannot be run (ob_errmsg() says why): reported and counted (exit 3); reading
 * stops at it unless --keep-going */
static void bad_record(const struct opts *o, long *bad, bool *stop)
{
    fprintf(stderr, PROG ": %s\n", ob_errmsg());
    ++*bad;
    *stop = !o->keep_going;
}

/* the input could not be read on (a failed read, no memory for a line; ob_errmsg() says which):
 * reported at once; no more records are read, those read are finished and written, and the
 * run ends with its status (5), never as if the input had ended */
static void read_failed(int e, int *failed, bool *stop)
{
    fprintf(stderr, PROG ": %s\n", ob_errmsg());
    *failed = ob_exit_status(e);
    *stop = true;
}

/* ---- in process --------------------------------------------------------------------------- */

/* one request (one repeat) on its way through the engine */
struct pending {
    struct out o;                  /* first: the result being built */
    struct ob_req r;
    const struct ob_tok *tok;
    cJSON *tokens;                 /* the result's tokens, so far */
    struct ob_sb text;             /* the generated bytes */
    const char *name;              /* the input and line it came from, for messages */
    uint64_t line;
    struct run *R;
    cJSON *req;                    /* the request record, until the result is written */
    int repeat;
    bool oom;
};

struct run {
    struct opts *o;
    struct ob_model *m;
    struct ob_engine *eng;
    const char *sha, *route, *model;
    struct outq q;
    long bad;
    bool stop;                     /* read no more records */
    int read_failed;               /* the input could not be read on: its exit status */
};

static void on_token(void *user, uint64_t h, const struct ob_token_info *ti)
{
    struct pending *p = user;
    cJSON_AddItemToArray(p->tokens, ob_token_json(p->tok, ti, p->r.logprobs));
    const char *b;
    size_t n;
    ob_tok_piece(p->tok, ti->id, &b, &n);
    ob_sb_add(&p->text, b, n);
    p->oom |= p->text.oom;
}

static void on_finish(void *user, uint64_t h, const struct ob_finish *f)
{
    struct pending *p = user;
    struct ob_result res = {
        .id = p->r.id, .repeat = p->repeat, .route = p->R->route, .model = p->R->model,
        .sha256 = p->R->sha, .prompt_tokens = p->r.n_ids, .prompt_ids = p->r.ids,
        .n_prompt_ids = p->r.n_ids, .tokens = p->tokens, .text = p->text.p,
        .text_len = f->text_len, .finish_reason = ob_finish_name(f->reason),
        .completion_tokens = f->n_gen, .cached_tokens = f->n_cached,
        .timing = ob_result_timing(f->prefill_s, f->decode_s, f->n_prompt - f->n_cached, f->n_gen),
    };
    p->tokens = NULL;
    if (f->reason == OB_FINISH_ERROR || p->oom)
        res.error = p->oom ? "out of memory" : f->error ? f->error : "failed";
    p->o.rec = ob_result_record(p->req, &res);
    if (res.error || !p->o.rec) {
        /* the record carries the error, and so does the message */
        ob_seterr(0, "%s:%llu: id %s: %s", p->name, (unsigned long long)p->line, p->r.id,
                  res.error ? res.error : "out of memory");
        out_fail(&p->o, OB_EXIT_FAILURE, false, ob_errmsg());
    }
    cJSON_Delete(p->req);
    p->req = NULL;
    p->o.done = true;
}

static void pending_free(struct out *o)
{
    struct pending *p = (struct pending *)o;
    cJSON_Delete(p->o.rec);
    cJSON_Delete(p->req);
    cJSON_Delete(p->tokens);
    free(p->o.why);
    ob_req_free(&p->r);
    ob_sb_free(&p->text);
    free(p);
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
    p->R = R;
    p->repeat = repeat;
    p->req = cJSON_Duplicate(rec, true);
    p->tokens = cJSON_CreateArray();
    if (!p->req || !p->tokens) {
        pending_free(&p->o);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    struct ob_request q = {
        .prompt = p->r.ids, .n_prompt = p->r.n_ids, .sampling = p->r.s,
        .max_tokens = p->r.max_tokens, .top_logprobs = p->r.logprobs ? p->r.top_logprobs : 0,
        .cache_prompt = p->r.cache_prompt, .stop = p->r.stop, .n_stop = p->r.n_stop,
        .spec = p->r.spec,
        .stop_ids = p->r.stop_ids, .n_stop_ids = p->r.n_stop_ids,
        .on_token = on_token, .on_finish = on_finish, .user = p,
    };
    int e = ob_engine_submit(R->eng, &q, NULL);
    if (e) {
        pending_free(&p->o);
        return e;
    }
    out_add(&R->q, &p->o);
    return 0;
}

static void progress(const struct run *R)
{
    struct ob_engine_stats s;
    ob_engine_stats(R->eng, &s);
    fprintf(stderr, "\r" PROG ": %ld written, %d running, %d queued, %llu tokens   ", R->q.written,
            s.live, s.queued, (unsigned long long)s.tokens_generated);
}

/* one FILE operand (ob_each_input; f NULL: it could not be opened) */
static int run_stream(void *user, const char *name, FILE *f)
{
    struct run *R = user;
    if (!f)
        return unopened();
    struct ob_jsonl *in;
    int e = ob_jsonl_open(f, name, &in);
    if (e)
        return e;
    bool tty = isatty(2);
    int limit = 2 * R->o->parallel;
    for (;;) {
        while (!R->stop && R->q.pending < limit) {
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
                    read_failed(e, &R->read_failed, &R->stop);
                else
                    bad_record(R->o, &R->bad, &R->stop);
                e = 0;                         /* reported: not again by the caller */
                continue;
            }
            for (int k = 0; k < R->o->repeat && !e; k++)
                e = submit(R, rec, &q, k, name, ob_jsonl_line(in));
            if (e && e != OB_ENOMEM) {         /* refused by the engine: a bad record */
                ob_errprefix(e, "%s:%llu: id %s", name, (unsigned long long)ob_jsonl_line(in),
                             q.id);
                bad_record(R->o, &R->bad, &R->stop);
                e = 0;
            }
            ob_req_free(&q);
            cJSON_Delete(rec);
            if (e)
                break;
        }
        if (e)
            break;
        if (R->q.pending == 0)
            break;
        /* a failing step ends its requests with an error: each is reported with its record */
        ob_engine_step(R->eng);
        if ((e = out_flush(&R->q)))
            break;
        if (tty)
            progress(R);
        if (R->stop && R->q.pending == 0)
            break;
    }
    if (tty)
        fputc('\n', stderr);
    ob_jsonl_close(in);
    return e ? e : R->stop;
}

/* ---- the URL route ---------------------------------------------------------------------------- */

/* one request (one repeat) sent to the server */
struct upending {
    struct out o;                  /* first: the result, once its reply is in */
    cJSON *req;                    /* the request record, shared by its repeats and the reader
                                      while it sends them: *req_refs holders */
    int *req_refs;
    struct ob_oai_cli_req q;
    int repeat;
};

struct urun {
    struct opts *o;
    const struct ob_oai_cli *cli;
    const char *base;              /* the route name in messages */
    char *endpoint_chat, *endpoint_cmpl;
    struct ob_http *h;
    struct ob_oai_cli_params params;
    struct outq q;                 /* halted: the server could not be reached */
    int active;
    long bad;
    int64_t nonf32;
    bool stop;                     /* read no more records */
    int read_failed;               /* the input could not be read on: its exit status */
};

static void upending_free(struct out *o)
{
    struct upending *p = (struct upending *)o;
    if (--*p->req_refs == 0) {
        cJSON_Delete(p->req);
        free(p->req_refs);
    }
    ob_oai_cli_req_free(&p->q);
    cJSON_Delete(p->o.rec);
    free(p->o.why);
    free(p);
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
    int err;
    p->o.rec = ob_oai_cli_result(U->cli, p->req, &p->q, p->repeat, r, &err);
    ob_http_result_free(r);
    if (!p->o.rec)
        return ob_seterr(OB_ENOMEM, "out of memory");
    if (err == OB_EDEVICE) {               /* unreachable: no more is sent or written */
        out_fail(&p->o, OB_EXIT_DEVICE, true, ob_errmsg());
    } else if (err) {                      /* written as an error record */
        ob_seterr(0, "%s: id %s: %s", U->base, p->q.id, ob_errmsg());
        out_fail(&p->o, err == OB_EFORMAT ? OB_EXIT_DATA : OB_EXIT_FAILURE, false, ob_errmsg());
    }
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(p->o.rec, "nonf32_values");
    if (cJSON_IsRaw(nf))                   /* written by us as a raw integer */
        U->nonf32 += strtoll(nf->valuestring, NULL, 10);
    p->o.done = true;
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
    out_add(&U->q, &p->o);
    U->active++;
    return 0;
}

/* one FILE operand (ob_each_input; f NULL: it could not be opened) */
static int urun_stream(void *user, const char *name, FILE *f)
{
    struct urun *U = user;
    if (!f)
        return unopened();
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
        while (!e && !U->q.halted && U->active < par && U->q.pending < 4 * par) {
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
            if (U->stop || eof)
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
                    read_failed(e, &U->read_failed, &U->stop);
                else
                    bad_record(U->o, &U->bad, &U->stop);
                e = 0;
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
        if ((e = out_flush(&U->q)))
            break;
        /* everything sent has been written (or the server is gone), and nothing more comes */
        if (U->q.halted || (U->active == 0 && !cur && (eof || U->stop)))
            break;
    }
    if (cur && --*cur_refs == 0) {
        cJSON_Delete(cur);
        free(cur_refs);
    }
    ob_oai_cli_req_free(&cur_q);
    ob_jsonl_close(in);
    return e ? e : U->stop || U->q.halted;
}

static int run_url(struct opts *o, int argc, char **argv, int first)
{
    struct ob_oai_cli *cli;
    int e = ob_oai_cli_open(o->r.url, &o->r.srv, &cli);
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        if (e != OB_EUSAGE)
            fclose(stdout);
        return ob_exit_status(e);
    }
    if (cli->note[0])
        fprintf(stderr, PROG ": warning: %s\n", cli->note);
    const char *route = cli->route;
    struct urun U = {.o = o, .cli = cli, .base = route, .h = cli->http,
                     .q = {.unordered = o->unordered, .release = upending_free}};
    U.q.tail = &U.q.head;
    U.params = (struct ob_oai_cli_params){.max_tokens = o->d.max_tokens,
                                          .temperature = o->d.temperature, .seed = o->d.seed,
                                          .top_logprobs = o->d.top_logprobs,
                                          .thinking = o->thinking,
                                          .model = o->model ? o->model : cli->model};
    U.endpoint_chat = ob_oai_cli_url(cli, "/v1/chat/completions");
    U.endpoint_cmpl = ob_oai_cli_url(cli, "/v1/completions");
    if (!U.endpoint_chat || !U.endpoint_cmpl)
        e = ob_seterr(OB_ENOMEM, "out of memory");
    int unopened = 0;
    if (!e)
        e = ob_each_input(argv + first, argc - first, o->keep_going, urun_stream, &U, &unopened);
    int status = end_status(&U.q, e, unopened, U.read_failed, U.bad);
    if (U.nonf32)
        fprintf(stderr, PROG ": %s: %lld log-probabilit%s on the wire %s not float32 (rounded "
                "to float32; the wire value is kept as wire_logprob)\n", route,
                (long long)U.nonf32, U.nonf32 == 1 ? "y" : "ies", U.nonf32 == 1 ? "was" : "were");
    if (U.q.halted)
        status = OB_EXIT_DEVICE;
    free(U.endpoint_chat);
    free(U.endpoint_cmpl);
    ob_oai_cli_close(cli);
    return close_stdout(&U.q, status);
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
    struct opts o = {.r = OB_ROUTE_OPTS_DEFAULT, .parallel = 1, .repeat = 1, .thinking = -1,
                     .d = {.max_tokens = 128, .temperature = 0, .seed = 0, .top_logprobs = 0}};
    struct ob_cmdline cl = {PROG, PROG " -m MODEL [options] [FILE...]\n       " PROG
                            " -d URL [-m NAME] [options] [FILE...]",
                            "Generate from request records (JSON lines); write result records.",
                            options};
    int c;
    double temperature;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case OPT_PARALLEL: cl.bad = !ob_opt_int("parallel", optarg, 1, 256, &o.parallel); break;
        case OPT_VERBOSE: o.verbose = true; break;
        case OPT_THINKING:
            cl.bad = !ob_opt_choice("thinking", optarg, ob_opt_words_on_off, &o.thinking);
            break;
        case OPT_REPEAT: cl.bad = !ob_opt_int("repeat", optarg, 1, 1 << 20, &o.repeat); break;
        case OPT_KEEP_GOING: o.keep_going = true; break;
        case OPT_UNORDERED: o.unordered = true; break;
        case OPT_MAX_TOKENS: cl.bad = !ob_opt_int("max-tokens", optarg, 0, 1 << 24, &o.d.max_tokens); break;
        case OPT_TOP_LOGPROBS: cl.bad = !ob_opt_int("top-logprobs", optarg, 0, OB_MAX_TOP, &o.d.top_logprobs); break;
        case OPT_TEMPERATURE:
            if (!(cl.bad = !ob_opt_num("temperature", optarg, 0, 100, &temperature)))
                o.d.temperature = (float)temperature;
            break;
        case OPT_SEED: cl.bad = !ob_opt_u64("seed", optarg, 0, OB_SEED_MAX, &o.d.seed); break;
        default: cl.bad = ob_opt_route(c, optarg, &o.r) < 0; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (cl.bad)
        return usage_error("%s", cli_reason(&cl));
    if (ob_route_opts_check(&o.r))
        return usage_error("%s", ob_errmsg());
    if (o.r.url)
        return run_url(&o, argc, argv, optind);
    if (!o.model)
        return usage_error("%s", "no model (-m MODEL)");

    struct run R = {.o = &o, .q = {.unordered = o.unordered, .release = pending_free}};
    R.q.tail = &R.q.head;
    struct ob_local *L = NULL;
    o.r.lp.model = o.model;
    o.r.lp.parallel = o.parallel;
    int e = ob_local_open(&o.r.lp, &L);
    if (!e)
        e = ob_model_sha256(L->m, &R.sha);
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        ob_local_free(L);
        return ob_exit_status(e);
    }
    R.m = L->m;
    R.eng = L->eng;
    R.route = ob_ctx_route(L->ctx);
    R.model = ob_model_name(L->m);
    int unopened = 0;
    e = ob_each_input(argv + optind, argc - optind, o.keep_going, run_stream, &R, &unopened);
    int status = end_status(&R.q, e, unopened, R.read_failed, R.bad);
    if (o.verbose)
        ob_local_report(stderr, PROG, L);
    ob_local_free(L);
    return close_stdout(&R.q, status);
}
