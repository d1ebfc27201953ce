/*
 * local.h — the in-process route of a command (local.c): the model, its inference context and
 * the batching engine over it, opened together with the defaults every command shares, so that
 * 1b-gen, 1b-serve, 1b-logprobs and 1b-batchrep size their contexts the same way.
 *
 * Ownership: ob_local_open returns an object that owns all three; ob_local_free frees them
 * (the engine first). Threads: as the parts (engine.h): one driver thread steps the engine.
 */
#ifndef OB_LOCAL_H
#define OB_LOCAL_H

#include <stdio.h>

#include "1b.h"
#include "draft.h"
#include "engine.h"

/* positions per sequence when none is asked for: the model's training context, at most this */
#define OB_LOCAL_CTX_DEFAULT 4096

/* The option rows of the in-process route, in every command that has one (before its own
 * rows; struct ob_option in 1b.h): -d ROUTE, -t N and --gpu N, into route, threads and
 * device below (--gpu's value is OB_OPT_GPU), and the sizes of its context: --ctx, --chunk
 * and --cache-slots, each command taking the rows it has (ob_opt_route takes them all). */
enum { OB_OPT_GPU = 0x1020, OB_OPT_SPEC, OB_OPT_SPEC_MAX, OB_OPT_DRAFT, OB_OPT_DRAFT_DEVICE,
       OB_OPT_SPEC_FIXED, OB_OPT_URL, OB_OPT_CTX, OB_OPT_CHUNK, OB_OPT_CACHE_SLOTS };
#define OB_OPT_ROW_DEVICE(routes)                                                         \
    {"device", 'd', "ROUTE", "route: cpu (default), ref, hrx (a GPU), hrx-sim, npu-sim or npu (a Q4NX pack)" routes}
#define OB_OPT_ROWS_THREADS_GPU                                                           \
    {"threads", 't', "N", "threads of the route (default: the CPUs available)"},         \
    {"gpu", OB_OPT_GPU, "N", "which device of the route: GPU N of -d hrx (default 0)"}
#define OB_OPT_ROWS_LOCAL OB_OPT_ROW_DEVICE(""), OB_OPT_ROWS_THREADS_GPU
#define OB_OPT_ROW_CTX                                                                    \
    {"ctx", OB_OPT_CTX, "N", "positions per sequence (default 4096, or the model's if less)"}
#define OB_OPT_ROW_CHUNK                                                                  \
    {"chunk", OB_OPT_CHUNK, "N", "prompt tokens prefilled per step; 0 = whole prompts (default 512)"}
#define OB_OPT_ROW_CACHE_SLOTS                                                            \
    {"cache-slots", OB_OPT_CACHE_SLOTS, "N", "extra KV slots kept as prompt cache (default 0)"}

/* The route rows of the commands that measure (1b-gen, 1b-logprobs, 1b-batchrep): -d takes a
 * route name or a server's URL (anything with "://"), --url URL is the same as -d URL, then
 * -t, --gpu and the server rows (OB_OPT_ROWS_SERVER, in 1b.h) follow in the command's table. */
#define OB_OPT_ROWS_ROUTE                                                                 \
    OB_OPT_ROW_DEVICE(", or a server's URL (OpenAI-compatible)"),                        \
    {"url", OB_OPT_URL, "URL", "the same as -d URL"},                                     \
    OB_OPT_ROWS_THREADS_GPU

/* The rows of speculative decoding (engine.h), in every command that generates in process;
 * ob_opt_spec takes their values (OB_OPT_SPEC .. OB_OPT_SPEC_FIXED). */
#define OB_OPT_ROWS_SPEC                                                                  \
    {"spec", OB_OPT_SPEC, "MODE", "speculative decoding: ngram (prompt lookup), draft (a draft model) or off (default; draft with --draft); the bits are those of plain decoding"}, \
    {"spec-max", OB_OPT_SPEC_MAX, "K", "drafted tokens per sequence and step, 1-16 (default 8)"}, \
    {"draft", OB_OPT_DRAFT, "MODEL", "the draft model of --spec draft: a smaller model of the same vocabulary"}, \
    {"draft-device", OB_OPT_DRAFT_DEVICE, "ROUTE", "the draft model's route (default: the model's)"}, \
    {"spec-fixed", OB_OPT_SPEC_FIXED, NULL, "draft lengths from acceptance alone, not from the timed cost of steps (the bits never depend on either)"}

