/*
 * draft.h — a draft model for speculative decoding (draft.c): a second, smaller model of the
 * same vocabulary that guesses the next tokens of a sequence, greedily, for the engine to
 * verify (engine.h, OB_SPEC_DRAFT). What a request receives never depends on it: the target
 * model picks every token, and the drafter only decides how many steps that takes.
 *
 * The drafter keeps the draft model's KV cache of a few sequences (slots). Asked for the
 * tokens that follow t[0..n), it takes the slot whose tokens share the longest prefix with t
 * (least recently used on a tie), so a sequence that grows by the accepted drafts and the
 * target's pick feeds only its new tokens, and a new request that shares a prompt prefix with
 * an earlier one starts from it.
 *
 * Ownership: ob_drafter_open opens the model and its context; ob_drafter_free closes both.
 * Threads: not thread-safe; the engine's driver thread calls it.
 */
#ifndef OB_DRAFT_H
#define OB_DRAFT_H

#include "1b.h"
#include "engine.h"

struct ob_drafter_params {
    const char *model;             /* the draft model: a GGUF file or an archive holding one */
    const char *route;             /* its route (route.c); NULL: "cpu" */
    int threads;                   /* threads of its route, >= 1 */
    int device;                    /* which device of the route's kind */
    int n_slots;                   /* sequences whose draft caches are kept, >= 1 */
    int n_ctx;                     /* positions per sequence: the target context's */
};

struct ob_drafter;
/* Open the draft model for a target whose tokenizer is `target`. The vocabularies must be the
 * same token for token (count, text and kind of every token): OB_EFORMAT naming the first
 * difference otherwise. Other failures are ob_model_open's and ob_ctx_new's. */
int ob_drafter_open(const struct ob_drafter_params *p, const struct ob_tok *target,
                    struct ob_drafter **out);
void ob_drafter_free(struct ob_drafter *d);
/* An ob_draft_many_fn (engine.h; user is the drafter): for each sequence, up to k greedy
 * guesses of the tokens after t[0..n), stopping after a special token (an end of turn ends
 * the guessing), all sequences in lockstep (one forward pass of the draft model a guess, a
 * row per sequence still guessing). k = 0 only feeds t to the draft model (a prompt, before
 * the first guesses are wanted). Sequences beyond n_slots get none. -1 after a failure of
 * the draft model's route (ob_drafter_error says which), and on every call after it. */
int ob_drafter_draft_many(void *user, struct ob_draft_seq *q, int n);
/* The same for one sequence, as an ob_draft_fn (engine.h): how many guesses, or -1. */
int ob_drafter_draft(void *user, const int32_t *t, int n, int k, int32_t *out);
/* the draft model's failure, or NULL */
const char *ob_drafter_error(const struct ob_drafter *d);

#endif
