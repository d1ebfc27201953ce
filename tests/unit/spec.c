/*
 * spec.c — unit tests of speculative decoding in the engine (TAP):   spec MODEL
 *
 * Every case runs a request twice on one engine, plain (spec off) and speculating, and
 * compares everything the request receives: each token's id, logprob bits and top list, the
 * finish reason, the tokens generated and the text kept. The drafts come from prompt lookup
 * (ngram) or from the test (ob_request.draft), which makes each path of verification happen
 * on purpose:
 *  - wrong drafts: every draft rejected (the engine's counters say so);
 *  - the plain run's own tokens as drafts: every draft accepted;
 *  - a stop string, and a stop token, that fall inside an accepted run;
 *  - drafts that would cross max_tokens, and the end of the context;
 *  - greedy and seeded sampling; four requests speculating at once, among plain ones;
 *  - a draft model (the model itself, draft.c): every greedy draft accepted, and the drafter's
 *    guesses after rejections those of a fresh one.
 * The engines here draft from acceptance alone (spec_fixed), so that each case drafts the same
 * in every run; what the timed cost of steps trims (draft_trim) changes only how many drafts,
 * which tests/t5000-contract.sh runs through.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draft.h"
#include "engine-open.h"
#include "tap.h"
#include "tok.h"

enum { MAXT = 512 };

struct result {
    int reason, n_gen;
    size_t text_len;
    struct ob_token_info toks[MAXT];
    int n;
};

static void r_token(void *u, uint64_t h, const struct ob_token_info *t)
{
    struct result *r = u;
    if (r->n < MAXT)
        r->toks[r->n++] = *t;
}

static void r_finish(void *u, uint64_t h, const struct ob_finish *f)
{
    struct result *r = u;
    r->reason = f->reason;
    r->n_gen = f->n_gen;
    r->text_len = f->text_len;
}

/* the same tokens, bits, top lists and finish */
static bool same(const struct result *a, const struct result *b)
{
    if (a->n != b->n || a->reason != b->reason || a->n_gen != b->n_gen ||
        a->text_len != b->text_len)
        return false;
    for (int i = 0; i < a->n; i++) {
        const struct ob_token_info *x = &a->toks[i], *y = &b->toks[i];
        if (x->id != y->id || memcmp(&x->logprob, &y->logprob, 4) || x->n_top != y->n_top ||
            memcmp(x->top, y->top, (size_t)x->n_top * sizeof x->top[0]))
            return false;
    }
    return true;
}

/* drafts of the test: "wrong" proposes tokens the model is unlikely to pick (each one after
 * the last, wrapping); "oracle" proposes what a plain run generated after the prompt */
struct drafts {
    const struct result *plain;    /* oracle */
    int n_prompt;
    int32_t n_vocab;
    bool wrong;
    int calls;
};

static int draft_fn(void *user, const int32_t *t, int n, int k, int32_t *out)
{
    struct drafts *d = user;
    d->calls++;
    if (d->wrong) {
        for (int i = 0; i < k; i++)
            out[i] = (t[n - 1] + 1 + i) % d->n_vocab;
        return k;
    }
    int at = n - d->n_prompt;                    /* generated tokens so far */
    int m = 0;
    while (m < k && at + m < d->plain->n)
        out[m] = d->plain->toks[at + m].id, m++;
    return m;
}

static void run(struct ob_engine *e, const struct ob_request *r, struct result *res)
{
    struct ob_request q = *r;
    memset(res, 0, sizeof *res);
    q.on_token = r_token;
    q.on_finish = r_finish;
    q.user = res;
    if (ob_engine_submit(e, &q, NULL) || ob_engine_run(e))
        printf("# run: %s\n", ob_errmsg());
}

static struct ob_engine_stats stats(struct ob_engine *e)
{
    struct ob_engine_stats s;
    ob_engine_stats(e, &s);
    return s;
}

static const char *reason_name(int r)
{
    static const char *n[] = {"stop", "stop_string", "length", "context", "cancelled", "error"};
    return r >= 0 && r <= OB_FINISH_ERROR ? n[r] : "?";
}

/* r plain and with drafts from fn (NULL: ngram): the same; *drafted and *accepted by it */
static bool compare_fn(struct ob_engine *e, const struct ob_request *r, ob_draft_fn fn,
                       void *user, struct result *plain, uint64_t *drafted, uint64_t *accepted)
{
    static struct result spec;
    struct ob_request q = *r;
    q.spec = OB_SPEC_OFF;
    run(e, &q, plain);
    q.spec = fn ? OB_SPEC_DEFAULT : OB_SPEC_NGRAM;
    q.draft = fn;
    q.draft_user = user;
    struct ob_engine_stats s0 = stats(e);
    uint64_t steps0 = s0.steps;
    run(e, &q, &spec);
    struct ob_engine_stats s1 = stats(e);
    *drafted = s1.spec_drafted - s0.spec_drafted;
    *accepted = s1.spec_accepted - s0.spec_accepted;
    printf("#   %d tokens (%s); speculating: %llu drafted, %llu accepted, %llu steps\n", plain->n,
           reason_name(plain->reason), (unsigned long long)*drafted,
           (unsigned long long)*accepted, (unsigned long long)(s1.steps - steps0));
    return same(plain, &spec);
}

