/*
 * engine.c — unit tests of the batching engine (TAP):   engine MODEL
 *
 *  - the barrier: N identical copies released into the same steps, R rounds, at widths 1, 2,
 *    4 and 8: every copy's fingerprint (token ids + logprob bits) is printed and must equal
 *    the solo run's;
 *  - teacher forcing: scoring the greedy continuation reproduces its logprobs bit for bit;
 *  - cancellation of waiting and running requests; max_tokens 0; a prompt that does not fit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-open.h"
#include "tok.h"
#include "tap.h"


/* FNV-1a over token ids and logprob bits */
static uint64_t fingerprint(const struct ob_token_info *t, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        uint32_t v[2];
        v[0] = (uint32_t)t[i].id;
        memcpy(&v[1], &t[i].logprob, 4);
        const unsigned char *p = (const unsigned char *)v;
        for (int k = 0; k < 8; k++)
            h = (h ^ p[k]) * 1099511628211ull;
        for (int k = 0; k < t[i].n_top; k++) {
            uint32_t w[2] = {(uint32_t)t[i].top[k].id, 0};
            memcpy(&w[1], &t[i].top[k].logprob, 4);
            p = (const unsigned char *)w;
            for (int q = 0; q < 8; q++)
                h = (h ^ p[q]) * 1099511628211ull;
        }
    }
    return h;
}

struct collect {
    uint64_t solo;
    int copies, same, rounds_seen;
    struct ob_token_info toks[256];
    int n;
};

static void on_copy(void *user, int round, int copy, const struct ob_finish *f,
                    const struct ob_token_info *toks, int n)
{
    struct collect *c = user;
    uint64_t fp = fingerprint(toks, n);
    printf("#   round %d copy %d: %d tokens, fingerprint %016llx\n", round, copy, n,
           (unsigned long long)fp);
    if (!c->solo) {
        c->solo = fp;
        c->n = n < 256 ? n : 256;
        memcpy(c->toks, toks, (size_t)c->n * sizeof *toks);
    }
    c->copies++;
    c->same += fp == c->solo;
}

struct result {
    int reason, n_gen;
    struct ob_token_info toks[256];
    int n;
};

static void r_token(void *u, uint64_t h, const struct ob_token_info *t)
{
    struct result *r = u;
    if (r->n < 256)
        r->toks[r->n++] = *t;
}

