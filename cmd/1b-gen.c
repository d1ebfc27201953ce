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
 * Both routes are one loop over the request interface (lib/client.h).
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
#include "client.h"
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

/* ---- results, written in input order --------------------------------------------------------- */

/* one result on its way out */
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
};

static void out_free(struct out *o)
{
    cJSON_Delete(o->rec);
    free(o->why);
    free(o);
}

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
        out_free(p);
    }
    return 0;
}

/* results that could not be written */
static void out_drop(struct outq *q)
{
    while (q->head) {
        struct out *p = q->head;
        q->head = p->next;
        out_free(p);
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

/* ---- reading requests ------------------------------------------------------------------------ */

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

/* ---- the loop (every route: client.h) -------------------------------------------------------- */

struct run {
    struct opts *o;
    struct ob_client *c;
    struct outq q;                 /* halted: the server could not be reached */
    long bad;
    bool stop;                     /* read no more records */
    int read_failed;               /* the input could not be read on: its exit status */
};

static void on_finish(void *user, struct ob_client_finish *f)
{
    struct out *o = user;
    o->rec = f->rec;
    if (f->err || !f->rec)                 /* the record carries the error, and so does the message */
        out_fail(o, f->rec ? ob_exit_status(f->err) : OB_EXIT_FAILURE, f->err == OB_EDEVICE,
                 f->why ? f->why : "out of memory");
    o->done = true;
}

/* one run of a record: 0, a refused record (reported and counted), or a failure */
static int submit(struct run *R, const cJSON *rec, int repeat, const char *name, uint64_t line)
{
    struct out *o = calloc(1, sizeof *o);
    if (!o)
        return ob_seterr(OB_ENOMEM, "out of memory");
    struct ob_client_req q = {.rec = rec, .repeat = repeat, .name = name, .line = line,
                              .on_finish = on_finish, .user = o};
    int e = ob_client_submit(R->c, &q, NULL);
    if (e) {
        free(o);
        if (!ob_client_refused(e))
            return e;
        bad_record(R->o, &R->bad, &R->stop);
        return 1;
    }
    out_add(&R->q, o);
    return 0;
}

static void progress(const struct run *R)
{
    struct ob_client_stats s;
    ob_client_stats(R->c, &s);
    fprintf(stderr, "\r" PROG ": %ld written, %d running, %d queued, %llu tokens   ", R->q.written,
            s.running, s.queued, (unsigned long long)s.tokens);
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
    bool tty = isatty(2), eof = false;
    /* requests in flight as the route wants them, and a bounded number waiting to be written */
    int window = ob_client_window(R->c), waiting = 4 * R->o->parallel;
    cJSON *cur = NULL;                     /* the record being sent, and its next repeat */
    int next_rep = 0;
    uint64_t cur_line = 0;
    for (;;) {
        while (!e && !R->q.halted && ob_client_in_flight(R->c) < window &&
               R->q.pending < waiting) {
            if (cur && next_rep < R->o->repeat) {
                if ((e = submit(R, cur, next_rep++, name, cur_line)) > 0) {
                    next_rep = R->o->repeat;       /* refused: its other runs would be too */
                    e = 0;
                }
                continue;
            }
            cJSON_Delete(cur);
            cur = NULL;
            if (R->stop || eof)
                break;
            int r = ob_jsonl_next(in, &cur);
            if (r == 0) {
                eof = true;
                break;
            }
            if (r < 0) {
                cur = NULL;
                if (r == OB_EIO || r == OB_ENOMEM)
                    read_failed(r, &R->read_failed, &R->stop);
                else
                    bad_record(R->o, &R->bad, &R->stop);
                continue;
            }
            next_rep = 0;
            cur_line = ob_jsonl_line(in);
        }
        if (e)
            break;
        if (ob_client_in_flight(R->c) > 0 && (e = ob_client_poll(R->c, 1.0)) < 0)
            break;
        if ((e = out_flush(&R->q)))
            break;
        if (tty)
            progress(R);
        /* everything sent has been written (or the server is gone), and nothing more comes */
        if (R->q.halted || (ob_client_in_flight(R->c) == 0 && !cur && (eof || R->stop)))
            break;
    }
    if (tty)
        fputc('\n', stderr);
    cJSON_Delete(cur);
    ob_jsonl_close(in);
    return e ? e : R->stop || R->q.halted;
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
    if (!o.r.url && !o.model)
        return usage_error("%s", "no model (-m MODEL)");

    struct ob_client_params cp = {.model = o.model, .r = &o.r, .parallel = o.parallel, .d = o.d,
                                  .thinking = o.thinking};
    struct run R = {.o = &o, .q = {.unordered = o.unordered}};
    R.q.tail = &R.q.head;
    int e = ob_client_open(&cp, &R.c);
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return ob_exit_status(e);
    }
    if (ob_client_note(R.c)[0])
        fprintf(stderr, PROG ": warning: %s\n", ob_client_note(R.c));
    int unopened = 0;
    e = ob_each_input(argv + optind, argc - optind, o.keep_going, run_stream, &R, &unopened);
    int status = end_status(&R.q, e, unopened, R.read_failed, R.bad);
    ob_client_report(R.c, stderr, PROG, o.verbose);
    if (R.q.halted)
        status = OB_EXIT_DEVICE;
    ob_client_close(R.c);
    return close_stdout(&R.q, status);
}
