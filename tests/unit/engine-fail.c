/*
 * engine-fail.c — the batching engine when a row cannot be scored (TAP):   engine-fail MODEL
 *
 * MODEL must give logits that are not finite (tests/t5010-engine.sh writes a NaN into
 * stories260K's output_norm.weight, and 3e38 into its output.weight): sampling and scoring
 * then fail. A teacher-forced job has many rows in one step; the first that fails ends it.
 * Checked: every request finishes exactly once, with OB_FINISH_ERROR and the reason; no token
 * is reported after its finish; the engine is idle afterwards and still serves (a prefill-only
 * request, and the barrier, whose copies carry the reason). Run under ASan too (make check
 * builds bin/san/unit/engine-fail): a job touched after it was freed is a report there and,
 * usually, a double free here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-open.h"
#include "tok.h"
#include "tap.h"

#define N_JOBS 6

struct result {
    int tokens;                    /* on_token calls */
    int finishes;                  /* on_finish calls: must be exactly 1 */
    int late;                      /* on_token calls after on_finish */
    int reason;
    char error[256];
};

static void r_token(void *u, uint64_t h, const struct ob_token_info *t)
{
    struct result *r = u;
    r->tokens++;
    r->late += r->finishes > 0;
}

static void r_finish(void *u, uint64_t h, const struct ob_finish *f)
{
    struct result *r = u;
    r->finishes++;
    r->reason = f->reason;
    snprintf(r->error, sizeof r->error, "%s", f->error ? f->error : "");
}

static bool nonfinite_error(const char *s)
{
    return strstr(s, "NaN") || strstr(s, "Inf");
}

struct copies {
    int n, errors, with_reason;
};

static void on_copy(void *user, int round, int copy, const struct ob_finish *f,
                    const struct ob_token_info *toks, int n)
{
    struct copies *c = user;
    c->n++;
    c->errors += f->reason == OB_FINISH_ERROR;
    c->with_reason += f->error && nonfinite_error(f->error);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: engine-fail MODEL\n");
        return 2;
    }
    /* 4 live sequences, 96 prompt rows per step: a 30-token forced job is scored in one step */
    struct ob_local_params lp = {.model = argv[1], .route = "cpu", .threads = 2, .parallel = 4,
                                 .n_ctx = 256, .chunk = 96, .max_batch = 128};
    struct ob_local *L;
    struct ob_req q;
    if (!engine_open(&lp, &L, &q))
        return 1;
    struct ob_model *m = L->m;
    struct ob_engine *e = L->eng;
    const int32_t *prompt = q.ids;
    int np = q.n_ids;
    int32_t forced[30];
    for (int i = 0; i < 30; i++)
        forced[i] = (int32_t)(10 + 7 * i) % (int32_t)ob_model_hparams(m)->n_vocab;

    /* forced jobs of 30, 12 and 2 tokens (with and without top lists), a sampled and a greedy
     * one, and another forced one that waits for a slot: all submitted before the first step */
    static struct result res[N_JOBS];
    static const int n_forced[N_JOBS] = {30, 12, 0, 2, 0, 30};
    for (int k = 0; k < N_JOBS; k++) {
        struct ob_request q = {.prompt = prompt, .n_prompt = np, .sampling = OB_SAMPLING_GREEDY,
                               .max_tokens = 16, .top_logprobs = k % 2 ? 0 : 3,
                               .cache_prompt = k > 0, .forced = n_forced[k] ? forced : NULL,
                               .n_forced = n_forced[k], .on_token = r_token,
                               .on_finish = r_finish, .user = &res[k]};
        if (k == 2) {
            q.sampling.temperature = 0.8f;
            q.sampling.seed = 5;
        }
        if (ob_engine_submit(e, &q, NULL))
            printf("# submit %d: %s\n", k, ob_errmsg());
    }
    int steps = 0;
    while (!ob_engine_idle(e) && steps < 1000) {
        ob_engine_step(e);
        steps++;
    }
    ok(ob_engine_idle(e), "every request ended (%d steps)", steps);
    int once = 0, errors = 0, late = 0, why = 0;
    for (int k = 0; k < N_JOBS; k++) {
        printf("#   job %d (%d forced): %d tokens, %d finishes, reason %d: %s\n", k, n_forced[k],
               res[k].tokens, res[k].finishes, res[k].reason, res[k].error);
        once += res[k].finishes == 1;
        errors += res[k].reason == OB_FINISH_ERROR;
        late += res[k].late;
        why += nonfinite_error(res[k].error);
    }
    ok(once == N_JOBS, "each of the %d requests finished exactly once (%d did)", N_JOBS, once);
    ok(errors == N_JOBS && why == N_JOBS,
       "each ended with OB_FINISH_ERROR (%d) and names the non-finite logit (%d)", errors, why);
    ok(late == 0, "no token reported after its request finished (%d)", late);
    ok(res[0].tokens < n_forced[0] && res[5].tokens < n_forced[5],
       "the 30-token forced jobs stopped at the failing row (%d and %d tokens)", res[0].tokens,
       res[5].tokens);
    struct ob_engine_stats st;
    ob_engine_stats(e, &st);
    ok(st.finished == N_JOBS && st.live == 0 && st.queued == 0,
       "stats: %llu finished, %d live, %d queued", (unsigned long long)st.finished, st.live,
       st.queued);

    /* the engine lives on: a prefill-only request needs no logits */
    struct result z = {0};
    struct ob_request qz = {.prompt = prompt, .n_prompt = np, .sampling = OB_SAMPLING_GREEDY,
                            .max_tokens = 0, .on_token = r_token, .on_finish = r_finish,
                            .user = &z};
    ob_engine_submit(e, &qz, NULL);
    ob_engine_run(e);
    ok(z.finishes == 1 && z.reason == OB_FINISH_LENGTH, "afterwards a prefill-only request runs");

    /* the barrier: 3 copies of a forced request, 2 rounds; every copy reports the reason */
    struct copies c = {0};
    struct ob_request qb = {.prompt = prompt, .n_prompt = np, .sampling = OB_SAMPLING_GREEDY,
                            .max_tokens = 30, .top_logprobs = 2, .forced = forced,
                            .n_forced = 30};
    int err = ob_barrier_run(e, &qb, 3, 2, on_copy, &c);
    ok(err == 0 && c.n == 6 && c.errors == 6 && c.with_reason == 6,
       "barrier: %d of 6 copies ended in error, %d with the reason", c.errors, c.with_reason);
    ok(ob_engine_idle(e), "and the engine is idle");

    ob_req_free(&q);
    ob_local_free(L);
    return tap_done();
}
