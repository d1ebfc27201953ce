/*
 * 1b-logprobs — teacher-forced scoring: the log-probability of given tokens on a route.
 *
 *   1b-logprobs -m MODEL [-d ROUTE] [options] [FILE...]     result records in, rescored out
 *   1b-logprobs -d URL [-m MODEL] [options] [FILE...]       the same through a server
 *   1b-logprobs --text -m MODEL [options] [FILE...]         plain text: per-token logprobs,
 *                                                           total and perplexity
 *
 * A result record (from any route) is scored position by position: its prompt (prompt_ids
 * when the record has them, else its prompt or messages tokenized again with this model), then
 * exactly its tokens forced one after another (ob_request.forced), each reported with its
 * log-probability on this route and the top alternatives. The output is the same record with
 * its tokens replaced by the scored ones and its route and model set to the scorer's, so
 * 1b-agree can compare every position of two routes — not only those where both happened to
 * choose the same token. Tokens without ids (a server that reports none) are looked up by
 * their bytes in the vocabulary, and the record says so ("ids_from_text").
 *
 * Exit status (1b(7)): 0 ok, 2 usage, 3 a record that cannot be scored (no tokens, no prompt,
 * a token text that is no token of this vocabulary, an error reply; every earlier record
 * written), 4 route unavailable or server unreachable, 5 other failure.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1b.h"
#include "client.h"
#include "tok.h"
#include "cli.h"

#define PROG "1b-logprobs"

enum {
    OPT_PARALLEL = 256, OPT_TOP_LOGPROBS, OPT_TEXT, OPT_WIRE, OPT_KEEP_GOING,
};

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the model (with a URL: only its tokenizer, when records need one)"},
    OB_OPT_ROWS_ROUTE,
    {"parallel", OPT_PARALLEL, "N", "records scored together in process (default 4)"},
    OB_OPT_ROW_CTX,
    {"top-logprobs", OPT_TOP_LOGPROBS, "N", "alternatives per token (default: as many as the "
                                            "record's tokens carry; --text: 0)"},
    {"text", OPT_TEXT, NULL, "score plain text: {\"id\",\"text\"} records or raw lines"},
    {"wire", OPT_WIRE, "forced|echo", "a URL route: send the tokens as forced_tokens (default) or "
                                      "appended to an echoed prompt"},
    {"keep-going", OPT_KEEP_GOING, NULL, "skip records that cannot be scored (exit 3 at the end)"},
    OB_OPT_ROWS_SERVER,
    OB_OPT_ROW_MAX_LINE,
    OB_OPT_ROWS_SHARED,
    {0},
};

struct opts {
    const char *model;
    struct ob_route_opts r;        /* the route (in process: its model is above) */
    int top;
    bool text, keep_going, wire_echo;
};

/* what one record is scored as */
struct job {
    cJSON *in;                     /* the input record (text mode: built from the line) */
    struct ob_result_forced f;     /* what it scores: id, context, forced tokens, top */
    const char *name;              /* the input and line it came from, for messages */
    uint64_t line;
    /* results */
    cJSON *tokens;                 /* scored tokens in record shape */
    int n_got;
    double sum;                    /* text mode: float64 sum of the scored logprobs */
    bool done, failed;
    bool fatal;                    /* failed: the server cannot be reached (nothing more runs) */
    int fail_status;               /* failed: OB_EXIT_DATA (the record), else the route's */
    char why[320];
    struct run *R;
    struct job *next;
};

static void job_free(struct job *j)
{
    cJSON_Delete(j->in);
    cJSON_Delete(j->tokens);
    ob_result_forced_free(&j->f);
    free(j);
}

struct run {
    struct opts *o;
    struct ob_client *c;           /* the route */
    struct ob_model *m;            /* the tokenizer's model: the route's in process, -m's with
                                      a URL (only its tokenizer), else NULL */
    struct ob_model *own;          /* m when opened here (a URL's -m) */
    const struct ob_tok *tok;
    const char *sha;
    char model[256];               /* its name in records: in process the model's, with --url
                                      the server's (from its first reply) */
    struct job *head, **tail;
    int in_flight;
    long bad;
    int status;                    /* the worst failure of a scored record so far */
    bool out_failed;               /* a write to standard output failed (and was reported) */
    bool stop;                     /* read no more records */
    bool halted;                   /* a scored record failed: write no more either */
};

