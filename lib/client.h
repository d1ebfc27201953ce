/*
 * client.h — one request interface for every route a measuring command runs on (client.c): an
 * in-process route through the batching engine (-d cpu, ref, hrx, ...: client-local.c) or a
 * server that speaks the OpenAI-compatible wire format (-d URL: net/client-oai.c). 1b-gen,
 * 1b-logprobs and 1b-batchrep open one with ob_client_open and run one loop over it; what they
 * receive is the same either way: result records written by ob_result_record (record.h), and
 * tokens in the records' shape ({id, text, bytes, logprob, bits, top}).
 *
 *   ob_client_submit    a request record, to generate; its tokens and its finish come back
 *                       through callbacks
 *   ob_client_score     forced tokens after a context, scored (teacher forcing)
 *   ob_client_release   N copies of one request released together, R rounds (the barrier of
 *                       1b-batchrep); runs to the end
 *   ob_client_poll      lets submitted work progress (an engine step, or the replies that came
 *                       in); the callbacks of submit and score run from here
 *   ob_client_cancel    ends a submitted request now (finish reason "cancelled")
 *   ob_client_route, ob_client_model, ob_client_stats, ob_client_report, ob_client_close
 *
 * Messages: a record refused at submit names its input and line ("FILE:LINE: id ID: why") on
 * either route; a request that fails later names them in process, and the server ("URL: id
 * ID: why") on a server route.
 *
 * Ownership: submit, score and release copy what they need from their arguments; the records
 * and token arrays handed to callbacks become the callee's (cJSON_Delete). Threads: one thread
 * uses a client, and the callbacks run on it.
 */
#ifndef OB_CLIENT_H
#define OB_CLIENT_H

#include <stdio.h>

#include "1b.h"
#include "local.h"
#include "record.h"

struct ob_client_params {
    const char *model;             /* -m: in process the model (a file); with a URL the name
                                      sent as "model" (NULL: the first the server lists) */
    const struct ob_route_opts *r; /* the route: -d (a route name or URL), -t, --gpu, the
                                      context and spec rows, the server rows */
    int parallel;                  /* requests run at once: the engine's sequences, or
                                      transfers to the server (ob_client_window) */
    struct ob_req_defaults d;      /* the values of records without the field */
    int thinking;                  /* "thinking" of records without one: -1 none, 0, 1 */
    bool score_echo;               /* a server's scoring sends the tokens after an echoed
                                      prompt, not as forced_tokens (1b-logprobs --wire echo) */
};

struct ob_client;
/* Open the route p->r names: OB_EUSAGE (parameters, a bad URL), OB_EDEVICE (a route not
 * available, a server unreachable or not ready within --wait), OB_EFORMAT (a bad model), ...
 * with the reason in ob_errmsg(); *out NULL then. */
int ob_client_open(const struct ob_client_params *p, struct ob_client **out);
void ob_client_close(struct ob_client *c);

/* The route as records show it: "cpu", "hrx", ..., or the URL without a password. */
const char *ob_client_route(const struct ob_client *c);
/* The model's name: in process the model's, on a server the name it reported (NULL until it
 * reports one). */
const char *ob_client_model(const struct ob_client *c);
/* In process: the model (its tokenizer, its template); on a server NULL. */
struct ob_model *ob_client_local_model(const struct ob_client *c);
/* A warning worth printing from opening the route ("" when none): a server's readiness. */
const char *ob_client_note(const struct ob_client *c);

/* ---- generation ------------------------------------------------------------------------------ */

struct ob_client_finish {
    cJSON *rec;                    /* the result record (the callee's), or NULL: out of memory */
    int err;                       /* 0, or why the request failed (rec then has "error"):
                                      OB_EFORMAT the request or its reply cannot be used (a
                                      4xx, no log-probabilities); OB_EDEVICE the server cannot
                                      be reached (nothing sent after it will run); another
                                      code: the route failed (a 5xx, a timeout, a step that
                                      failed) */
    const char *why;               /* err, or rec NULL: the message */
};
/* a token as it comes (record shape; a server's all at once with the reply) */
typedef void (*ob_client_token_fn)(void *user, const cJSON *token);
typedef void (*ob_client_finish_fn)(void *user, struct ob_client_finish *f);

struct ob_client_req {
    const cJSON *rec;              /* the request record (1b(7)) */
    int repeat;                    /* which run of it ("repeat" of the result) */
    const char *name;              /* the input and line it came from, for messages */
    uint64_t line;
    ob_client_token_fn on_token;   /* NULL: not called */
    ob_client_finish_fn on_finish; /* called once, unless submit fails */
    void *user;
};
/*
 * Start one request. A record that cannot run returns its code (OB_EFORMAT, OB_ERANGE,
 * OB_EUNSUPP, OB_EUSAGE: ob_client_refused) with the message naming it; any other code
 * (OB_ENOMEM, ...) means the route cannot take more. *handle (unless NULL) is for
 * ob_client_cancel.
 */