struct ob_local_params {
    const char *model;             /* MODEL operand: a GGUF file, a Q4NX pack, or an archive
                                      holding either */
    const char *route;             /* "cpu", "ref", "hrx", "hrx-sim", "npu-sim", ...; NULL: "cpu" */
    int threads;                   /* threads of the route; 0: the CPUs available */
    int device;                    /* which device of the route's kind (--gpu): 0 the first */
    int parallel;                  /* live sequences decoded together (engine), >= 1 */
    int cache_slots;               /* KV slots beyond `parallel`, kept as prompt cache */
    int n_ctx;                     /* positions per sequence; 0: OB_LOCAL_CTX_DEFAULT or the
                                      model's training context if that is smaller */
    int chunk;                     /* prompt tokens prefilled per step; 0: whole prompts */
    int max_batch;                 /* token rows per backend pass (larger batches are split) */
    int spec;                      /* enum ob_spec: speculation of requests that do not say;
                                      OB_SPEC_DEFAULT: draft with a draft model, else off */
    int spec_max;                  /* drafted tokens per sequence and step (0..OB_SPEC_MAX) */
    bool spec_fixed;               /* draft lengths from acceptance alone (engine.h) */
    const char *draft_model;       /* a draft model (draft.h), or NULL */
    const char *draft_route;       /* its route; NULL: route's */
};
/* what every command starts from: one sequence, 512-token chunks and passes, no speculation
 * unless a request asks (then up to 8 drafted tokens) */
#define OB_LOCAL_PARAMS_DEFAULT {.route = "cpu", .parallel = 1, .chunk = 512, .max_batch = 512, \
                                 .spec = OB_SPEC_DEFAULT, .spec_max = 8}

struct ob_local {
    struct ob_model *m;
    struct ob_ctx *ctx;            /* ob_ctx_params(ctx) has the resolved threads and n_ctx */
    struct ob_engine *eng;
    struct ob_drafter *draft;      /* the draft model, or NULL */
};

/* Where the route options go: one struct for every command that runs requests. */
struct ob_route_opts {
    struct ob_local_params lp;     /* the in-process route */
    const char *url;               /* -d URL or --url URL: the server route; NULL: in process */
    struct ob_server_opts srv;     /* --wait, --timeout, --retries (the server route's) */
    const char *local_only;        /* the first option given that only an in-process route
                                      takes ("-t"), for ob_route_opts_check */
};
#define OB_ROUTE_OPTS_DEFAULT {.lp = OB_LOCAL_PARAMS_DEFAULT, .srv = OB_SERVER_OPTS_DEFAULT}
/* Is this -d argument a server's URL rather than a route name ("://" in it)? */
bool ob_route_is_url(const char *route);
/*
 * One option of a command's loop, if it is a route option (the rows above, the spec rows and
 * the server rows): its argument into o. 1 when taken, 0 when c is not a route option (the
 * command's own), -1 when its argument is bad (with "--NAME: why" in ob_errmsg()).
 */
int ob_opt_route(int c, const char *arg, struct ob_route_opts *o);
/* After the loop: OB_EUSAGE "OPTION applies to in-process routes, not to a server URL" when
 * o->url is set and an in-process option was given, else 0. */
int ob_route_opts_check(const struct ob_route_opts *o);

/* --gpu's argument (0 .. 255) into p->device; false with "--gpu: why" in ob_errmsg() */
bool ob_opt_gpu(const char *arg, struct ob_local_params *p);
/* c one of OB_OPT_SPEC .. OB_OPT_SPEC_FIXED: its argument into p; false with "--NAME: why"
 * in ob_errmsg() */
bool ob_opt_spec(int c, const char *arg, struct ob_local_params *p);
/* --spec's words (and the "spec" field's: record.h) */
extern const struct ob_opt_word ob_spec_words[];
/* The engine's counters in one line on f (a command's --verbose): steps, rows, tokens, and
 * speculation's drafted and accepted tokens (and a second line if the draft model failed). */
void ob_local_report(FILE *f, const char *prog, struct ob_local *l);

/* Open p->model, make a context of parallel + cache_slots slots of n_ctx positions on
 * p->route, the draft model if any (its vocabulary checked: OB_EFORMAT), and an engine over
 * them. On failure nothing is left open and ob_errmsg() says which
 * part failed (the model's messages name its file); the codes are those of ob_model_open,
 * ob_ctx_new and ob_engine_new (OB_EUSAGE for parameters out of range, OB_EDEVICE for a route
 * that is not available, OB_EFORMAT for a bad model, ...). */
int ob_local_open(const struct ob_local_params *p, struct ob_local **out);
void ob_local_free(struct ob_local *l);

#endif