/* ---- building jobs ---------------------------------------------------------------------------- */

/* a text line or {"id","text"} record -> BOS (or the first token) as context, the rest
 * forced */
static int job_from_text(struct run *R, const char *text, size_t len, cJSON *rec, uint64_t line,
                         struct job *j)
{
    if (!(j->f.id = ob_record_id(rec, line)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    j->f.top = R->o->top >= 0 ? R->o->top : 0;
    if (!R->m)                                 /* --url without a tokenizer: the server's */
        return 0;
    int32_t *ids;
    size_t n;
    int e = ob_tok_encode(R->tok, text, len, false, &ids, &n);
    if (e)
        return e;
    bool bos = ob_tok_add_bos(R->tok) && ob_tok_bos(R->tok) >= 0;
    if (n + bos < 2) {
        free(ids);
        return ob_seterr(OB_EFORMAT, "the text has %s token%s: nothing to score", n ? "one" : "no",
                         n == 1 ? "" : "s");
    }
    j->f.n_prompt = 1;
    j->f.prompt = malloc(sizeof *j->f.prompt);
    j->f.forced = malloc((n ? n : 1) * sizeof *j->f.forced);
    if (!j->f.prompt || !j->f.forced) {
        free(ids);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    j->f.prompt[0] = bos ? ob_tok_bos(R->tok) : ids[0];
    j->f.n_forced = (int)n - !bos;
    memcpy(j->f.forced, ids + !bos, (size_t)j->f.n_forced * sizeof *ids);
    free(ids);
    return 0;
}

/* ---- output ----------------------------------------------------------------------------------- */

/* the record written for a finished job */
static cJSON *job_record(struct run *R, struct job *j, const char *model_name)
{
    cJSON *o;
    if (R->o->text) {
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", j->f.id);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j->in, "text");
        cJSON_AddStringToObject(o, "text", cJSON_IsString(t) ? t->valuestring : "");
    } else {
        o = cJSON_Duplicate(j->in, true);
        if (!o)
            return NULL;
        /* the scorer's values replace the generator's; keep where they came from */
        cJSON *from = cJSON_CreateObject();
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "route");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "model");
        if (r)
            cJSON_AddItemToObject(from, "route", cJSON_Duplicate(r, true));
        if (m)
            cJSON_AddItemToObject(from, "model", cJSON_Duplicate(m, true));
        static const char *const drop[] = {"route", "model", "tokens", "timing", "cached_tokens",
                                           "nonf32_values", "scored_from", "ids_from_text"};
        for (size_t i = 0; i < sizeof drop / sizeof *drop; i++)
            cJSON_DeleteItemFromObjectCaseSensitive(o, drop[i]);
        cJSON_AddItemToObject(o, "scored_from", from);
    }
    cJSON_AddStringToObject(o, "route", ob_client_route(R->c));
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", model_name);
    if (R->sha && !R->o->r.url)
        cJSON_AddStringToObject(m, "sha256", R->sha);
    cJSON_AddItemToObject(o, "model", m);
    if (R->o->text || !cJSON_GetObjectItemCaseSensitive(o, "prompt_ids")) {
        if (j->f.prompt)
            cJSON_AddItemToObject(o, "prompt_ids", ob_json_ids(j->f.prompt, j->f.n_prompt));
    }
    cJSON_AddItemToObject(o, "tokens", j->tokens);
    j->tokens = NULL;
    if (j->f.ids_from_text)
        cJSON_AddBoolToObject(o, "ids_from_text", true);
    if (R->o->text) {
        ob_json_add_int(o, "n_tokens", j->n_got);
        cJSON_AddItemToObject(o, "logprob_sum", ob_json_f64(j->sum));
        double mean = j->n_got ? j->sum / j->n_got : 0;
        cJSON_AddItemToObject(o, "mean_logprob", ob_json_f64(mean));
        cJSON_AddItemToObject(o, "perplexity", ob_json_f64(j->n_got ? exp(-mean) : 1));
    }
    return o;
}

static int flush(struct run *R, const char *model_name)
{
    while (R->head && R->head->done) {
        struct job *j = R->head;
        if (R->halted) {
            /* read after a record that stopped the run: not written, as if never read */
        } else if (j->failed) {
            ob_seterr(0, "%s:%llu: id %s: %s", j->name, (unsigned long long)j->line, j->f.id,
                      j->why);
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
            if (j->fail_status == OB_EXIT_DATA)
                R->bad++;
            else if (j->fail_status > R->status)
                R->status = j->fail_status;
            if (!R->o->keep_going || j->fatal)
                R->stop = R->halted = true;
        } else {
            if (j->f.ids_from_text) {
                ob_seterr(0, "id %s: the tokens carry no ids; scored the ids their text has in "
                          "this vocabulary", j->f.id);             /* escaped */
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
            }
            cJSON *rec = job_record(R, j, model_name);
            int e = rec ? ob_jsonl_write(stdout, rec) : ob_seterr(OB_ENOMEM, "out of memory");
            cJSON_Delete(rec);
            if (e == OB_EIO) {
                R->out_failed = true;
                return ob_errprefix(e, "stdout");
            }
            if (e)
                return e;
        }
        R->head = j->next;
        if (!R->head)
            R->tail = &R->head;
        R->in_flight--;
        job_free(j);
    }
    return 0;
}

/* ---- scoring (every route: client.h) ---------------------------------------------------------- */

static void on_scored(void *user, struct ob_client_scored *s)
{
    struct job *j = user;
    struct run *R = j->R;
    if (s->model && !R->model[0])
        snprintf(R->model, sizeof R->model, "%s", s->model);
    j->tokens = s->tokens;
    j->n_got = s->n;
    j->sum = s->sum;
    if (s->err) {
        j->failed = true;
        j->fatal = s->err == OB_EDEVICE;
        j->fail_status = ob_client_refused(s->err) ? OB_EXIT_DATA : ob_exit_status(s->err);
        snprintf(j->why, sizeof j->why, "%s", s->why);
    }
    if (s->nonf32) {
        ob_seterr(0, "id %s: %lld log-probabilit%s on the wire %s not float32", j->f.id,
                  (long long)s->nonf32, s->nonf32 == 1 ? "y" : "ies",
                  s->nonf32 == 1 ? "was" : "were");
        fprintf(stderr, PROG ": %s\n", ob_errmsg());            /* escaped */
    }
    j->done = true;
}

static int add_job(struct run *R, struct job *j)
{
    *R->tail = j;
    R->tail = &j->next;
    R->in_flight++;
    j->R = R;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j->in, "text");
    struct ob_client_score s = {
        .prompt = j->f.prompt, .n_prompt = j->f.n_prompt, .forced = j->f.forced,
        .n_forced = j->f.n_forced, .top = j->f.top, .on_scored = on_scored, .user = j,
        /* --text on a server without a tokenizer: the server tokenizes the text */
        .text = R->o->text && !j->f.forced ? (cJSON_IsString(t) ? t->valuestring : "") : NULL,
    };
    int e = ob_client_score(R->c, &s);
    if (e && ob_client_refused(e)) {           /* the record's fault */
        j->failed = true;
        j->done = true;
        j->fail_status = OB_EXIT_DATA;
        snprintf(j->why, sizeof j->why, "%s", ob_errmsg());
        e = 0;
    }
    return e;
}

