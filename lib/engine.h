/*
 * engine.h — continuous batching (engine.c): requests in, tokens and finishes out through
 * callbacks. Every in-process command runs on it (through ob_local_open: 1b-gen, 1b-serve,
 * 1b-logprobs, 1b-batchrep).
 *
 * Ownership: ob_engine_submit copies everything it needs from the request; the caller's
 * `user` pointer is handed back to the callbacks untouched. Threads: one driver thread calls
 * ob_engine_step/ob_engine_run (callbacks run there, with no lock held: a callback may submit
 * new requests); submit, cancel, stats and wake are safe from any thread.
 */
#ifndef OB_ENGINE_H
#define OB_ENGINE_H

#include "1b.h"
#include "sample.h"

enum ob_finish_reason {
    OB_FINISH_STOP,                /* a stop token (end of turn, end of text) */
    OB_FINISH_STOP_STRING,         /* a stop string appeared in the text */
    OB_FINISH_LENGTH,              /* max_tokens generated */
    OB_FINISH_CONTEXT,             /* the context is full */
    OB_FINISH_CANCELLED,
    OB_FINISH_ERROR,
};

struct ob_finish {
    int reason;                    /* enum ob_finish_reason */
    int n_prompt, n_cached, n_gen; /* prompt tokens, of them reused from the cache, generated */
    size_t text_len;               /* bytes of generated text to keep (cut before a stop string) */
    double prefill_s, decode_s;    /* submit -> first token, first -> last token */
    const char *error;             /* OB_FINISH_ERROR: why */
};

typedef void (*ob_on_token)(void *user, uint64_t handle, const struct ob_token_info *t);
typedef void (*ob_on_finish)(void *user, uint64_t handle, const struct ob_finish *f);

/* Speculative decoding (engine.c: "Speculation"): drafted tokens verified in one step. It
 * changes how many steps a sequence takes, never what it receives. */
enum ob_spec {
    OB_SPEC_DEFAULT,               /* a request: the engine's mode */
    OB_SPEC_OFF,
    OB_SPEC_NGRAM,                 /* prompt lookup: what followed the last n-gram before */
    OB_SPEC_DRAFT,                 /* the engine's draft source (a draft model: draft.h) */
};
#define OB_SPEC_MAX 16             /* drafted tokens per sequence and step, at most */
/* A draft source: up to k tokens to follow the sequence t[0..n) (the prompt and the tokens
 * generated so far, the last one at t[n - 1]) into out; returns how many (0 .. k), or < 0
 * when it failed (the sequence then drafts no more). Called on the driver thread; whatever it
 * returns, what the request receives is unchanged. */
typedef int (*ob_draft_fn)(void *user, const int32_t *t, int n, int k, int32_t *out);
/* A draft source for many sequences at once (the engine's: a draft model, draft.h): for each
 * of the n sequences q[i], up to q[i].k tokens to follow q[i].t[0..q[i].n) into q[i].out and
 * their count into q[i].m (k = 0: a sequence's prompt, to take in before its first drafts);
 * returns < 0 when it failed (those sequences then draft no more). */
struct ob_draft_seq {
    const int32_t *t;
    int n, k;
    int32_t *out;
    int m;
};
typedef int (*ob_draft_many_fn)(void *user, struct ob_draft_seq *q, int n);

struct ob_request {
    const int32_t *prompt;         /* token ids, template and BOS already applied */
    int n_prompt;
    struct ob_sampling sampling;
    int max_tokens;
    int top_logprobs;              /* 0..OB_MAX_TOP */
    bool cache_prompt;             /* may reuse a cached prefix */
    char **stop;                   /* stop strings */
    int n_stop;
    const int32_t *stop_ids;       /* tokens that end generation (not reported) */
    int n_stop_ids;
    /* teacher forcing: when n_forced > 0 these tokens are taken in turn instead of sampled
     * (and reported with their logprobs); stop tokens and strings are not applied, and the
     * request ends after the last one (OB_FINISH_LENGTH), whatever max_tokens says */
    const int32_t *forced;
    int n_forced;
    int spec;                      /* enum ob_spec: OB_SPEC_DEFAULT is the engine's mode */
    ob_draft_fn draft;             /* drafts from the caller instead (unless spec is off) */
    void *draft_user;
    ob_on_token on_token;
    ob_on_finish on_finish;
    void *user;
};

/* rows of forced tokens scored per step, beyond one row per live sequence */
#define OB_FORCED_ROWS 32

struct ob_engine_params {
    int parallel;                  /* live sequences at most (<= the context's slots) */
    int chunk;                     /* prompt tokens per step in all; <= 0: whole prompts */
    int spec;                      /* enum ob_spec: the mode of requests that do not say;
                                      OB_SPEC_DEFAULT is off */
    int spec_max;                  /* drafted tokens per sequence and step, 0..OB_SPEC_MAX
                                      (0: no request speculates) */
    bool spec_fixed;               /* draft lengths from acceptance alone (the same steps in
                                      every run), not also from the timed cost of steps */
    ob_draft_many_fn draft;        /* the source of OB_SPEC_DRAFT, asked once a step for every
                                      sequence that drafts from it (NULL: such requests are
                                      refused) */
    void *draft_user;
};

struct ob_engine_stats {
    uint64_t steps, rows, finished, tokens_generated, tokens_prompt, tokens_cached;
    /* speculation: verify steps (a sequence's rows with at least one drafted token), tokens
     * drafted, of them accepted (so many decode steps saved) */
    uint64_t spec_steps, spec_drafted, spec_accepted;
    int queued, live;
};

struct ob_engine;
int ob_engine_new(struct ob_ctx *ctx, const struct ob_engine_params *p, struct ob_engine **out);
void ob_engine_free(struct ob_engine *e);
int ob_engine_submit(struct ob_engine *e, const struct ob_request *r, uint64_t *handle);
void ob_engine_cancel(struct ob_engine *e, uint64_t handle);
/* one scheduling step; returns the rows computed (0 when nothing is live) or an error */
int ob_engine_step(struct ob_engine *e);
/* steps until every submitted request has finished */
int ob_engine_run(struct ob_engine *e);
bool ob_engine_idle(struct ob_engine *e);
/* sleep up to `seconds` unless work is waiting; ob_engine_wake ends the wait */
void ob_engine_wait(struct ob_engine *e, double seconds);
void ob_engine_wake(struct ob_engine *e);
void ob_engine_stats(struct ob_engine *e, struct ob_engine_stats *s);

/*
 * The barrier (barrier.c): `rounds` times, submit `width` identical copies of r at once (so
 * that with parallel >= width they are admitted into the same step), run them to the end and
 * call fn for each copy with its tokens. r's callbacks and user pointer are not used. The
 * engine must be idle when called and is driven by this function.
 */
typedef void (*ob_barrier_fn)(void *user, int round, int copy, const struct ob_finish *f,
                              const struct ob_token_info *toks, int n);
int ob_barrier_run(struct ob_engine *e, const struct ob_request *r, int width, int rounds,
                   ob_barrier_fn fn, void *user);

#endif