int ob_client_submit(struct ob_client *c, const struct ob_client_req *q, uint64_t *handle);
/* e, returned by submit or score, is the request's fault rather than the route's */
bool ob_client_refused(int e);
/* End a request that has not finished: its finish (reason "cancelled") comes from the next
 * poll in process, at once on a server (whose reply is then dropped). */
void ob_client_cancel(struct ob_client *c, uint64_t handle);

/* ---- scoring --------------------------------------------------------------------------------- */

struct ob_client_scored {
    cJSON *tokens;                 /* the scored tokens, record shape, id first (the callee's);
                                      NULL when err */
    int n;                         /* how many */
    double sum;                    /* of their float32 log-probabilities, in double */
    int64_t nonf32;                /* a server's decimals that were not exactly float32 */
    const char *model;             /* the scorer's name for the model (a server's, from its
                                      reply; NULL when it gave none) */
    int err;                       /* 0; OB_EFORMAT (not every token fitted in the context, the
                                      server refused the request or scored other tokens);
                                      OB_EDEVICE (unreachable); another: the route failed */
    const char *why;
};
typedef void (*ob_client_scored_fn)(void *user, struct ob_client_scored *s);

struct ob_client_score {
    const int32_t *prompt;         /* the context */
    int n_prompt;
    const int32_t *forced;         /* the tokens to score, one after another */
    int n_forced;
    const char *text;              /* on a server, instead of prompt and forced: text that it
                                      tokenizes, every token scored */
    int top;                       /* alternatives per token */
    ob_client_scored_fn on_scored; /* called once, unless score fails */
    void *user;
};
/* Score s (nothing to score: on_scored at once with n 0). Fails as submit does. */
int ob_client_score(struct ob_client *c, const struct ob_client_score *s);

/* ---- progress -------------------------------------------------------------------------------- */

/* Let work progress, waiting up to wait_s seconds for a server's reply (the engine runs one
 * step): the callbacks of what finished run here. 0 or more; < 0 when the route failed as a
 * whole (ob_errmsg() says why). */
int ob_client_poll(struct ob_client *c, double wait_s);
/* requests (submitted or scored) that have not finished */
int ob_client_in_flight(const struct ob_client *c);
/* how many a command keeps in flight: on a server `parallel` (so many transfers at once), in
 * process twice that (the engine's queue then refills a sequence the moment one ends) */
int ob_client_window(const struct ob_client *c);

struct ob_client_stats {
    int running, queued;           /* in flight: being computed, and waiting for a slot */
    uint64_t tokens;               /* generated or scored so far */
    int64_t nonf32;                /* a server's decimals that were not exactly float32 */
};
void ob_client_stats(const struct ob_client *c, struct ob_client_stats *s);
/* What the route has to say at the end, on f, each line starting "PROG: ": on a server the
 * log-probabilities that were not float32 on the wire; in process with verbose the engine's
 * counters (ob_local_report). */
void ob_client_report(const struct ob_client *c, FILE *f, const char *prog, bool verbose);

/* ---- the barrier ----------------------------------------------------------------------------- */

/* copy `copy` of round `round` finished (f as for submit) */
typedef void (*ob_client_copy_fn)(void *user, int round, int copy, struct ob_client_finish *f);
/*
 * `rounds` times: `width` copies of the request record rec released together (in process in
 * one engine step, ob_barrier_run; on a server every copy on the wire before any reply is
 * read), run to the end, fn called for each copy. The client must have nothing in flight.
 * A record that cannot run: as submit; else 0 or the failure of the route.
 */
int ob_client_release(struct ob_client *c, const cJSON *rec, int width, int rounds,
                      ob_client_copy_fn fn, void *user);

/* ---- implementations (client.c) -------------------------------------------------------------- */

struct ob_client_ops {
    int (*submit)(struct ob_client *c, const struct ob_client_req *q, uint64_t *handle);
    int (*score)(struct ob_client *c, const struct ob_client_score *s);
    int (*release)(struct ob_client *c, const cJSON *rec, int width, int rounds,
                   ob_client_copy_fn fn, void *user);
    int (*poll)(struct ob_client *c, double wait_s);
    void (*cancel)(struct ob_client *c, uint64_t handle);
    void (*stats)(const struct ob_client *c, struct ob_client_stats *s);
    void (*report)(const struct ob_client *c, FILE *f, const char *prog, bool verbose);
    void (*close)(struct ob_client *c);
};

/* what every implementation's client starts with */
struct ob_client {
    const struct ob_client_ops *ops;
    struct ob_client_params p;
    struct ob_route_opts r;        /* p.r points here */
    const char *route;             /* owned by the implementation */
    const char *model;
    struct ob_model *local;        /* in process */
    char note[320];
    int in_flight;
};

/* a zeroed client of `size` bytes (an implementation's struct, struct ob_client first) with its
 * ops and a copy of p (and of p->r); NULL when out of memory */
void *ob_client_new(size_t size, const struct ob_client_ops *ops, const struct ob_client_params *p);
int ob_client_open_local(const struct ob_client_params *p, struct ob_client **out);
int ob_client_open_oai(const struct ob_client_params *p, struct ob_client **out);

#endif