/* one FILE operand (ob_each_input); NULL: it could not be opened, which counts as a record
 * that cannot be scored (--keep-going goes on) */
static int run_stream(void *user, const char *name, FILE *f)
{
    struct run *R = user;
    if (!f) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return 0;
    }
    struct ob_jsonl *in = NULL;
    int e = ob_jsonl_open(f, name, &in);
    if (e)
        return e;
    int limit = ob_client_window(R->c);
    bool eof = false;
    for (;;) {
        while (!R->stop && !eof && R->in_flight < limit) {
            cJSON *rec = NULL;
            struct job *j = calloc(1, sizeof *j);
            if (!j) {
                e = ob_seterr(OB_ENOMEM, "out of memory");
                break;
            }
            uint64_t at;
            if (R->o->text) {
                char *line;
                size_t n;
                int r = ob_jsonl_next_line(in, &line, &n);
                if (r == 0) {
                    free(j);
                    eof = true;
                    break;
                }
                at = ob_jsonl_line(in);
                j->name = name;
                j->line = at;
                size_t k = 0;
                while (r > 0 && (line[k] == ' ' || line[k] == '\t'))
                    k++;
                if (r < 0) {
                    e = r;
                } else if (!line[k]) {
                    free(j);
                    continue;
                } else if (line[k] == '{') {      /* a record: {"id","text"} */
                    if ((e = ob_json_parse(line, (size_t)n, 0, &rec)))
                        ob_errprefix(e, "%s:%llu", name, (unsigned long long)at);
                    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rec, "text");
                    if (!e && !cJSON_IsString(t)) {
                        cJSON_Delete(rec);
                        rec = NULL;
                        e = ob_seterr(OB_EFORMAT, "%s:%llu: not a {\"id\",\"text\"} record", name,
                                      (unsigned long long)at);
                    }
                } else {                   /* a raw line */
                    rec = cJSON_CreateObject();
                    char idb[32];
                    snprintf(idb, sizeof idb, "%llu", (unsigned long long)at);
                    cJSON_AddStringToObject(rec, "id", idb);
                    cJSON_AddStringToObject(rec, "text", line);
                }
                if (!e && !rec)
                    e = ob_seterr(OB_ENOMEM, "out of memory");
                if (!e) {
                    const char *t = cJSON_GetObjectItemCaseSensitive(rec, "text")->valuestring;
                    j->in = rec;
                    if ((e = job_from_text(R, t, strlen(t), rec, at, j)))
                        ob_errprefix(e, "%s:%llu: id %s", name, (unsigned long long)at,
                                     j->f.id ? j->f.id : "?");
                }
            } else {
                int r = ob_jsonl_next(in, &rec);
                if (r == 0) {
                    free(j);
                    eof = true;
                    break;
                }
                at = ob_jsonl_line(in);
                j->name = name;
                j->line = at;
                if (r < 0) {
                    e = r;
                } else {
                    j->in = rec;
                    if ((e = ob_result_forced(rec, at, R->m, R->o->top, &j->f)))
                        ob_errprefix(e, "%s:%llu: id %s", name, (unsigned long long)at,
                                     j->f.id ? j->f.id : "?");
                }
            }
            if (e) {
                if (!j->in)
                    cJSON_Delete(rec);
                job_free(j);
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
                if (e == OB_EIO || e == OB_ENOMEM) {
                    /* the input cannot be read on: no more records are read, those read are
                     * scored and written, and the run ends with exit 5 */
                    if (ob_exit_status(e) > R->status)
                        R->status = ob_exit_status(e);
                    R->stop = true;
                } else {
                    R->bad++;
                    R->stop |= !R->o->keep_going;
                }
                e = 0;
                continue;
            }
            if ((e = add_job(R, j)))
                break;
        }
        if (e)
            break;
        if (R->in_flight == 0)
            break;
        /* a failing step ends its jobs with the error, each reported when it is flushed */
        if (R->head && !R->head->done && (e = ob_client_poll(R->c, 1.0)) < 0)
            break;
        if ((e = flush(R, R->model)))
            break;
        if ((R->stop || eof) && R->in_flight == 0)
            break;
    }
    ob_jsonl_close(in);
    return e ? e : R->stop;
}

