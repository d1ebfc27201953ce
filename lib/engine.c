/*
 * engine.c — continuous batching over one inference context: the scheduler of every command
 * that runs a model in process (1b-gen, 1b-serve, 1b-logprobs, 1b-batchrep; lib/local.c opens
 * it with the model and the context).
 *
 * The context has n_slots KV slots. At most `parallel` of them are live (a request being
 * prefilled or decoded); the others keep the tokens of finished requests as a prompt cache.
 * Every step:
 *   1. admits waiting requests into free slots: the non-live slot whose cached tokens share
 *      the longest prefix with the new prompt (least recently used on a tie), so that only
 *      the rest of the prompt is prefilled (cache_prompt; by the contract the reused keys and
 *      values are bitwise what a fresh prefill would compute);
 *   2. builds one batch: one row per decoding sequence, then prompt rows of prefilling
 *      sequences (at most `chunk` per step in all, in admission order);
 *   3. runs the forward pass; for every decoding row and every prompt that finished its
 *      prefill, computes the log-probabilities and samples the next token (RNG keyed by the
 *      request's seed and the token's position), a row a task on the route's host threads
 *      (pick_one), then emits them in row order;
 *   4. retires sequences that hit a stop token, a stop string, max_tokens or the context end.
 * A row's logits do not depend on the other rows of its batch, so what a request receives
 * does not depend on which requests it ran with, on the chunk size, on the cache, or on the
 * thread count.
 *
 * Threads: one thread drives the engine (ob_engine_step); ob_engine_submit, ob_engine_cancel,
 * ob_engine_stats and ob_engine_wake may be called from any thread. Only the driver touches
 * jobs, slots and the waiting and live lists; other threads meet it under `mu` in three
 * places: the incoming list (submissions), the list of handles to cancel, and the counters
 * (with the waiting and live counts the driver publishes). Callbacks run on the driver, with
 * no lock held, and may submit new requests.
 *
 * Teacher forcing: the forced tokens are known in advance, so they are prefilled like the
 * prompt (in chunks, with logits wanted at every position from the last prompt token on)
 * instead of being decoded one step at a time; each row's logits are the same bits either
 * way.
 *
 * Speculation (ob_spec): a decoding sequence whose last token t sits at position P may add
 * drafted tokens d1..dk at P+1..P+k to its rows of the step. Row i's logits are those plain
 * decoding would compute for position P+1+i if d1..di were the tokens generated before it
 * (rows are independent, and a row attends to its own slot's positions up to its own), so the
 * token sampled from them (keyed by seed and position, as always) is the one plain decoding
 * would sample whenever the drafts before it were. Verification emits the pick of row 0; while
 * a pick equals the next draft it emits the pick of the next row; the first pick that differs
 * (or the pick after the last draft) is the last one emitted. Each pick goes through emit, so
 * stop tokens, stop strings, max_tokens and the context end a sequence at exactly the token
 * plain decoding ends it at. The slot then counts only the positions of accepted tokens: the
 * K/V written for rejected drafts lie past its end, are never read, and are overwritten.
 * Drafts come from prompt lookup (ngram_draft), the engine's draft source (a draft model,
 * draft.c, asked once a step for all its sequences) or the request's own (ob_request.draft);
 * how many a sequence tries adapts to how many were accepted lately (adapt), to what a step
 * costs on this machine as timed (draft_trim), and all sequences together draft at most
 * draft_cap rows a step. None of it can change a token or a bit, only the number of steps.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "1b.h"
#include "engine.h"
#include "sb.h"
#include "model.h"
#include "sample.h"
#include "backend.h"
#include "host/pool.h"

enum phase { S_FREE, S_PREFILL, S_DECODE };

/* the most rows of a decode step: 256 sequences and 64 drafted rows */
#define OB_DRAFT_ROWS 64
#define COST_ROWS (256 + OB_DRAFT_ROWS)

struct slot {
    int phase;
    int32_t *tokens;               /* tokens whose K/V are in the slot (cached or live) */
    int n_tokens;                  /* valid entries of tokens[] (= positions filled) */
    uint64_t last_used;
    struct job *job;               /* live request */
};

struct job {
    struct ob_request r;           /* a copy whose arrays point to the owned ones below */
    int32_t *prompt, *stop_ids, *forced;
    char **stop;
    uint64_t handle;
    int slot;
    int32_t *feed;                 /* tokens to prefill: the prompt, then all but the last forced
                                      token; n_feed of them */
    int n_feed;
    int n_prompt_done;             /* fed positions in the cache */
    int n_cached;                  /* of them, reused from the prompt cache */
    int n_gen;
    struct ob_sb text;             /* generated bytes (for stop strings) */
    size_t stop_at;                /* where the stop string that ended it starts */
    bool cancelled;
    double t_submit, t_first, t_last;
    /* speculation */
    bool spec;                     /* this job drafts */
    int spec_k;                    /* drafted tokens to try at the next step */
    float spec_hit, spec_miss;     /* decayed counts of drafted tokens confirmed and refused */
    int spec_pause, spec_backoff;  /* steps left without drafting; the next pause */
    int spec_starved;              /* steps in a row whose drafts the cost trimmed away */
    int n_draft;                   /* this step: drafted tokens after its last token */
    int32_t draft[OB_SPEC_MAX];
    bool draft_engine;             /* drafts from the engine's source (OB_SPEC_DRAFT) */
    bool draft_warm;               /* the source has drafted for it before */
    struct job *next;
};

/* A wanted row's token, worked out on the pool before the step's rows are emitted in order
 * (pick_one): what emit would compute there, keyed by what it depends on besides the row's
 * logits and the request (the position sampled at, or which forced token is scored). emit
 * takes it where the key matches and computes the token itself where not. */
struct pick {
    bool done;
    int64_t key;
    struct ob_token_info ti;
};