static void r_finish(void *u, uint64_t h, const struct ob_finish *f)
{
    struct result *r = u;
    r->reason = f->reason;
    r->n_gen = f->n_gen;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: engine MODEL\n");
        return 2;
    }
    /* 8 live sequences and one cache slot, 64 prompt rows per step */
    struct ob_local_params lp = {.model = argv[1], .route = "cpu", .threads = 2, .parallel = 8,
                                 .cache_slots = 1, .n_ctx = 512, .chunk = 64, .max_batch = 256};
    struct ob_local *L;
    struct ob_req q;
    if (!engine_open(&lp, &L, &q))
        return 1;
    struct ob_model *m = L->m;
    struct ob_engine *e = L->eng;
    const int32_t *prompt = q.ids;
    int np = q.n_ids;
    struct ob_request r = {.prompt = prompt, .n_prompt = np, .sampling = OB_SAMPLING_GREEDY,
                           .max_tokens = 80, .top_logprobs = 3, .cache_prompt = false};
    struct ob_request rs = r;                    /* a sampled one */
    rs.sampling.temperature = 0.9f;
    rs.sampling.seed = 11;

    static const int widths[] = {1, 2, 4, 8};
    for (int s = 0; s < 2; s++) {
        struct collect c = {0};
        for (size_t w = 0; w < 4; w++) {
            printf("# %s, width %d, 3 rounds\n", s ? "sampled" : "greedy", widths[w]);
            if (ob_barrier_run(e, s ? &rs : &r, widths[w], 3, on_copy, &c))
                printf("# barrier: %s\n", ob_errmsg());
        }
        ok(c.copies == 3 * (1 + 2 + 4 + 8) && c.same == c.copies,
           "%s: %d of %d copies over widths 1, 2, 4, 8 x 3 rounds have the solo fingerprint",
           s ? "sampled" : "greedy", c.same, c.copies);
        if (s == 0) {
            /* teacher forcing reproduces the greedy tokens' logprobs */
            int32_t forced[256];
            for (int i = 0; i < c.n; i++)
                forced[i] = c.toks[i].id;
            struct result res = {0};
            struct ob_request q = r;
            q.forced = forced;
            q.n_forced = c.n;
            q.on_token = r_token;
            q.on_finish = r_finish;
            q.user = &res;
            q.cache_prompt = true;
            ob_engine_submit(e, &q, NULL);
            ob_engine_run(e);
            int same = res.n == c.n;
            for (int i = 0; same && i < c.n; i++)
                same = res.toks[i].id == c.toks[i].id &&
                       memcmp(&res.toks[i].logprob, &c.toks[i].logprob, 4) == 0 &&
                       res.toks[i].n_top == c.toks[i].n_top &&
                       memcmp(res.toks[i].top, c.toks[i].top, sizeof c.toks[i].top[0] * 3) == 0;
            ok(same, "scoring the greedy continuation reproduces its %d logprobs and top lists",
               c.n);
            /* forcing other tokens: the sampled continuation scored greedily-decoded context */
            struct result res2 = {0};
            q.user = &res2;
            for (int i = 0; i < c.n; i++)
                forced[i] = (c.toks[i].id + 1) % (int32_t)ob_model_hparams(m)->n_vocab;
            ob_engine_submit(e, &q, NULL);
            ob_engine_run(e);
            int diff = res2.n == c.n && res2.toks[0].id == forced[0];
            ok(diff && res2.reason == OB_FINISH_LENGTH, "forced tokens are taken as given");
            /* stop strings and stop tokens do not apply to forced tokens: every one is scored
             * (and, under ASan, the stop strings the engine copied are freed with the job) */
            struct result res3 = {0};
            char *stops[] = {"e", " ", "a"};
            int32_t stop_ids[] = {forced[0], forced[1]};
            struct ob_request qs = q;
            qs.user = &res3;
            qs.stop = stops;
            qs.n_stop = 3;
            qs.stop_ids = stop_ids;
            qs.n_stop_ids = 2;
            ob_engine_submit(e, &qs, NULL);
            ob_engine_run(e);
            ok(res3.n == c.n && res3.reason == OB_FINISH_LENGTH,
               "stop strings and stop tokens do not end a forced request (%d of %d scored)",
               res3.n, c.n);
        }
    }

    /* cancellation: one waiting, one running */
    struct result a = {0}, b = {0};
    struct ob_request qa = r, qb = r;
    qa.max_tokens = qb.max_tokens = 200;
    qa.on_token = qb.on_token = r_token;
    qa.on_finish = qb.on_finish = r_finish;
    qa.user = &a;
    qb.user = &b;
    uint64_t ha, hb;
    ob_engine_submit(e, &qa, &ha);
    ob_engine_step(e);
    ob_engine_step(e);
    ob_engine_submit(e, &qb, &hb);
    ob_engine_cancel(e, hb);
    ob_engine_cancel(e, ha);
    ob_engine_run(e);
    ok(a.reason == OB_FINISH_CANCELLED && a.n_gen > 0 && a.n_gen < 200 &&
       b.reason == OB_FINISH_CANCELLED && b.n_gen == 0,
       "cancelling a running and a waiting request (%d and %d tokens)", a.n_gen, b.n_gen);

    struct result z = {0};
    struct ob_request qz = r;
    qz.max_tokens = 0;
    qz.on_token = r_token;
    qz.on_finish = r_finish;
    qz.user = &z;
    ob_engine_submit(e, &qz, NULL);
    ob_engine_run(e);
    ok(z.reason == OB_FINISH_LENGTH && z.n == 0, "max_tokens 0 prefills and stops");

    static int32_t big[600];
    struct ob_request qbig = r;
    qbig.prompt = big;
    qbig.n_prompt = 600;
    ok(ob_engine_submit(e, &qbig, NULL) == OB_ERANGE,
       "a prompt longer than the context is refused (%s)", ob_errmsg());

    ob_req_free(&q);
    ob_local_free(L);
    return tap_done();
}