/* ---- main ---------------------------------------------------------------------------------------- */

/* everything a run holds: records not written, the route, a URL's tokenizer */
static void run_free(struct run *R)
{
    while (R->head) {
        struct job *j = R->head;
        R->head = j->next;
        job_free(j);
    }
    ob_client_close(R->c);
    ob_model_close(R->own);
}

static int usage_error(const char *msg)
{
    fprintf(stderr, PROG ": %s\nusage: " PROG " -m MODEL [-d ROUTE] [options] [FILE...]  (see "
            PROG " --help)\n", msg);
    return OB_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    ob_blas_env(argc, argv);               /* before getopt permutes argv: may re-exec */
    struct opts o = {.r = OB_ROUTE_OPTS_DEFAULT, .top = -1};
    o.r.lp.parallel = 4;
    struct ob_cmdline cl = {PROG, PROG " -m MODEL [-d ROUTE] [options] [FILE...]\n       " PROG
                            " -d URL [-m MODEL] [options] [FILE...]\n       " PROG
                            " --text -m MODEL [options] [FILE...]",
                            "Teacher-forced scoring: recompute the log-probabilities of the tokens "
                            "of result records on a route\n(or score plain text: per-token "
                            "log-probabilities, total and perplexity).",
                            options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case OPT_PARALLEL:
            cl.bad = !ob_opt_int("parallel", optarg, 1, 256, &o.r.lp.parallel);
            if (!o.r.local_only)
                o.r.local_only = "--parallel";
            break;
        case OPT_TOP_LOGPROBS: cl.bad = !ob_opt_int("top-logprobs", optarg, 0, OB_MAX_TOP, &o.top); break;
        case OPT_TEXT: o.text = true; break;
        case OPT_WIRE: {
            static const struct ob_opt_word wires[] = {{"forced", 0}, {"echo", 1}, {NULL, 0}};
            int echo = 0;
            cl.bad = !ob_opt_choice("wire", optarg, wires, &echo);
            o.wire_echo = echo;
            break;
        }
        case OPT_KEEP_GOING: o.keep_going = true; break;
        default: cl.bad = ob_opt_route(c, optarg, &o.r) < 0; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (cl.bad)
        return usage_error(cli_reason(&cl));
    if (!o.r.url && !o.model)
        return usage_error("no model (-m MODEL) and no server URL (-d URL)");
    if (ob_route_opts_check(&o.r))
        return usage_error(ob_errmsg());

    struct run R = {.o = &o};
    R.tail = &R.head;
    /* a server scores one record at a time: no other request's batch can move its bits */
    struct ob_client_params cp = {.model = o.r.url ? NULL : o.model, .r = &o.r,
                                  .parallel = o.r.url ? 1 : o.r.lp.parallel, .thinking = -1,
                                  .score_echo = o.wire_echo};
    int e = ob_client_open(&cp, &R.c);
    if (!e && !(R.m = ob_client_local_model(R.c)) && o.model)
        e = ob_model_open(o.model, &R.own);    /* a server's scoring: only its tokenizer */
    if (!e && !R.m)
        R.m = R.own;
    if (!e && ob_client_local_model(R.c))
        e = ob_model_sha256(R.m, &R.sha);
    if (!e && R.m) {
        R.tok = ob_model_tok(R.m);
        if (!o.r.url)
            snprintf(R.model, sizeof R.model, "%s", ob_model_name(R.m));
    }
    if (!e && ob_client_note(R.c)[0])
        fprintf(stderr, PROG ": warning: %s\n", ob_client_note(R.c));
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        run_free(&R);
        return ob_exit_status(e);
    }

    int status;
    e = ob_each_input(argv + optind, argc - optind, o.keep_going, run_stream, &R, &status);
    if (e)
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
    if (e && ob_exit_status(e) > status)
        status = ob_exit_status(e);
    if (R.status > status)
        status = R.status;
    if (R.bad && status < OB_EXIT_DATA)
        status = OB_EXIT_DATA;
    run_free(&R);
    if (ob_stdout_close()) {
        if (!R.out_failed)
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return OB_EXIT_FAILURE;
    }
    return status;
}