/* the same with drafts from d (NULL: ngram) */
static bool compare(struct ob_engine *e, const struct ob_request *r, struct drafts *d,
                    struct result *plain, uint64_t *drafted, uint64_t *accepted)
{
    if (d && !d->wrong)
        d->plain = plain;
    return compare_fn(e, r, d ? draft_fn : NULL, d, plain, drafted, accepted);
}

/* The draft model (draft.c), here the model itself on the cpu route: its greedy guesses are
 * the model's greedy picks, bit for bit, so at temperature 0 every draft is accepted, which
 * holds only if each guess was computed from exactly the sequence's tokens and positions
 * (the slot's cache reused and cut back right). Then the drafter alone: guesses after a
 * rejected draft, after a partly accepted run and after a cut back into the prompt are those
 * of a fresh drafter. */
static void drafter_checks(struct ob_engine *e, const char *model, const struct ob_request *r,
                           const struct ob_request *rs)
{
    struct ob_model *m;
    struct ob_drafter *d = NULL, *fresh = NULL;
    if (ob_model_open(model, &m)) {
        ok(false, "open %s: %s", model, ob_errmsg());
        return;
    }
    struct ob_drafter_params dp = {.model = model, .route = "cpu", .threads = 2, .n_slots = 2,
                                   .n_ctx = 256};
    int err = ob_drafter_open(&dp, ob_model_tok(m), &d);
    ok(!err, "the model as its own draft model: opened%s%s", err ? ": " : "",
       err ? ob_errmsg() : "");
    if (err) {
        ob_drafter_free(d);
        ob_model_close(m);
        return;
    }
    static struct result plain;
    uint64_t dr, ac;
    bool g = compare_fn(e, r, ob_drafter_draft, d, &plain, &dr, &ac);
    ok(g && dr > 0 && ac == dr, "draft model, greedy: plain decoding's bits, all %llu drafts "
       "accepted", (unsigned long long)dr);
    g = compare_fn(e, rs, ob_drafter_draft, d, &plain, &dr, &ac);
    ok(g && dr > 0 && ac < dr, "draft model, seeded sampling: the same bits (%llu of %llu "
       "accepted)", (unsigned long long)ac, (unsigned long long)dr);

    /* the drafter alone: t = prompt + generated, cut and changed */
    static int32_t t[256], a[OB_SPEC_MAX], b[OB_SPEC_MAX];
    int n = r->n_prompt, checks = 0, good = 0;
    memcpy(t, r->prompt, (size_t)n * sizeof *t);
    int k = ob_drafter_draft(d, t, n, 8, a);
    for (int round = 0; round < 6 && k > 0; round++) {
        /* accept round % 4 of the guesses, then a token that differs from the next guess */
        int acc = round % 4 < k ? round % 4 : k - 1;
        memcpy(t + n, a, (size_t)acc * sizeof *t);
        n += acc;
        t[n] = (a[acc] + 1 + round) % (int32_t)ob_model_hparams(m)->n_vocab;
        n++;
        if (round == 3)                          /* cut back to half the prompt */
            n = r->n_prompt / 2 + 1;
        k = ob_drafter_draft(d, t, n, 8, a);
        int kb = -1;
        if (!ob_drafter_open(&dp, ob_model_tok(m), &fresh))
            kb = ob_drafter_draft(fresh, t, n, 8, b);
        ob_drafter_free(fresh);
        fresh = NULL;
        checks++;
        good += k == kb && !memcmp(a, b, (size_t)(k > 0 ? k : 0) * sizeof *a);
    }
    ok(checks == 6 && good == checks, "the drafter after rejections, partly accepted runs and "
       "a cut to half the prompt: a fresh drafter's guesses (%d of %d)", good, checks);
    ob_drafter_free(d);
    ob_model_close(m);
}

/* The engine's own draft model (--draft), asked once a step for every sequence: 4 greedy
 * requests on different prompts at once, each given its own guesses (all accepted) and plain
 * decoding's bits. */