struct ob_engine {
    struct ob_ctx *ctx;
    struct ob_model *m;
    struct ob_engine_params p;
    int n_vocab, n_ctx;
    struct slot *slots;
    int n_slots;
    uint64_t clock;
    /* driver only */
    struct job *waiting, **waiting_tail;   /* admitted in submission order */
    struct job *live_order[256];           /* live jobs in admission order */
    int n_live;
    int logits_rows;                       /* rows the logits buffer holds */
    int draft_cap;                         /* drafted rows per step, all sequences together */
    struct ob_draft_seq dq[256];           /* this step's asks of the engine's draft source */
    struct job *dq_job[256];
    /* what a decode step costs: its decayed mean time at each number of rows it was timed
     * at (a kernel's cost can jump between two row counts: a streamed panel below, a GEMM
     * above), a line a + b * rows fitted to all of them for row counts never timed (decayed
     * sums), and the engine's draft source's seconds per drafted token (decayed average) */
    double cost_t[COST_ROWS + 1], cost_n[COST_ROWS + 1];
    double fit_w, fit_r, fit_t, fit_rr, fit_rt;
    double draft_s, draft_n;               /* seconds and passes (a guess of each sequence) */
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *incoming, **incoming_tail;
    uint64_t next_handle;
    uint64_t *cancel;                      /* handles to cancel at the next step */
    size_t n_cancel, cap_cancel;
    int pub_waiting, pub_live;             /* the driver's counts, published */
    /* step buffers: n_rows rows in the step being run; row_job[i] is NULL once its job has
     * finished (and been freed) in that step, so that nothing touches it again */
    int32_t *tok, *pos, *seq, *want;
    struct job **row_job;
    int n_rows;
    float *logits;
    struct ob_sample_scratch *ss;
    /* the picks of a step's wanted rows, on the route's host threads (or the engine's own):
     * picks[w] for want[w], a scratch per thread (ss_t[0] = ss) */
    struct ob_pool *pool, *own_pool;
    struct pick *picks;
    struct ob_sample_scratch **ss_t;
    int n_ss;
    struct ob_engine_stats stats;
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The pool the picks run on: the route's host threads, idle between forward passes, or (a
 * route without, as a GPU's) a pool of the context's thread count; none with one thread.
 * Thread t's scratch is made when it first has a row (ss_t[0] is ss). */
static int picks_new(struct ob_engine *e)
{
    int threads = ob_ctx_params(e->ctx)->n_threads, err;
    e->pool = ob_ctx_pool(e->ctx);
    if (!e->pool && threads > 1) {
        if ((err = ob_pool_new(threads, &e->own_pool)))
            return err;
        e->pool = e->own_pool;
    }
    e->n_ss = ob_pool_threads(e->pool);
    e->picks = calloc((size_t)e->logits_rows, sizeof *e->picks);
    e->ss_t = calloc((size_t)e->n_ss, sizeof *e->ss_t);
    if (!e->picks || !e->ss_t)
        return ob_seterr(OB_ENOMEM, "out of memory");
    e->ss_t[0] = e->ss;
    return 0;
}

/* picks[w]: the token of wanted row w as emit would take it, if it will (a failure, even of
 * memory, leaves it to emit, which then reports it). A task per row: whole results, so the
 * threads change nothing but the time. */
static void pick_one(void *ctx, int w, int t)
{
    struct ob_engine *e = ctx;
    struct pick *pk = &e->picks[w];
    int row = e->want[w];
    struct job *j = e->row_job[row];
    const float *lg = e->logits + (size_t)w * e->n_vocab;
    pk->done = false;
    if (!j || j->r.max_tokens == 0 || t >= e->n_ss)
        return;
    if (j->r.n_forced > 0) {               /* row p scores forced token p - (n_prompt - 1) */
        pk->key = e->pos[row] - (j->r.n_prompt - 1);
        pk->done = pk->key >= 0 && pk->key < j->r.n_forced &&
                   !ob_score_token(lg, (uint32_t)e->n_vocab, j->r.forced[pk->key],
                                   j->r.top_logprobs, &pk->ti);
        return;
    }
    if (!e->ss_t[t] && ob_sample_scratch_new(e->n_vocab, &e->ss_t[t]))
        return;
    pk->key = e->pos[row] + 1;             /* the sampled token's position */
    pk->done = !ob_sample_token(e->ss_t[t], lg, (uint32_t)e->n_vocab, &j->r.sampling,
                                (uint64_t)pk->key, j->r.top_logprobs, &pk->ti);
}

int ob_engine_new(struct ob_ctx *ctx, const struct ob_engine_params *p, struct ob_engine **out)
{
    const struct ob_ctx_params *cp = ob_ctx_params(ctx);
    if (p->parallel < 1 || p->parallel > cp->n_slots || p->parallel > 256)
        return ob_seterr(OB_EUSAGE, "parallel %d must be between 1 and the %d slots (max 256)",
                         p->parallel, cp->n_slots);
    if (p->spec_max < 0 || p->spec_max > OB_SPEC_MAX)
        return ob_seterr(OB_EUSAGE, "spec_max %d is outside [0, %d]", p->spec_max, OB_SPEC_MAX);
    if (p->spec < OB_SPEC_DEFAULT || p->spec > OB_SPEC_DRAFT)
        return ob_seterr(OB_EUSAGE, "unknown speculation mode %d", p->spec);
    if (p->spec == OB_SPEC_DRAFT && !p->draft)
        return ob_seterr(OB_EUSAGE, "speculation by a draft model, but no draft model");
    struct ob_engine *e = calloc(1, sizeof *e);
    if (!e)
        return ob_seterr(OB_ENOMEM, "out of memory");
    e->ctx = ctx;
    e->m = ob_ctx_model(ctx);
    e->p = *p;
    if (e->p.chunk <= 0)
        e->p.chunk = cp->n_ctx;              /* whole prompts */
    e->n_vocab = (int)ob_model_hparams(e->m)->n_vocab;
    e->n_ctx = cp->n_ctx;
    e->n_slots = cp->n_slots;
    e->waiting_tail = &e->waiting;
    e->incoming_tail = &e->incoming;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    /* drafted rows: up to spec_max for each sequence, 64 in all (under load, less each) */
    e->draft_cap = e->p.parallel * e->p.spec_max < OB_DRAFT_ROWS ? e->p.parallel * e->p.spec_max
                                                              : OB_DRAFT_ROWS;
    int rows = e->p.parallel + e->p.chunk + e->draft_cap;
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    e->tok = malloc((size_t)rows * sizeof *e->tok);
    e->pos = malloc((size_t)rows * sizeof *e->pos);
    e->seq = malloc((size_t)rows * sizeof *e->seq);
    e->want = malloc((size_t)rows * sizeof *e->want);
    e->row_job = malloc((size_t)rows * sizeof *e->row_job);
    /* logits: one row per live sequence, plus the rows forced tokens are scored on */
    e->logits_rows = e->p.parallel + OB_FORCED_ROWS + e->draft_cap;
    e->logits = ob_ctx_host_alloc(ctx, (size_t)e->logits_rows * (size_t)e->n_vocab *
                                           sizeof(float));
    int err = 0;
    if (!e->slots || !e->tok || !e->pos || !e->seq || !e->want || !e->row_job || !e->logits)
        err = ob_seterr(OB_ENOMEM, "out of memory");
    for (int i = 0; !err && i < e->n_slots; i++)
        if (!(e->slots[i].tokens = malloc((size_t)e->n_ctx * sizeof(int32_t))))
            err = ob_seterr(OB_ENOMEM, "out of memory");
    if (!err)
        err = ob_sample_scratch_new(e->n_vocab, &e->ss);
    if (!err)
        err = picks_new(e);
    if (err) {
        ob_engine_free(e);
        return err;
    }
    *out = e;
    return 0;
}

static void job_free(struct job *j)
{
    if (!j)
        return;
    if (j->feed != j->prompt)
        free(j->feed);
    free(j->prompt);
    for (int i = 0; j->stop && i < j->r.n_stop; i++)
        free(j->stop[i]);
    free(j->stop);
    free(j->stop_ids);
    free(j->forced);
    ob_sb_free(&j->text);
    free(j);
}

void ob_engine_free(struct ob_engine *e)
{
    if (!e)
        return;
    for (struct job *j = e->waiting, *n; j; j = n) {
        n = j->next;
        job_free(j);
    }
    for (struct job *j = e->incoming, *n; j; j = n) {
        n = j->next;
        job_free(j);
    }
    for (int i = 0; i < e->n_live; i++)
        job_free(e->live_order[i]);
    if (e->slots)
        for (int i = 0; i < e->n_slots; i++)
            free(e->slots[i].tokens);
    free(e->slots);
    free(e->tok);
    free(e->pos);
    free(e->seq);
    free(e->want);
    free(e->row_job);
    if (e->logits)
        ob_ctx_host_free(e->ctx, e->logits);
    for (int i = 1; e->ss_t && i < e->n_ss; i++)
        ob_sample_scratch_free(e->ss_t[i]);
    free(e->ss_t);
    free(e->picks);
    ob_pool_free(e->own_pool);
    ob_sample_scratch_free(e->ss);
    free(e->cancel);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

int ob_engine_submit(struct ob_engine *e, const struct ob_request *r, uint64_t *handle)
{
    if (r->n_prompt < 1)
        return ob_seterr(OB_EFORMAT, "the prompt is empty");
    /* Positions: a prompt that is only prefilled (max_tokens 0) may fill the context; a
     * generated token takes the position after the prompt (emit stores it there), so
     * generating needs one more; forced tokens are checked below (the last one's logits come
     * from the position before it, so prompt and forced tokens may fill the context). */
    bool gen = r->n_forced == 0 && r->max_tokens > 0;
    if (r->n_prompt > e->n_ctx || (gen && r->n_prompt == e->n_ctx))
        return ob_seterr(OB_ERANGE, "the prompt has %d tokens; the context holds %d%s",
                         r->n_prompt, e->n_ctx,
                         gen ? " (one more is needed to generate)" : "");
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= e->n_vocab)
            return ob_seterr(OB_ERANGE, "prompt token %d is outside the vocabulary of %d",
                             r->prompt[i], e->n_vocab);
    if (r->n_forced > 0 && (int64_t)r->n_prompt + r->n_forced > e->n_ctx)
        return ob_seterr(OB_ERANGE, "%d prompt and %d forced tokens do not fit the context of %d",
                         r->n_prompt, r->n_forced, e->n_ctx);
    if (r->top_logprobs < 0 || r->top_logprobs > OB_MAX_TOP)
        return ob_seterr(OB_ERANGE, "top_logprobs %d is outside [0, %d]", r->top_logprobs,
                         OB_MAX_TOP);
    if (r->spec < OB_SPEC_DEFAULT || r->spec > OB_SPEC_DRAFT)
        return ob_seterr(OB_EUSAGE, "unknown speculation mode %d", r->spec);
    int mode = r->spec == OB_SPEC_DEFAULT ? e->p.spec : r->spec;
    if (mode == OB_SPEC_DRAFT && !e->p.draft && !r->draft)
        return ob_seterr(OB_EUSAGE, "speculation by a draft model was asked for, and no draft "
                         "model is loaded");
    for (int i = 0; i < r->n_forced; i++)
        if (r->forced[i] < 0 || r->forced[i] >= e->n_vocab)
            return ob_seterr(OB_ERANGE, "forced token %d is outside the vocabulary of %d",
                             r->forced[i], e->n_vocab);
    struct job *j = calloc(1, sizeof *j);
    if (!j)
        return ob_seterr(OB_ENOMEM, "out of memory");
    j->r = *r;
    if (r->n_forced > 0) {                 /* forced tokens end only after the last one */
        j->r.max_tokens = r->n_forced;
        j->r.n_stop = 0;
        j->r.n_stop_ids = 0;
    }
    int n_stop = j->r.n_stop, n_stop_ids = j->r.n_stop_ids;
    j->prompt = malloc((size_t)r->n_prompt * sizeof(int32_t));
    j->stop = n_stop ? calloc((size_t)n_stop, sizeof(char *)) : NULL;
    j->stop_ids = n_stop_ids ? malloc((size_t)n_stop_ids * sizeof(int32_t)) : NULL;
    j->forced = r->n_forced > 0 ? malloc((size_t)r->n_forced * sizeof(int32_t)) : NULL;
    j->feed = j->prompt;
    bool oom = !j->prompt || (n_stop && !j->stop) || (n_stop_ids && !j->stop_ids) ||
               (r->n_forced > 0 && !j->forced);
    for (int i = 0; i < n_stop && !oom; i++)
        oom = !(j->stop[i] = strdup(r->stop[i]));
    /* the tokens to prefill: the prompt and every forced token but the last (whose K/V nobody
     * needs) */
    j->n_feed = r->n_forced > 0 ? r->n_prompt + r->n_forced - 1 : r->n_prompt;
    if (!oom && r->n_forced > 0)
        oom = !(j->feed = malloc((size_t)j->n_feed * sizeof(int32_t)));
    if (oom) {
        job_free(j);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    memcpy(j->prompt, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
    if (n_stop_ids)
        memcpy(j->stop_ids, r->stop_ids, (size_t)n_stop_ids * sizeof(int32_t));
    if (r->n_forced > 0) {
        memcpy(j->forced, r->forced, (size_t)r->n_forced * sizeof(int32_t));
        memcpy(j->feed, r->prompt, (size_t)r->n_prompt * sizeof(int32_t));
        memcpy(j->feed + r->n_prompt, r->forced, (size_t)(r->n_forced - 1) * sizeof(int32_t));
    }
    j->r.prompt = j->prompt;
    j->r.stop = j->stop;
    j->r.stop_ids = j->stop_ids;
    j->r.forced = j->forced;
    j->slot = -1;
    /* the draft source: the request's own, the engine's draft model, or prompt lookup */
    bool asked = r->draft ? r->spec != OB_SPEC_OFF : mode == OB_SPEC_NGRAM || mode == OB_SPEC_DRAFT;
    j->spec = asked && e->p.spec_max > 0 && r->n_forced == 0;
    j->draft_engine = !r->draft && mode == OB_SPEC_DRAFT;
    j->spec_k = e->p.spec_max < 4 ? e->p.spec_max : 4;
    j->spec_hit = 2;                             /* a prior: 2 of 3 confirmed */
    j->spec_miss = 1;
    j->spec_backoff = 4;
    j->t_submit = now();
    pthread_mutex_lock(&e->mu);
    j->handle = ++e->next_handle;
    *e->incoming_tail = j;
    e->incoming_tail = &j->next;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (handle)
        *handle = j->handle;
    return 0;
}

/* Ask for a request to end; it finishes with OB_FINISH_CANCELLED at the next step (or not at
 * all if it already finished). */
void ob_engine_cancel(struct ob_engine *e, uint64_t handle)
{
    pthread_mutex_lock(&e->mu);
    if (!OB_GROW(e->cancel, e->cap_cancel, e->n_cancel + 1)) {
        pthread_mutex_unlock(&e->mu);
        return;                           /* the request then runs to its end */
    }
    e->cancel[e->n_cancel++] = handle;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

static bool idle_locked(const struct ob_engine *e)
{
    return !e->incoming && e->pub_waiting == 0 && e->pub_live == 0;
}

bool ob_engine_idle(struct ob_engine *e)
{
    pthread_mutex_lock(&e->mu);
    bool idle = idle_locked(e);
    pthread_mutex_unlock(&e->mu);
    return idle;
}

void ob_engine_wait(struct ob_engine *e, double seconds)
{
    pthread_mutex_lock(&e->mu);
    if (idle_locked(e) && !e->n_cancel) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        double s = (double)t.tv_sec + (double)t.tv_nsec * 1e-9 + seconds;
        t.tv_sec = (time_t)s;
        t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
        pthread_cond_timedwait(&e->cv, &e->mu, &t);
    }
    pthread_mutex_unlock(&e->mu);
}

void ob_engine_wake(struct ob_engine *e)
{
    pthread_mutex_lock(&e->mu);
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void ob_engine_stats(struct ob_engine *e, struct ob_engine_stats *s)
{
    pthread_mutex_lock(&e->mu);
    *s = e->stats;
    int q = e->pub_waiting;
    for (struct job *j = e->incoming; j; j = j->next)
        q++;
    s->queued = q;
    s->live = e->pub_live;
    pthread_mutex_unlock(&e->mu);
}

/* the driver's counts, for the other threads (called with mu held) */
static void publish_locked(struct ob_engine *e)
{
    int w = 0;
    for (struct job *j = e->waiting; j; j = j->next)
        w++;
    e->pub_waiting = w;
    e->pub_live = e->n_live;
}

/* ---- one step ------------------------------------------------------------------------------- */

/* End a job: take it off its slot and the live list, clear the step's rows that point at it,
 * report it (on_finish) and free it. The caller must not touch j afterwards; in a step, the
 * rows still to be handled see NULL instead (a forced job has several rows per step, and any
 * of them may end it). The error message is copied before the callback runs: a callback may
 * call into the library, which may overwrite ob_errmsg()'s buffer. */
static void finish(struct ob_engine *e, struct job *j, int reason, const char *error)
{
    double t = now();
    struct ob_finish f = {
        .reason = reason,
        .n_prompt = j->r.n_prompt,
        .n_cached = j->n_cached,
        .n_gen = j->n_gen,
        .text_len = j->text.len,
        .prefill_s = j->t_first > 0 ? j->t_first - j->t_submit : 0,
        .decode_s = j->t_first > 0 ? t - j->t_first : 0,
        .error = error,
    };
    char msg[1024];
    if (error) {
        snprintf(msg, sizeof msg, "%s", error);
        f.error = msg;
    }
    if (reason == OB_FINISH_STOP_STRING)
        f.text_len = j->stop_at;
    for (int i = 0; i < e->n_rows; i++)
        if (e->row_job[i] == j)
            e->row_job[i] = NULL;
    if (j->slot >= 0) {
        struct slot *s = &e->slots[j->slot];
        s->phase = S_FREE;
        s->job = NULL;
        s->last_used = ++e->clock;
        /* the slot keeps the tokens whose K/V it holds: the prompt cache */
        for (int i = 0; i < e->n_live; i++)
            if (e->live_order[i] == j) {
                memmove(&e->live_order[i], &e->live_order[i + 1],
                        (size_t)(e->n_live - i - 1) * sizeof(struct job *));
                e->n_live--;
                break;
            }
    }
    pthread_mutex_lock(&e->mu);
    publish_locked(e);
    e->stats.finished++;
    e->stats.tokens_generated += (uint64_t)j->n_gen;
    e->stats.tokens_prompt += (uint64_t)(j->r.n_prompt - j->n_cached);
    e->stats.tokens_cached += (uint64_t)j->n_cached;
    pthread_mutex_unlock(&e->mu);
    if (j->r.on_finish)
        j->r.on_finish(j->r.user, j->handle, &f);
    job_free(j);
}

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* the best free slot for a prompt: longest cached prefix, then least recently used */
static int pick_slot(struct ob_engine *e, const struct job *j, int *common)
{
    int best = -1, best_c = -1;
    uint64_t best_t = 0;
    for (int i = 0; i < e->n_slots; i++) {
        const struct slot *s = &e->slots[i];
        if (s->phase != S_FREE)
            continue;
        int c = j->r.cache_prompt ? common_prefix(s->tokens, s->n_tokens, j->r.prompt, j->r.n_prompt) : 0;
        if (best < 0 || c > best_c || (c == best_c && s->last_used < best_t)) {
            best = i;
            best_c = c;
            best_t = s->last_used;
        }
    }
    *common = best_c;
    return best;
}

static void mark_cancelled(struct ob_engine *e, const uint64_t *h, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (struct job *j = e->waiting; j; j = j->next)
            if (j->handle == h[i])
                j->cancelled = true;
        for (int k = 0; k < e->n_live; k++)
            if (e->live_order[k]->handle == h[i])
                e->live_order[k]->cancelled = true;
    }
}

static void admit(struct ob_engine *e)
{
    uint64_t *cancel = NULL;
    size_t n_cancel = 0;
    pthread_mutex_lock(&e->mu);
    if (e->incoming) {
        *e->waiting_tail = e->incoming;
        e->waiting_tail = e->incoming_tail;
        e->incoming = NULL;
        e->incoming_tail = &e->incoming;
    }
    if (e->n_cancel) {                     /* take the list; the driver applies it */
        cancel = e->cancel;
        n_cancel = e->n_cancel;
        e->cancel = NULL;
        e->n_cancel = e->cap_cancel = 0;
    }
    publish_locked(e);
    pthread_mutex_unlock(&e->mu);
    mark_cancelled(e, cancel, n_cancel);
    free(cancel);
    /* cancelled before they started */
    for (struct job **pp = &e->waiting; *pp;) {
        struct job *j = *pp;
        if (j->cancelled) {
            *pp = j->next;
            if (!*pp)
                e->waiting_tail = pp;
            finish(e, j, OB_FINISH_CANCELLED, NULL);
        } else {
            pp = &j->next;
        }
    }
    while (e->waiting && e->n_live < e->p.parallel) {
        struct job *j = e->waiting;
        int common;
        int si = pick_slot(e, j, &common);
        if (si < 0)
            break;
        e->waiting = j->next;
        if (!e->waiting)
            e->waiting_tail = &e->waiting;
        e->live_order[e->n_live++] = j;
        j->next = NULL;
        /* keep at least the last prompt token to compute: its logits give the first token */
        if (common > j->r.n_prompt - 1)
            common = j->r.n_prompt - 1;
        struct slot *s = &e->slots[si];
        s->phase = S_PREFILL;
        s->job = j;
        s->n_tokens = common;
        memcpy(s->tokens, j->feed, (size_t)j->n_feed * sizeof(int32_t));
        j->slot = si;
        j->n_prompt_done = common;
        j->n_cached = common;
    }
    pthread_mutex_lock(&e->mu);
    publish_locked(e);
    pthread_mutex_unlock(&e->mu);
}

static bool is_stop_id(const struct job *j, int32_t id)
{
    for (int i = 0; i < j->r.n_stop_ids; i++)
        if (j->r.stop_ids[i] == id)
            return true;
    return false;
}

/* Append a token's bytes; true if a stop string now appears: the one that starts earliest in
 * the text (its start in stop_at). Only matches that end in the new bytes are new. */
static bool append_text(struct job *j, const char *b, size_t n)
{
    size_t old = j->text.len;
    ob_sb_add(&j->text, b, n);
    if (j->text.oom)
        return false;
    bool found = false;
    for (int i = 0; i < j->r.n_stop; i++) {
        size_t sl = strlen(j->r.stop[i]);
        if (!sl || sl > j->text.len)
            continue;
        size_t from = old + 1 > sl ? old + 1 - sl : 0;
        for (size_t k = from; k + sl <= j->text.len; k++)
            if (memcmp(j->text.p + k, j->r.stop[i], sl) == 0) {
                if (!found || k < j->stop_at)
                    j->stop_at = k;
                found = true;
                break;
            }
    }
    return found;
}

/* Logits of one row: log-probabilities, sampling, callbacks, stop conditions. *id is the
 * token sampled (or scored; -1 on an error). pk (may be NULL): the row's pick, taken where
 * its key is what this row is sampled at or scores. False when the job has finished (and is
 * freed). */
static bool emit(struct ob_engine *e, struct job *j, const float *logits, const struct pick *pk,
                 double t, int32_t *id)
{
    struct slot *s = &e->slots[j->slot];
    int position = s->n_tokens;                  /* where the sampled token will sit */
    *id = -1;
    if (j->r.max_tokens == 0) {                  /* prefill only */
        finish(e, j, OB_FINISH_LENGTH, NULL);
        return false;
    }
    struct ob_token_info ti;
    memset(&ti, 0, sizeof ti);
    int err = 0;
    if (pk && pk->done && pk->key == (j->r.n_forced > 0 ? j->n_gen : position))
        ti = pk->ti;
    else
        err = j->r.n_forced > 0
                  ? ob_score_token(logits, (uint32_t)e->n_vocab, j->r.forced[j->n_gen],
                                   j->r.top_logprobs, &ti)
                  : ob_sample_token(e->ss, logits, (uint32_t)e->n_vocab, &j->r.sampling,
                                    (uint64_t)position, j->r.top_logprobs, &ti);
    if (err) {
        finish(e, j, OB_FINISH_ERROR, ob_errmsg());
        return false;
    }
    *id = ti.id;
    if (j->t_first == 0)
        j->t_first = t;
    j->t_last = t;
    if (j->r.n_forced > 0) {                     /* scored, not sampled: the slot is untouched */
        j->n_gen++;
        const char *fb;
        size_t fn;
        ob_tok_piece(e->m->tok, ti.id, &fb, &fn);
        append_text(j, fb, fn);
        if (j->r.on_token)
            j->r.on_token(j->r.user, j->handle, &ti);
        if (j->n_gen == j->r.n_forced) {
            finish(e, j, OB_FINISH_LENGTH, NULL);
            return false;
        }
        return true;
    }
    if (is_stop_id(j, ti.id)) {
        finish(e, j, OB_FINISH_STOP, NULL);
        return false;
    }
    j->n_gen++;
    const char *bytes;
    size_t nb;
    ob_tok_piece(e->m->tok, ti.id, &bytes, &nb);
    bool stop_string = append_text(j, bytes, nb);
    if (j->r.on_token)
        j->r.on_token(j->r.user, j->handle, &ti);
    /* the token is now part of the sequence: its K/V are computed next step */
    s->tokens[s->n_tokens] = ti.id;
    s->phase = S_DECODE;
    if (stop_string)
        finish(e, j, OB_FINISH_STOP_STRING, NULL);
    else if (j->n_gen >= j->r.max_tokens)
        finish(e, j, OB_FINISH_LENGTH, NULL);
    else if (s->n_tokens + 1 >= e->n_ctx)
        finish(e, j, OB_FINISH_CONTEXT, NULL);
    else
        return true;
    return false;
}

/* ---- speculation ------------------------------------------------------------------------- */

enum { NGRAM_MAX = 4, NGRAM_MIN = 2 };

/* Prompt lookup: the most recent earlier occurrence of the last g tokens of t[0..n) (g from
 * NGRAM_MAX down to NGRAM_MIN), and up to k of the tokens that followed it. */
static int ngram_draft(const int32_t *t, int n, int k, int32_t *out)
{
    for (int g = n - 1 < NGRAM_MAX ? n - 1 : NGRAM_MAX; g >= NGRAM_MIN; g--) {
        const int32_t *tail = t + n - g;
        for (int i = n - g - 1; i >= 0; i--)
            if (t[i] == tail[0] && !memcmp(t + i, tail, (size_t)g * sizeof *t)) {
                int m = n - (i + g) < k ? n - (i + g) : k;
                memcpy(out, t + i + g, (size_t)m * sizeof *t);
                return m;
            }
    }
    return 0;
}

/* How many tokens a decoding job may draft this step (at most budget): no more than could be
 * emitted (max_tokens, and the context's last position); 0 while it pauses. */
static int draft_len(struct ob_engine *e, struct job *j, const struct slot *s, int budget)
{
    if (j->spec_pause > 0) {
        j->spec_pause--;
        return 0;
    }
    int last = s->n_tokens;                      /* tokens[last] is the sequence's last token */
    int k = j->spec_k < budget ? j->spec_k : budget;
    if (k > j->r.max_tokens - j->n_gen - 1)
        k = j->r.max_tokens - j->n_gen - 1;
    if (k > e->n_ctx - 1 - last)
        k = e->n_ctx - 1 - last;
    return k > 0 ? k : 0;
}

/* m tokens a source drafted into j->draft (m < 0: it failed, and the job drafts no more):
 * how many to verify, up to k, ending before the first that is not a token */
static int draft_taken(struct ob_engine *e, struct job *j, int m, int k)
{
    if (m < 0)
        j->spec = false;
    m = m < 0 ? 0 : m > k ? k : m;
    for (int i = 0; i < m; i++)
        if (j->draft[i] < 0 || j->draft[i] >= e->n_vocab)
            return i;
    return m;
}

/* a decode step of rows took t seconds */
static void cost_add(struct ob_engine *e, int rows, double t)
{
    const double d = 0.95, dr = 0.75;
    e->fit_w = d * e->fit_w + 1;
    e->fit_r = d * e->fit_r + rows;
    e->fit_t = d * e->fit_t + t;
    e->fit_rr = d * e->fit_rr + (double)rows * rows;
    e->fit_rt = d * e->fit_rt + rows * t;
    if (rows <= COST_ROWS) {
        e->cost_t[rows] = dr * e->cost_t[rows] + t;
        e->cost_n[rows] = dr * e->cost_n[rows] + 1;
    }
}

/* the fitted cost of a step, a + b * rows (b 0 until the passes had several sizes) */
static void cost_line(const struct ob_engine *e, double *a, double *b)
{
    double den = e->fit_w * e->fit_rr - e->fit_r * e->fit_r;
    *b = 0;
    if (e->fit_w >= 4 && den > 1e-6 * e->fit_w * e->fit_rr)
        *b = (e->fit_w * e->fit_rt - e->fit_r * e->fit_t) / den;
    if (*b < 0)
        *b = 0;
    *a = e->fit_w > 0 ? (e->fit_t - *b * e->fit_r) / e->fit_w : 0;
    if (*a < 0)
        *a = 0;
}

/* What steps of w .. w + n rows cost (c[0 .. n]): as timed where a step of that many rows
 * was; between two row counts timed, on the straight line joining them (a jump between them
 * shows once a step lands past it, and is then known); beyond the last timed, its time plus
 * the fitted slope for each row more; below the first, the fitted line (no more than the
 * first's time). Never less than the step before it. */
static void cost_curve(const struct ob_engine *e, int w, int n, double *c)
{
    double a, b;
    cost_line(e, &a, &b);
    int lo = -1;                                 /* the last timed row count so far */
    for (int r = 1; r < w && r <= COST_ROWS; r++)
        if (e->cost_n[r] > 0)
            lo = r;
    for (int i = 0; i <= n; i++) {
        int r = w + i;
        if (r <= COST_ROWS && e->cost_n[r] > 0) {
            c[i] = e->cost_t[r] / e->cost_n[r];
            lo = r;
        } else {
            int hi = r + 1;
            while (hi <= COST_ROWS && !(e->cost_n[hi] > 0))
                hi++;
            double th = hi <= COST_ROWS ? e->cost_t[hi] / e->cost_n[hi] : 0;
            double tl = lo > 0 ? e->cost_t[lo] / e->cost_n[lo] : 0;
            if (lo > 0 && hi <= COST_ROWS)
                c[i] = tl + (th - tl) * (r - lo) / (hi - lo);
            else if (lo > 0)
                c[i] = tl + b * (r - lo);
            else if (hi <= COST_ROWS)
                c[i] = a + b * r < th ? a + b * r : th;
            else
                c[i] = a + b * r;
        }
        if (i > 0 && c[i] < c[i - 1])
            c[i] = c[i - 1];
    }
}

/* the draft model's seconds per pass lately (0 before it was timed) */
static double draft_cost(const struct ob_engine *e)
{
    return e->draft_n > 0 ? e->draft_s / e->draft_n : 0;
}

/* Could drafts pay at all, were they sure to be accepted, with w sequences decoding: would
 * one sequence's 1 .. OB_SPEC_MAX sure drafts raise the tokens a second? (Yes while no
 * decode step was timed.) */
static bool draft_can_pay(const struct ob_engine *e, int w, bool engine_src)
{
    double c[OB_SPEC_MAX + 1];
    if (e->fit_w == 0)
        return true;
    cost_curve(e, w, OB_SPEC_MAX, c);
    double cd = engine_src ? draft_cost(e) : 0;
    for (int m = 1; m <= OB_SPEC_MAX; m++)
        if ((w + m) * c[0] > w * (c[m] + m * cd))
            return true;
    return false;
}

/*
 * Under load, draft only what pays (unless the engine drafts from acceptance alone,
 * spec_fixed): with W sequences decoding, a step of R rows costs C(R) (cost_curve) and yields
 * T tokens (W, and the expected accepted drafts); the j-th draft of a sequence whose drafts
 * were confirmed at rate p adds p^j tokens (all before it must hold) for one row and, from
 * the engine's draft model, one more of its passes if no other sequence drafts that deep (its
 * sequences guess in lockstep, a pass a guess). Order the drafts by gain, best first, and
 * keep the first m of them for the m that yields the most tokens a second: T / (C(W + m) +
 * the draft passes), m = 0 being plain decoding. Where a step's cost hardly grows with its
 * rows (decode bound by memory) every draft the acceptance allows is kept; where it grows in
 * proportion (compute-bound, wide batches) few or none are; where it jumps (a kernel changing
 * from one row count to the next) the drafts kept either stop before the jump or go past it
 * far enough to pay for it. A sequence kept from drafting 8 steps in a row still tries a token
 * (up to 4 from the draft model, whose first guesses after a pause cost it a catch-up anyway),
 * so that its rate can rise again, where sure drafts could pay. Only the number of steps
 * depends on this.
 */
#define DRAFT_MARGIN 1.05
static void draft_trim(struct ob_engine *e, struct job **js, int *k, int n, int w)
{
    int took[256] = {0}, order[OB_DRAFT_ROWS], depth = 0, total = 0;
    double gain[256], p[256], c[OB_DRAFT_ROWS + 1];
    for (int i = 0; i < n; i++) {
        struct job *j = js[i];
        p[i] = j->spec_hit / (j->spec_hit + j->spec_miss);
        gain[i] = p[i];
        total += k[i];
    }
    cost_curve(e, w, total, c);
    double cd = draft_cost(e), tokens = w, plain = w / (c[0] > 0 ? c[0] : 1e-9);
    double best_rate = plain;
    int best_m = 0;
    for (int m = 1; m <= total; m++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (took[i] < k[i] && (best < 0 || gain[i] > gain[best]))
                best = i;
        bool pass = js[best]->draft_engine && took[best] == depth;
        depth += pass;
        tokens += gain[best];
        took[best]++;
        gain[best] *= p[best];
        order[m - 1] = best;
        double cost = c[m] + depth * cd;
        if (tokens / (cost > 0 ? cost : 1e-9) > best_rate) {
            best_rate = tokens / (cost > 0 ? cost : 1e-9);
            best_m = m;
        }
    }
    if (best_rate < DRAFT_MARGIN * plain)
        best_m = 0;                              /* too close to call: plain decoding */
    memset(took, 0, sizeof took);
    for (int m = 0; m < best_m; m++)
        took[order[m]]++;
    /* once a sequence was kept from drafting 8 steps in a row, it and every other sequence
     * kept from drafting in this step draft one token, or up to 4 from the draft model (a
     * probe), so that their rates, which only verify steps update, can rise again; unless no
     * rate could make a draft pay. Together, so that the probes' rows cost one step past the
     * plain step's rows (where a step's cost jumps) rather than one in every step. */
    bool probe_now = false, starved = false, pay[2] = {false, false};
    for (int i = 0; i < n && !starved; i++)
        starved = took[i] == 0 && js[i]->spec_starved >= 8;
    if (starved) {                               /* whether sure drafts could pay: once a step */
        pay[0] = draft_can_pay(e, w, false);
        pay[1] = draft_can_pay(e, w, true);
    }
    for (int i = 0; i < n && !probe_now; i++)
        probe_now = took[i] == 0 && js[i]->spec_starved >= 8 && pay[js[i]->draft_engine];
    for (int i = 0; i < n; i++) {
        int probe = js[i]->draft_engine ? 4 : 1;
        if (took[i] == 0 && probe_now && pay[js[i]->draft_engine])
            took[i] = k[i] < probe ? k[i] : probe;
        k[i] = took[i];
        js[i]->spec_starved = took[i] > 0 ? 0 : js[i]->spec_starved + 1;
    }
}

/* Every decoding job's drafted tokens for this step (j->n_draft, j->draft): prompt lookup and
 * requests' own sources one job at a time, the engine's source once for all its jobs; all
 * together at most draft_cap. */
static void draft_all(struct ob_engine *e)
{
    int budget = e->draft_cap, n_q = 0, n_js = 0, w = 0, ks[256];
    struct job *js[256];
    for (int i = 0; i < e->n_live; i++) {
        struct job *j = e->live_order[i];
        struct slot *s = &e->slots[j->slot];
        j->n_draft = 0;
        if (s->phase != S_DECODE)
            continue;
        w++;
        int k = j->spec && budget > 0 ? draft_len(e, j, s, budget) : 0;
        budget -= k;
        if (k > 0) {
            js[n_js] = j;
            ks[n_js++] = k;
        }
    }
    /* by the timed costs once a decode step was timed; acceptance alone before */
    if (n_js > 0 && !e->p.spec_fixed && e->fit_w > 0)
        draft_trim(e, js, ks, n_js, w);
    for (int i = 0; i < n_js; i++) {
        struct job *j = js[i];
        struct slot *s = &e->slots[j->slot];
        int k = ks[i], n = s->n_tokens + 1;
        if (k == 0)
            continue;
        if (j->draft_engine) {
            e->dq[n_q] = (struct ob_draft_seq){.t = s->tokens, .n = n, .k = k, .out = j->draft};
            e->dq_job[n_q++] = j;
        } else if (j->r.draft) {
            int m = j->r.draft(j->r.draft_user, s->tokens, n, k, j->draft);
            j->n_draft = draft_taken(e, j, m, k);
        } else {
            j->n_draft = ngram_draft(s->tokens, n, k, j->draft);
        }
    }
    if (n_q == 0)
        return;
    double t0 = now();
    int err = e->p.draft(e->p.draft_user, e->dq, n_q), passes = 0;
    bool warm = true;
    for (int i = 0; i < n_q; i++) {
        struct job *j = e->dq_job[i];
        j->n_draft = draft_taken(e, j, err < 0 ? -1 : e->dq[i].m, e->dq[i].k);
        passes = err < 0 || e->dq[i].m < passes ? passes : e->dq[i].m;
        warm = warm && j->draft_warm;
        j->draft_warm = true;
    }
    /* a sequence's first drafts cost the draft model its prompt too: not counted */
    if (warm && passes > 0) {
        e->draft_s = 0.9 * e->draft_s + (now() - t0);
        e->draft_n = 0.9 * e->draft_n + passes;
    }
}

/* How many to draft next, from the rate p at which this sequence's drafted tokens were
 * confirmed lately (each verify step counts its accepted run as confirmed tokens and the
 * first refused one, if any, as a miss; older steps weigh less). A run of k is kept whole
 * with probability about p^k: draft the longest k with p^k >= 1/4 (1 .. spec_max). Below
 * p = 0.3 a verify step costs more than it yields on most machines: pause drafting, 4 steps,
 * then twice as long each time (up to 64) while probes of one token keep failing. Only the
 * number of steps depends on this, never a token. */
static void adapt(struct ob_engine *e, struct job *j, int k, int acc)
{
    j->spec_hit = 0.75f * j->spec_hit + (float)acc;
    j->spec_miss = 0.75f * j->spec_miss + (acc < k ? 1.0f : 0.0f);
    float p = j->spec_hit / (j->spec_hit + j->spec_miss);
    if (p < 0.3f) {
        j->spec_k = 1;
        j->spec_pause = j->spec_backoff;
        j->spec_backoff = j->spec_backoff < 64 ? 2 * j->spec_backoff : 64;
        return;
    }
    j->spec_backoff = 4;
    int n = 1;
    for (float q = p * p; n < e->p.spec_max && q >= 0.25f; q *= p)
        n++;
    j->spec_k = n;
}

/* A decoding job's rows of the step: its last token at position last, then its n_draft drafted
 * tokens; logits holds their n_draft + 1 rows. Emit the picks while they confirm the drafts
 * (see the top of the file). */
static void verify(struct ob_engine *e, struct job *j, const float *logits,
                   const struct pick *pk, int last, double t)
{
    struct slot *s = &e->slots[j->slot];
    int k = j->n_draft, acc = 0;
    bool alive = true;
    j->n_draft = 0;
    for (int i = 0; i <= k && alive; i++) {
        int32_t want = i < k ? j->draft[i] : -1, id;
        s->n_tokens = last + 1 + i;              /* the positions before this pick's */
        alive = emit(e, j, logits + (size_t)i * e->n_vocab, pk ? pk + i : NULL, t, &id);
        if (i == k || id != want)
            break;
        acc++;
    }
    pthread_mutex_lock(&e->mu);
    e->stats.spec_steps++;
    e->stats.spec_drafted += (uint64_t)k;
    e->stats.spec_accepted += (uint64_t)acc;
    pthread_mutex_unlock(&e->mu);
    if (alive)
        adapt(e, j, k, acc);
}

/* The prompts that finished prefilling in this step, of sequences that will draft from the
 * engine's source: given to it now, before their first tokens, so that taking them in counts
 * as prefill and the first drafts cost no more than later ones; not where the timed costs say
 * its drafts cannot pay (a sequence's first drafts then take its prompt in, if ever). */
static void draft_prompts(struct ob_engine *e)
{
    int n_q = 0;
    if (!e->p.spec_fixed && e->draft_n > 0 && !draft_can_pay(e, e->n_live, true))
        return;                                  /* its drafts would not pay: not now */
    for (int i = 0; i < e->n_rows; i++) {
        struct job *j = e->row_job[i];
        struct slot *s = j ? &e->slots[j->slot] : NULL;
        if (!j || !j->spec || !j->draft_engine || j->draft_warm || j->r.max_tokens < 2 ||
            s->phase == S_DECODE || j->n_prompt_done < j->n_feed ||
            (i + 1 < e->n_rows && e->row_job[i + 1] == j))
            continue;
        e->dq[n_q] = (struct ob_draft_seq){.t = s->tokens, .n = s->n_tokens, .k = 0};
        e->dq_job[n_q++] = j;
        j->draft_warm = true;
    }
    if (n_q > 0 && e->p.draft(e->p.draft_user, e->dq, n_q) < 0)
        for (int i = 0; i < n_q; i++)
            e->dq_job[i]->spec = false;
}

int ob_engine_step(struct ob_engine *e)
{
    e->n_rows = 0;                               /* no rows yet: nothing for finish to clear */
    admit(e);
    /* cancellations of live jobs */
    for (int i = 0; i < e->n_live;) {
        struct job *j = e->live_order[i];
        if (j->cancelled) {
            finish(e, j, OB_FINISH_CANCELLED, NULL);
            continue;
        }
        i++;
    }
    if (e->n_live == 0)
        return 0;
    int n = 0, n_want = 0, n_decode, budget;
    draft_all(e);
    /* decode rows: the last sampled token of every decoding sequence, and its drafted tokens */
    for (int i = 0; i < e->n_live; i++) {
        struct job *j = e->live_order[i];
        struct slot *s = &e->slots[j->slot];
        if (s->phase != S_DECODE)
            continue;
        for (int d = 0; d <= j->n_draft; d++) {
            e->tok[n] = d ? j->draft[d - 1] : s->tokens[s->n_tokens];
            e->pos[n] = s->n_tokens + d;
            e->seq[n] = j->slot;
            e->row_job[n] = j;
            e->want[n_want++] = n;
            n++;
        }
    }
    n_decode = n;
    /* prompt rows (and forced tokens), at most chunk in all, in admission order, while the
     * rows that want logits fit the logits buffer */
    budget = e->p.chunk;
    for (int i = 0; i < e->n_live && budget > 0; i++) {
        struct job *j = e->live_order[i];
        struct slot *s = &e->slots[j->slot];
        if (s->phase != S_PREFILL)
            continue;
        int left = j->n_feed - j->n_prompt_done, take = left < budget ? left : budget;
        int k = 0;
        for (; k < take; k++) {
            int p = j->n_prompt_done + k;
            bool want = p >= j->r.n_prompt - 1;          /* the last prompt token, forced ones */
            if (want && n_want == e->logits_rows)
                break;
            e->tok[n] = j->feed[p];
            e->pos[n] = p;
            e->seq[n] = j->slot;
            e->row_job[n] = j;
            if (want)
                e->want[n_want++] = n;
            n++;
        }
        budget -= k;
        if (n_want == e->logits_rows)
            break;
    }
    if (n == 0)
        return 0;
    e->n_rows = n;
    /* want[] must be increasing: decode rows come first, prompt ends after them */
    double t0 = now();
    int err = ob_ctx_forward(e->ctx, n, e->tok, e->pos, e->seq, e->want, n_want, e->logits, NULL);
    double t_fwd = now() - t0;
    if (err) {
        /* a failing forward pass ends every sequence that was in the batch (once: finish
         * clears the job's other rows) */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ob_errmsg());
        for (int i = 0; i < n; i++)
            if (e->row_job[i])
                finish(e, e->row_job[i], OB_FINISH_ERROR, msg);
        ob_seterr(err, "%s", msg);
        e->n_rows = 0;
        return err;
    }
    pthread_mutex_lock(&e->mu);
    e->stats.steps++;
    e->stats.rows += (uint64_t)n;
    pthread_mutex_unlock(&e->mu);
    /* the rows' tokens are in the caches now (a decoding job with drafts: verify says how
     * many of them count) */
    for (int i = 0; i < n; i++) {
        struct job *j = e->row_job[i];
        struct slot *s = &e->slots[j->slot];
        s->n_tokens = e->pos[i] + 1;
        if (s->phase != S_DECODE)
            j->n_prompt_done = e->pos[i] + 1;
    }
    draft_prompts(e);
    double t = now();
    /* the rows' tokens on the pool, then emitted in order (callbacks, stops) */
    bool picked = n_want > 1 && ob_pool_threads(e->pool) > 1;
    if (picked)
        ob_pool_run(e->pool, pick_one, e, n_want);
    for (int w = 0; w < n_want; w++) {
        int row = e->want[w];
        struct job *j = e->row_job[row];
        const float *lg = e->logits + (size_t)w * e->n_vocab;
        const struct pick *pk = picked ? &e->picks[w] : NULL;
        int32_t id;
        if (!j)                                  /* NULL: finished by an earlier row */
            continue;
        if (j->n_draft > 0) {                    /* a decoding job's rows: w .. w + n_draft */
            int k = j->n_draft;
            verify(e, j, lg, pk, e->pos[row], t);
            w += k;
        } else {
            emit(e, j, lg, pk, t, &id);
        }
    }
    /* the cost of decode steps alone (a prompt row costs less: no logits, and the GEMM of
     * many rows, and would make drafted rows look cheaper than they are): the forward pass
     * and what each row's logits cost after it (sampling, log-probabilities, verifying) */
    if (n == n_decode)
        cost_add(e, n, t_fwd + (now() - t));
    e->n_rows = 0;
    return n;
}

int ob_engine_run(struct ob_engine *e)
{
    while (!ob_engine_idle(e)) {
        int r = ob_engine_step(e);
        if (r < 0)
            return r;
    }
    return 0;
}
