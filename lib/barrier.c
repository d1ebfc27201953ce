/*
 * barrier.c — the in-process core of 1b-batchrep: release N byte-identical copies of one
 * request into the engine at the same step, run them to the end, and repeat for R rounds.
 *
 * All copies of a round are submitted before the engine takes its next step, so with
 * parallel >= N they are admitted together and decoded in the same steps: the situation in
 * which other servers' results move with the batch. Every copy's tokens and log-probabilities
 * are handed to the caller, who fingerprints them.
 *
 * The copies' state (struct copy) is the engine callbacks' user pointer: it must outlive every
 * copy in the engine. When a round cannot finish (a submission or a forward pass fails), the
 * copies still in the engine are cancelled and stepped out before it is freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "sb.h"

struct copy {
    struct ob_token_info *toks;
    int n;
    size_t cap;
    uint64_t handle;
    bool submitted;                /* in the engine until done */
    struct ob_finish fin;
    char why[512];                 /* fin.error, kept past the callback */
    bool done, oom;
};

static void on_token(void *user, uint64_t h, const struct ob_token_info *t)
{
    struct copy *c = user;
    if (!OB_GROW(c->toks, c->cap, (size_t)c->n + 1)) {
        c->oom = true;
        return;
    }
    c->toks[c->n++] = *t;
}

static void on_finish(void *user, uint64_t h, const struct ob_finish *f)
{
    struct copy *c = user;
    c->fin = *f;
    c->fin.error = NULL;
    if (f->error) {                   /* the engine's string lives only during the callback */
        snprintf(c->why, sizeof c->why, "%s", f->error);
        c->fin.error = c->why;
    }
    c->done = true;
}

/* after a failure: cancel the copies still in the engine and step until they have finished,
 * so that no callback can reach c once it is freed (a failing step also ends its rows) */
static void drain(struct ob_engine *e, struct copy *c, int width)
{
    for (int k = 0; k < width; k++)
        if (c[k].submitted && !c[k].done)
            ob_engine_cancel(e, c[k].handle);
    for (;;) {
        bool left = false;
        for (int k = 0; k < width; k++)
            left |= c[k].submitted && !c[k].done;
        if (!left)
            break;
        ob_engine_step(e);
    }
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
            c[k].done = c[k].submitted = false;
            c[k].why[0] = 0;
        }
        for (int k = 0; k < width && !err; k++) {
            struct ob_request q = *r;
            q.on_token = on_token;
            q.on_finish = on_finish;
            q.user = &c[k];
            err = ob_engine_submit(e, &q, &c[k].handle);
            c[k].submitted = !err;
        }
        if (err || (err = ob_engine_run(e))) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ob_errmsg());
            drain(e, c, width);
            ob_seterr(err, "%s", msg);
            break;
        }
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
