/*
 * barrier.c — the in-process core of 1b-batchrep: release N byte-identical copies of one
 * request into the engine at the same step, run them to the end, and repeat for R rounds.
 *
 * All copies of a round are submitted before the engine takes its next step, so with
 * parallel >= N they are admitted together and decoded in the same steps: the situation in
 * which other servers' results move with the batch. Every copy's tokens and log-probabilities
 * are handed to the caller, who fingerprints them.
 */
#include <stdlib.h>
#include <string.h>

#include "engine.h"

struct copy {
    struct ob_token_info *toks;
    int n, cap;
    struct ob_finish fin;
    bool done, oom;
};

static void on_token(void *user, uint64_t h, const struct ob_token_info *t)
{
    struct copy *c = user;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        struct ob_token_info *p = realloc(c->toks, (size_t)cap * sizeof *p);
        if (!p) {
            c->oom = true;
            return;
        }
        c->toks = p;
        c->cap = cap;
    }
    c->toks[c->n++] = *t;
}

static void on_finish(void *user, uint64_t h, const struct ob_finish *f)
{
    struct copy *c = user;
    c->fin = *f;
    c->fin.error = NULL;              /* not kept past the callback */
    c->done = true;
}

int ob_barrier_run(struct ob_engine *e, const struct ob_request *r, int width, int rounds,
                   ob_barrier_fn fn, void *user)
{
    if (width < 1 || rounds < 1)
        return ob_seterr(OB_EUSAGE, "width and rounds must be at least 1");
    struct copy *c = calloc((size_t)width, sizeof *c);
    if (!c)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int err = 0;
    for (int round = 0; round < rounds && !err; round++) {
        for (int k = 0; k < width; k++) {
            c[k].n = 0;
            c[k].done = false;
        }
        for (int k = 0; k < width && !err; k++) {
            struct ob_request q = *r;
            q.on_token = on_token;
            q.on_finish = on_finish;
            q.user = &c[k];
            err = ob_engine_submit(e, &q, NULL);
        }
        if (err || (err = ob_engine_run(e)))
            break;
        for (int k = 0; k < width; k++) {
            if (c[k].oom) {
                err = ob_seterr(OB_ENOMEM, "out of memory");
                break;
            }
            fn(user, round, k, &c[k].fin, c[k].toks, c[k].n);
        }
    }
    for (int k = 0; k < width; k++)
        free(c[k].toks);
    free(c);
    return err;
}