static void engine_drafter_checks(struct ob_engine *plain_e, const char *model,
                                  const struct ob_request *r)
{
    struct ob_local_params lp = {.model = model, .route = "cpu", .threads = 2, .parallel = 4,
                                 .n_ctx = 256, .chunk = 64, .max_batch = 256,
                                 .spec = OB_SPEC_DRAFT, .spec_max = 6, .spec_fixed = true,
                                 .draft_model = model};
    struct ob_local *L;
    if (ob_local_open(&lp, &L)) {
        ok(false, "open %s with itself as its draft model: %s", model, ob_errmsg());
        return;
    }
    static struct result alone[4], together[4];
    static int32_t prompts[4][64];
    struct ob_request q[4];
    int n_same = 0;
    for (int i = 0; i < 4; i++) {
        int n = r->n_prompt < 60 ? r->n_prompt : 60;
        memcpy(prompts[i], r->prompt, (size_t)n * sizeof(int32_t));
        prompts[i][n] = (int32_t)(5 + 17 * i);   /* four prompts, one prefix */
        q[i] = *r;
        q[i].prompt = prompts[i];
        q[i].n_prompt = n + 1;
        q[i].max_tokens = 30 + 10 * i;
        q[i].spec = OB_SPEC_OFF;
        run(plain_e, &q[i], &alone[i]);
        q[i].spec = OB_SPEC_DEFAULT;
        q[i].on_token = r_token;
        q[i].on_finish = r_finish;
        q[i].user = &together[i];
        memset(&together[i], 0, sizeof together[i]);
        ob_engine_submit(L->eng, &q[i], NULL);
    }
    ob_engine_run(L->eng);
    for (int i = 0; i < 4; i++)
        n_same += same(&alone[i], &together[i]);
    struct ob_engine_stats st = stats(L->eng);
    ok(n_same == 4 && st.spec_drafted > 0 && st.spec_accepted == st.spec_drafted,
       "--draft, 4 greedy requests at once: %d of 4 as plain alone, %llu of %llu drafts "
       "accepted", n_same, (unsigned long long)st.spec_accepted,
       (unsigned long long)st.spec_drafted);
    ob_local_free(L);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: spec MODEL\n");
        return 2;
    }
    struct ob_local_params lp = {.model = argv[1], .route = "cpu", .threads = 2, .parallel = 8,
                                 .cache_slots = 1, .n_ctx = 256, .chunk = 64, .max_batch = 256,
                                 .spec = OB_SPEC_OFF, .spec_max = 8, .spec_fixed = true};
    struct ob_local *L;
    struct ob_req rq;
    if (!engine_open(&lp, &L, &rq))
        return 1;
    struct ob_engine *e = L->eng;
    int32_t n_vocab = (int32_t)ob_model_hparams(L->m)->n_vocab;
    struct ob_request r = {.prompt = rq.ids, .n_prompt = rq.n_ids,
                           .sampling = OB_SAMPLING_GREEDY, .max_tokens = 120, .top_logprobs = 3,
                           .cache_prompt = false};
    struct ob_request rs = r;
    rs.sampling.temperature = 0.9f;
    rs.sampling.seed = 11;
    static struct result plain;
    uint64_t dr, ac;

    /* prompt lookup */
    bool g = compare(e, &r, NULL, &plain, &dr, &ac);
    ok(g, "ngram, greedy: the tokens, bits and finish of plain decoding (%llu of %llu drafts "
          "accepted)", (unsigned long long)ac, (unsigned long long)dr);
    g = compare(e, &rs, NULL, &plain, &dr, &ac);
    ok(g, "ngram, seeded sampling: the same (%llu of %llu accepted)", (unsigned long long)ac,
       (unsigned long long)dr);

    /* every draft rejected; every draft accepted */
    struct drafts wrong = {.n_prompt = r.n_prompt, .n_vocab = n_vocab, .wrong = true};
    g = compare(e, &r, &wrong, &plain, &dr, &ac);
    ok(g && dr > 0 && ac < dr / 4, "wrong drafts: rejected (%llu of %llu accepted), the "
       "same tokens and bits", (unsigned long long)ac, (unsigned long long)dr);
    struct drafts oracle = {.n_prompt = r.n_prompt, .n_vocab = n_vocab};
    g = compare(e, &r, &oracle, &plain, &dr, &ac);
    ok(g && dr > 0 && ac == dr, "the plain run's tokens as drafts: all %llu accepted, the same "
       "tokens and bits", (unsigned long long)dr);
    g = compare(e, &rs, &oracle, &plain, &dr, &ac);
    ok(g && dr > 0 && ac == dr, "the same with seeded sampling: all %llu accepted",
       (unsigned long long)dr);

    /* a stop string inside an accepted run: the text of a token in the middle of the plain
     * run (as it first appears), drafted with all its neighbours */
    static struct result base;
    struct ob_request q = r;
    q.spec = OB_SPEC_OFF;
    run(e, &q, &base);
    char stop[64] = "";
    int at = base.n > 20 ? 17 : base.n / 2;
    const char *b;
    size_t nb;
    if (base.n > 2 && !ob_tok_piece(ob_model_tok(L->m), base.toks[at].id, &b, &nb) && nb > 0 &&
        nb < sizeof stop)
        memcpy(stop, b, nb);
    char *stops[] = {stop};
    q = r;
    q.stop = stops;
    q.n_stop = stop[0] ? 1 : 0;
    struct drafts o2 = {.n_prompt = r.n_prompt, .n_vocab = n_vocab};
    static struct result plain_all;
    plain_all = base;
    o2.plain = &plain_all;
    /* the oracle drafts the run without the stop string: its tokens past the stop too */
    struct ob_request qs = q;
    qs.spec = OB_SPEC_OFF;
    run(e, &qs, &plain);
    qs.spec = OB_SPEC_DEFAULT;
    qs.draft = draft_fn;
    qs.draft_user = &o2;
    static struct result spec;
    struct ob_engine_stats s0 = stats(e);
    run(e, &qs, &spec);
    struct ob_engine_stats s1 = stats(e);
    ok(stop[0] && same(&plain, &spec) && plain.reason == OB_FINISH_STOP_STRING &&
       s1.spec_accepted > s0.spec_accepted,
       "a stop string (\"%s\") inside an accepted run ends where plain decoding ends (%d tokens, "
       "%zu bytes kept)", stop, spec.n, spec.text_len);

    /* a stop token drafted: the id of a token in the middle of the plain run */
    int32_t stop_id = base.n > 12 ? base.toks[9].id : -1;
    qs = r;
    qs.stop_ids = &stop_id;
    qs.n_stop_ids = stop_id >= 0;
    qs.spec = OB_SPEC_OFF;
    run(e, &qs, &plain);
    qs.spec = OB_SPEC_DEFAULT;
    qs.draft = draft_fn;
    qs.draft_user = &o2;
    run(e, &qs, &spec);
    ok(stop_id >= 0 && same(&plain, &spec) && plain.reason == OB_FINISH_STOP,
       "a stop token (%d) among the drafts ends the sequence at the same token, not reported "
       "(%d tokens)", stop_id, spec.n);

    /* drafts that would cross max_tokens */
    q = r;
    q.max_tokens = 13;
    g = compare(e, &q, &oracle, &plain, &dr, &ac);
    ok(g && plain.n == 13 && plain.reason == OB_FINISH_LENGTH && dr > 0,
       "max_tokens 13 with 8-token drafts: 13 tokens, length, as plain decoding");

    /* and the end of the context: a prompt 20 positions short of it */
    static int32_t longp[256];
    int np = 256 - 20;
    for (int i = 0; i < np; i++)
        longp[i] = r.prompt[i % r.n_prompt];
    q = r;
    q.prompt = longp;
    q.n_prompt = np;
    q.max_tokens = 100;
    struct drafts o3 = {.n_prompt = np, .n_vocab = n_vocab};
    g = compare(e, &q, &o3, &plain, &dr, &ac);
    ok(g && plain.reason == OB_FINISH_CONTEXT && dr > 0,
       "drafts up to the end of the context: %d tokens, context, as plain decoding", plain.n);
    g = compare(e, &q, NULL, &plain, &dr, &ac);
    ok(g && plain.reason == OB_FINISH_CONTEXT, "the same with ngram drafts");

    /* four speculating requests at once, among four plain ones: each as it runs alone */
    static struct result alone[8], together[8];
    struct ob_request qq[8];
    struct drafts od[8];
    for (int i = 0; i < 8; i++) {
        qq[i] = i % 2 ? rs : r;
        qq[i].sampling.seed = (uint64_t)i;
        qq[i].max_tokens = 40 + 10 * i;
        qq[i].spec = OB_SPEC_OFF;
        run(e, &qq[i], &alone[i]);
    }
    for (int i = 0; i < 8; i++) {
        od[i] = (struct drafts){.plain = &alone[i], .n_prompt = r.n_prompt, .n_vocab = n_vocab};
        if (i < 4) {
            qq[i].spec = i < 2 ? OB_SPEC_NGRAM : OB_SPEC_DEFAULT;
            qq[i].draft = i < 2 ? NULL : draft_fn;
            qq[i].draft_user = &od[i];
        }
        memset(&together[i], 0, sizeof together[i]);
        qq[i].on_token = r_token;
        qq[i].on_finish = r_finish;
        qq[i].user = &together[i];
        ob_engine_submit(e, &qq[i], NULL);
    }
    ob_engine_run(e);
    int n_same = 0;
    for (int i = 0; i < 8; i++)
        n_same += same(&alone[i], &together[i]);
    ok(n_same == 8, "8 requests at once, 4 of them speculating: %d of 8 as each plain alone",
       n_same);

    drafter_checks(e, argv[1], &r, &rs);
    engine_drafter_checks(e, argv[1], &r);

    ob_req_free(&rq);
    ob_local_free(L);
    return tap_done();
}
