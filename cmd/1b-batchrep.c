/*
 * 1b-batchrep — is a batched request repeatable? Release N byte-identical requests together,
 * R rounds, and count the distinct answers.
 *
 *   1b-batchrep -m MODEL [-d ROUTE] [options]      in process, through the engine's barrier
 *   1b-batchrep -d URL [options]                   against a server: N concurrent requests
 *   1b-batchrep --selftest                         the fingerprint and comparator logic
 *
 * Every copy is fingerprinted over its token ids and the float32 bits of every log-probability
 * (top alternatives included); a state is a class of identical copies (lib/agree.h). The report
 * counts states over all copies of all rounds, per round the largest group of identical
 * copies, the same-index pairs identical between consecutive rounds, and the worst |dlogp|
 * between two states; --vs-solo first takes one request alone and scores every copy against
 * it.
 *
 * Exit status: 0 one state (with --vs-solo: the solo one); 1 more than one state, or copies
 * that differ from the solo answer; 2 usage; 3 a request 1b refuses or a reply that cannot be
 * used (an error reply, no log-probabilities); 4 the route is unavailable or the server
 * unreachable (or not ready within --wait); 5 any other failure.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1b.h"
#include "agree.h"
#include "client.h"
#include "cli.h"

#define PROG "1b-batchrep"

#define DEFAULT_PROBE "Explain in one paragraph why the sky appears blue."

enum {
    OPT_WIDTH = 256, OPT_ROUNDS, OPT_MAX_TOKENS, OPT_PROMPT, OPT_MESSAGES, OPT_THINKING,
    OPT_TOP_LOGPROBS, OPT_TEMPERATURE, OPT_SEED, OPT_VS_SOLO, OPT_JSON, OPT_SELFTEST,
    OPT_PARALLEL, OPT_MATCH_BY,
};

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the model, in process (with a URL: the model name to request)"},
    OB_OPT_ROWS_ROUTE,
    {"parallel", OPT_PARALLEL, "N", "in process: sequences decoded together (default: --width)"},
    OB_OPT_ROWS_SPEC,
    {"width", OPT_WIDTH, "N", "identical requests released together per round (default 4)"},
    {"rounds", OPT_ROUNDS, "R", "rounds (default 4)"},
    {"vs-solo", OPT_VS_SOLO, NULL, "take one solo request first and score every copy against it"},
    /* the request every copy sends */
    {"max-tokens", OPT_MAX_TOKENS, "T", "tokens per answer (default 32)"},
    {"prompt", OPT_PROMPT, "TEXT", "a plain prompt instead of the default chat probe"},
    {"messages", OPT_MESSAGES, "JSON", "chat messages (a JSON array) instead of the default probe"},
    {"thinking", OPT_THINKING, "on|off", "the \"thinking\" of the request (default: not set)"},
    {"top-logprobs", OPT_TOP_LOGPROBS, "N", "alternatives per token, fingerprinted too (default 5)"},
    {"temperature", OPT_TEMPERATURE, "T", "temperature (default 0: greedy)"},
    {"seed", OPT_SEED, "N", "seed (default 0)"},
    {"match-by", OPT_MATCH_BY, "id|text", "compare tokens by id (default) or by text"},
    OB_OPT_ROW_JSON(OPT_JSON),
    {"selftest", OPT_SELFTEST, NULL, "check the fingerprint and comparator logic, then exit"},
    {"quiet", 'q', NULL, "print no table"},
    OB_OPT_ROWS_SERVER,
    OB_OPT_ROWS_SHARED,
    {0},
};

struct opts {
    const char *model, *prompt, *messages, *json;
    struct ob_route_opts r;        /* the route (in process: its model is above; parallel 0:
                                      --width) */
    int width, rounds, max_tokens, top_logprobs, thinking, match;
    double temperature;
    uint64_t seed;
    bool vs_solo, quiet;
};

/* the request every copy sends, as a request record (1b(7)) */
static cJSON *probe_record(const struct opts *o)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", "batchrep");
    if (o->prompt) {
        cJSON_AddStringToObject(r, "prompt", o->prompt);
    } else {
        cJSON *m = NULL;
        if (o->messages) {
            ob_json_parse(o->messages, strlen(o->messages), 0, &m);
        } else {
            m = cJSON_CreateArray();
            cJSON *u = cJSON_CreateObject();
            cJSON_AddStringToObject(u, "role", "user");
            cJSON_AddStringToObject(u, "content", DEFAULT_PROBE);
            cJSON_AddItemToArray(m, u);
        }
        if (!m) {
            cJSON_Delete(r);
            return NULL;
        }
        cJSON_AddItemToObject(r, "messages", m);
    }
    /* real numbers (not raw text): the record is parsed as it is, not printed first */
    cJSON_AddNumberToObject(r, "max_tokens", o->max_tokens);
    cJSON_AddNumberToObject(r, "temperature", o->temperature);
    cJSON_AddNumberToObject(r, "seed", (double)o->seed);
    cJSON_AddNumberToObject(r, "top_logprobs", o->top_logprobs);
    cJSON_AddBoolToObject(r, "cache_prompt", false);
    if (o->thinking >= 0)
        cJSON_AddBoolToObject(r, "thinking", o->thinking);
    return r;
}

/* ---- the run (every route: client.h) ----------------------------------------------------------- */

struct collect {
    struct ob_agree_rec *recs;     /* [rounds * width] */
    int width;
    const char *what;              /* "solo", or NULL: "round R copy K" */
    char *model;                   /* the model's name, from the first record */
    size_t model_size;
    int err;
    char why[400];
};

/* a copy's result record -> its stream, read through text as any reader of the records would */
static void on_copy(void *user, int round, int copy, struct ob_client_finish *f)
{
    struct collect *c = user;
    cJSON *back = NULL;
    int e = f->err ? f->err : !f->rec ? OB_ENOMEM : 0;
    const char *why = f->why ? f->why : "out of memory";
    if (!e && !c->err) {
        char *s = ob_json_print(f->rec);
        e = !s ? ob_seterr(OB_ENOMEM, "out of memory") : ob_json_parse(s, strlen(s), 0, &back);
        cJSON_free(s);
        if (!e)
            e = ob_agree_rec_from_json(back, &c->recs[round * c->width + copy]);
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(back, "model"), "name");
        if (!e && cJSON_IsString(mn) && !c->model[0])
            snprintf(c->model, c->model_size, "%s", mn->valuestring);
        why = ob_errmsg();
    }
    if (e && !c->err) {
        c->err = e;
        if (c->what)
            snprintf(c->why, sizeof c->why, "%s did not finish: %s", c->what, why);
        else
            snprintf(c->why, sizeof c->why, "round %d copy %d did not finish: %s", round, copy,
                     why);
    }
    cJSON_Delete(back);
    cJSON_Delete(f->rec);
}

static int run(const struct opts *o, const cJSON *req, struct ob_agree_rec *copies,
               struct ob_agree_rec *solo, char *route, size_t route_size, char *model_name,
               size_t model_size)
{
    struct ob_client *c;
    struct ob_client_params cp = {.model = o->model, .r = &o->r, .parallel = o->r.lp.parallel,
                                  .thinking = -1};
    int e = ob_client_open(&cp, &c);
    if (e)
        return e;
    snprintf(route, route_size, "%s", ob_client_route(c));     /* without credentials */
    if (ob_client_local_model(c))          /* a server's: the name its replies give */
        snprintf(model_name, model_size, "%s", ob_client_model(c));
    if (ob_client_note(c)[0] && !o->quiet)
        fprintf(stderr, PROG ": warning: %s\n", ob_client_note(c));
    /* chat messages to a model without a template are refused (lib/chat.h): say which
     * option sends a plain prompt instead */
    struct ob_model *m = ob_client_local_model(c);
    if (m && !o->prompt && !ob_model_chat_template(m))
        e = ob_seterr(OB_EUNSUPP, "%s: the model has no chat template; give a plain prompt "
                      "(--prompt TEXT) instead of %s", o->model,
                      o->messages ? "--messages" : "the default chat probe");
    struct collect k = {.recs = solo, .width = 1, .what = "solo", .model = model_name,
                        .model_size = model_size};
    if (!e && o->vs_solo && !(e = ob_client_release(c, req, 1, 1, on_copy, &k)) && k.err)
        e = ob_seterr(k.err, "%s", k.why);
    k = (struct collect){.recs = copies, .width = o->width, .model = model_name,
                         .model_size = model_size};
    if (!e && !(e = ob_client_release(c, req, o->width, o->rounds, on_copy, &k)) && k.err)
        e = ob_seterr(k.err, "%s", k.why);
    ob_client_close(c);
    return e;
}

/* ---- the report ------------------------------------------------------------------------------- */

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (cJSON_IsRaw(v))
        return strtod(v->valuestring, NULL);
    return 0;
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void sci(FILE *f, double v)
{
    if (v == 0)
        fprintf(f, "0");
    else
        fprintf(f, "%.3e", v);
}

static void print_report(FILE *f, const cJSON *rep)
{
    fprintf(f, "route %s, model %s, width %.0f, rounds %.0f, max_tokens %.0f, temperature %g\n",
            str(rep, "route"), str(rep, "model"), num(rep, "width"), num(rep, "rounds"),
            num(rep, "max_tokens"), num(rep, "temperature"));
    const cJSON *x;
    cJSON_ArrayForEach(x, get(rep, "per_round")) {
        fprintf(f, "round %.0f:", num(x, "round"));
        const cJSON *s;
        cJSON_ArrayForEach(s, get(x, "states"))
            fprintf(f, " %s", s->valuestring);
        fprintf(f, "   (%.0f state%s, %.0f/%.0f identical)\n", num(x, "distinct"),
                num(x, "distinct") == 1 ? "" : "s", num(x, "identical"), num(rep, "width"));
    }
    fprintf(f, "states: %.0f over %.0f copies:", num(rep, "states"), num(rep, "copies"));
    cJSON_ArrayForEach(x, get(rep, "state_list"))
        fprintf(f, " %s %.0f (%s, %.0f tokens)%s", str(x, "state"), num(x, "copies"),
                str(x, "fingerprint"), num(x, "tokens"), x->next ? "," : "");
    fputc('\n', f);
    const cJSON *rr = get(rep, "round_to_round");
    fprintf(f, "identical round to round: %.0f/%.0f same-index pairs\n", num(rr, "identical"),
            num(rr, "pairs"));
    fprintf(f, "worst |dlogp| within the mixture: ");
    sci(f, num(rep, "worst_abs_dlogp"));
    const cJSON *w = get(rep, "worst_at");
    if (cJSON_IsObject(w))
        fprintf(f, " (states %s and %s, position %.0f)", str(w, "a"), str(w, "b"), num(w, "pos"));
    fputc('\n', f);
    const cJSON *vs = get(rep, "vs_solo");
    if (cJSON_IsObject(vs)) {
        const cJSON *ma = get(vs, "mean_abs_dlogp"), *st = get(vs, "same_token");
        fprintf(f, "vs solo (%s, %.0f tokens): identical %.0f/%.0f; mean |dlogp| min ",
                str(vs, "fingerprint"), num(vs, "tokens"), num(vs, "identical"),
                num(vs, "copies"));
        sci(f, num(ma, "min"));
        fprintf(f, " median ");
        sci(f, num(ma, "median"));
        fprintf(f, " max ");
        sci(f, num(ma, "max"));
        fprintf(f, "; same token min %.3f median %.3f max %.3f\n", num(st, "min"),
                num(st, "median"), num(st, "max"));
    }
    fprintf(f, "verdict: %s\n", str(rep, "verdict"));
}

/* ---- selftest -------------------------------------------------------------------------------- */

static int st_n, st_bad;

static void st_ok(bool cond, const char *what)
{
    st_n++;
    printf("%sok %d - %s\n", cond ? "" : "not ", st_n, what);
    st_bad += !cond;
}

/* a hand-made stream: ids, logprobs, and a 2-entry top list (the token, then id+1000 at
 * logprob - margin) */
static void mk(struct ob_agree_rec *r, int n, const int32_t *ids, const float *lp,
               const float *margin)
{
    struct ob_token_info *ti = calloc((size_t)n + 1, sizeof *ti);
    for (int i = 0; i < n; i++) {
        ti[i].id = ids[i];
        ti[i].logprob = lp[i];
        ti[i].n_top = 2;
        ti[i].top[0] = (struct ob_top_lp){ids[i], lp[i]};
        ti[i].top[1] = (struct ob_top_lp){ids[i] + 1000, lp[i] - margin[i]};
    }
    if (ob_agree_rec_from_info(ti, n, true, r))
        abort();
    free(ti);
}

static cJSON *st_parse(const char *s)
{
    cJSON *j;
    if (ob_json_parse(s, strlen(s), 0, &j))
        abort();
    return j;
}

static int selftest(void)
{
    static const int32_t ia[] = {5, 6, 7, 8}, ib[] = {5, 6, 9, 8};
    static const float la[] = {-0.5f, -1.25f, -0.125f, -2.0f}, lb[] = {-0.5f, -1.0f, -0.375f,
                                                                         -2.0625f};
    static const float ma[] = {1, 0.25f, 2.125f, 0.5f}, mb[] = {1, 0.75f, 0.75f, 0.5f};
    struct ob_agree_rec a, a2, b, c;
    mk(&a, 4, ia, la, ma);
    mk(&a2, 4, ia, la, ma);
    mk(&b, 4, ib, lb, mb);
    mk(&c, 4, ia, la, ma);
    c.t[3].top[1].lp = nextafterf(c.t[3].top[1].lp, 0);  /* one bit of one top entry */

    /* fingerprints */
    st_ok(ob_agree_identical(&a, &a2, OB_MATCH_ID) &&
          ob_agree_fingerprint(&a, OB_MATCH_ID) == ob_agree_fingerprint(&a2, OB_MATCH_ID),
          "equal streams: identical, same fingerprint");
    st_ok(!ob_agree_identical(&a, &c, OB_MATCH_ID) &&
          ob_agree_fingerprint(&a, OB_MATCH_ID) != ob_agree_fingerprint(&c, OB_MATCH_ID),
          "one bit of one top log-probability: a different state and fingerprint");
    st_ok(!ob_agree_identical(&a, &b, OB_MATCH_ID), "different tokens: not identical");

    /* the comparator, by hand: common positions 0 1 3; exact at 0; |d| 0, .25, .0625 */
    struct ob_agree_cmp k;
    ob_agree_cmp_recs(&a, &b, OB_MATCH_ID, &k);
    st_ok(k.aligned == 4 && k.common == 3 && k.exact == 1 && k.n_lp == 3,
          "aligned 4, common 3, exact 1");
    st_ok(k.max_abs == 0.25 && k.max_pos == 1 && k.sum_abs == 0.3125,
          "max |dlogp| 0.25 at position 1, sum 0.3125 (common positions only)");
    double m1, m2;
    st_ok(k.div_pos == 2 && ob_agree_margin(&a.t[2], &m1) && ob_agree_margin(&b.t[2], &m2) &&
          m1 == 2.125 && m2 == 0.75, "first divergence at 2, top-2 margins 2.125 and 0.75");
    struct ob_agree_rec s3 = a2;
    s3.n = 3;                          /* a shorter stream: it diverges where it ends */
    ob_agree_cmp_recs(&a, &s3, OB_MATCH_ID, &k);
    st_ok(k.aligned == 3 && k.common == 3 && k.div_pos == 3 && !k.identical,
          "a stream that stops early: aligned 3, divergence at its end");

    /* matching by text: the same stream without ids */
    cJSON *ja = st_parse("{\"id\":\"x\",\"tokens\":[{\"id\":1,\"text\":\"a\",\"logprob\":-0.5},"
                         "{\"id\":2,\"text\":\"b\",\"logprob\":-1}]}");
    cJSON *jb = st_parse("{\"id\":\"x\",\"tokens\":[{\"text\":\"a\",\"logprob\":-0.5},"
                         "{\"text\":\"b\",\"bits\":\"bf800000\"}]}");
    struct ob_agree_rec ra, rb;
    if (ob_agree_rec_from_json(ja, &ra) || ob_agree_rec_from_json(jb, &rb))
        abort();
    ob_agree_cmp_recs(&ra, &rb, OB_MATCH_ID, &k);
    st_ok(k.common == 0, "no ids on one side: nothing in common by id");
    ob_agree_cmp_recs(&ra, &rb, OB_MATCH_TEXT, &k);
    st_ok(k.common == 2 && k.exact == 2 && k.identical, "by text: 2 common, 2 exact");
    /* -0.1 is the shortest decimal of the float32 -0.1f (1b's records print that way);
     * -0.30000000000000004 is a double that no float32 prints as */
    cJSON *jn = st_parse("{\"id\":\"x\",\"tokens\":[{\"id\":1,\"logprob\":-0.1},"
                         "{\"id\":1,\"logprob\":-0.30000000000000004}]}");
    struct ob_agree_rec rn;
    if (ob_agree_rec_from_json(jn, &rn))
        abort();
    st_ok(rn.nonf32 == 1 && rn.t[0].lp == -0.1f && rn.t[1].lp == -0.3f,
          "a decimal no float32 prints as: rounded, counted; a float32's shortest decimal: not");

    /* the batch report: width 2, rounds 3, states A A | A B | B B, solo A */
    struct ob_agree_rec cp[6] = {a, a, a, b, b, b};
    cJSON *rep;
    int states, same;
    if (ob_batchrep_report(cp, 2, 3, &a, OB_MATCH_ID, &rep, &states, &same))
        abort();
    const cJSON *rr = get(rep, "round_to_round"), *pr = get(rep, "per_round");
    st_ok(states == 2 && same == 3, "2 states; 3 of 6 copies identical to the solo one");
    st_ok(num(rr, "identical") == 2 && num(rr, "pairs") == 4,
          "round to round: 2 of 4 same-index pairs identical");
    st_ok(num(cJSON_GetArrayItem(pr, 0), "identical") == 2 &&
          num(cJSON_GetArrayItem(pr, 1), "identical") == 1 &&
          num(cJSON_GetArrayItem(pr, 1), "distinct") == 2,
          "per round: 2/2 identical, then 1/2 with 2 states");
    const cJSON *vs = get(rep, "vs_solo");
    st_ok(num(rep, "worst_abs_dlogp") == 0.25 && num(get(vs, "mean_abs_dlogp"), "max") ==
          0.3125 / 3 && num(get(vs, "mean_abs_dlogp"), "median") == 0.3125 / 6 &&
          num(get(vs, "same_token"), "median") == (1 + 0.75) / 2,
          "worst |dlogp| 0.25; vs solo mean |dlogp| median and max, same-token median");
    cJSON_Delete(rep);
    struct ob_agree_rec one[4] = {a, a2, a, a2};
    if (ob_batchrep_report(one, 4, 1, NULL, OB_MATCH_ID, &rep, &states, &same))
        abort();
    st_ok(states == 1 && num(rep, "worst_abs_dlogp") == 0, "identical copies: one state");
    cJSON_Delete(rep);

    cJSON_Delete(ja);
    cJSON_Delete(jb);
    cJSON_Delete(jn);
    ob_agree_rec_free(&ra);
    ob_agree_rec_free(&rb);
    ob_agree_rec_free(&rn);
    ob_agree_rec_free(&a);
    ob_agree_rec_free(&a2);
    ob_agree_rec_free(&b);
    ob_agree_rec_free(&c);
    printf("1..%d\n", st_n);
    if (ob_stdout_close()) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return OB_EXIT_FAILURE;
    }
    return st_bad ? OB_EXIT_NO : OB_EXIT_OK;
}

/* ---- main ------------------------------------------------------------------------------------- */

static int usage_error(const char *msg)
{
    fprintf(stderr, PROG ": %s\nusage: " PROG " (-m MODEL [-d ROUTE] | -d URL) [options]  "
            "(see " PROG " --help)\n", msg);
    return OB_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    ob_blas_env(argc, argv);               /* before getopt permutes argv: may re-exec */
    struct opts o = {.r = OB_ROUTE_OPTS_DEFAULT, .width = 4, .rounds = 4, .max_tokens = 32,
                     .top_logprobs = 5, .thinking = -1, .match = OB_MATCH_ID};
    o.r.lp.parallel = 0;
    bool selftest_only = false;
    struct ob_cmdline cl = {PROG, PROG " -m MODEL [-d ROUTE] [options]\n       " PROG
                            " -d URL [options]\n       " PROG " --selftest",
                            "Release N identical requests together for R rounds; count the distinct "
                            "answers (states).\nExit 0: one state (repeatable); 1: more than one.",
                            options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case OPT_PARALLEL:
            cl.bad = !ob_opt_int("parallel", optarg, 1, 256, &o.r.lp.parallel);
            if (!o.r.local_only)
                o.r.local_only = "--parallel";
            break;
        case OPT_WIDTH: cl.bad = !ob_opt_int("width", optarg, 1, 256, &o.width); break;
        case OPT_ROUNDS: cl.bad = !ob_opt_int("rounds", optarg, 1, 10000, &o.rounds); break;
        case OPT_MAX_TOKENS: cl.bad = !ob_opt_int("max-tokens", optarg, 1, 1 << 20, &o.max_tokens); break;
        case OPT_PROMPT: o.prompt = optarg; break;
        case OPT_MESSAGES: o.messages = optarg; break;
        case OPT_THINKING:
            cl.bad = !ob_opt_choice("thinking", optarg, ob_opt_words_on_off, &o.thinking);
            break;
        case OPT_TOP_LOGPROBS:
            cl.bad = !ob_opt_int("top-logprobs", optarg, 0, OB_MAX_TOP, &o.top_logprobs);
            break;
        case OPT_TEMPERATURE: cl.bad = !ob_opt_num("temperature", optarg, 0, 100, &o.temperature); break;
        case OPT_SEED: cl.bad = !ob_opt_u64("seed", optarg, 0, OB_SEED_MAX, &o.seed); break;
        case OPT_VS_SOLO: o.vs_solo = true; break;
        case OPT_MATCH_BY:
            cl.bad = !ob_opt_choice("match-by", optarg, ob_agree_match_words, &o.match);
            break;
        case OPT_JSON: o.json = optarg; break;
        case OPT_SELFTEST: selftest_only = true; break;
        case 'q': o.quiet = true; break;
        default: cl.bad = ob_opt_route(c, optarg, &o.r) < 0; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (cl.bad)
        return usage_error(cli_reason(&cl));
    if (optind < argc)
        return usage_error("no operands are taken");
    if (selftest_only)
        return selftest();
    if (!o.r.url && !o.model)
        return usage_error("no route: -m MODEL (in process) or -d URL");
    if (ob_route_opts_check(&o.r))
        return usage_error(ob_errmsg());
    if (o.prompt && o.messages)
        return usage_error("--prompt and --messages exclude each other");
    if (!o.r.lp.parallel)
        o.r.lp.parallel = o.width;
    if (o.messages) {
        cJSON *m = NULL;
        char why[600];
        snprintf(why, sizeof why, "--messages: %s", ob_json_parse(o.messages, strlen(o.messages),
                 0, &m) ? ob_errmsg() : "not a JSON array");
        bool ok = cJSON_IsArray(m);
        cJSON_Delete(m);
        if (!ok)
            return usage_error(why);
    }

    /* the report's file is opened before the measurement: an unwritable one is found at once */
    bool json_out = o.json && strcmp(o.json, "-") == 0;
    FILE *jf = NULL;
    if (o.json && ob_open_output(o.json, &jf)) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return OB_EXIT_FAILURE;
    }
    cJSON *req = probe_record(&o);
    int total = o.width * o.rounds;
    struct ob_agree_rec *copies = calloc((size_t)total, sizeof *copies), solo;
    memset(&solo, 0, sizeof solo);
    if (!req || !copies) {
        fprintf(stderr, PROG ": out of memory\n");
        cJSON_Delete(req);
        free(copies);
        if (jf && !json_out)
            fclose(jf);
        return OB_EXIT_FAILURE;
    }
    char route[256] = "", model[256] = "";
    int e;
    e = run(&o, req, copies, &solo, route, sizeof route, model, sizeof model);
    int status = OB_EXIT_OK;
    bool out_failed = false;               /* a failed write to stdout, already reported */
    cJSON *rep = NULL;
    int states = 0, same = 0;
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        status = ob_exit_status(e);
    } else if ((e = ob_batchrep_report(copies, o.width, o.rounds, o.vs_solo ? &solo : NULL,
                                       o.match, &rep, &states, &same))) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        status = ob_exit_status(e);
    }
    if (rep) {
        /* what was run, ahead of what was found */
        cJSON *head = cJSON_CreateObject();
        cJSON_AddStringToObject(head, "route", route);
        cJSON_AddStringToObject(head, "model", model);
        cJSON_AddItemToObject(head, "request", cJSON_Duplicate(req, true));
        ob_json_add_int(head, "max_tokens", o.max_tokens);
        cJSON_AddItemToObject(head, "temperature", ob_json_f64(o.temperature));
        cJSON_AddStringToObject(head, "match_by", o.match == OB_MATCH_TEXT ? "text" : "id");
        for (cJSON *it = rep->child; it;) {
            cJSON *next = it->next;
            cJSON_AddItemToObject(head, it->string, cJSON_DetachItemViaPointer(rep, it));
            it = next;
        }
        cJSON_Delete(rep);
        rep = head;
        bool ok = states == 1 && (!o.vs_solo || same == total);
        cJSON_AddStringToObject(rep, "verdict",
                                ok ? (o.vs_solo ? "repeatable (one state, the solo one)"
                                                : "repeatable (one state)")
                                : states == 1 ? "one state, but not the solo one"
                                              : "not repeatable (more than one state)");
        status = ok ? OB_EXIT_OK : OB_EXIT_NO;
        if (jf) {
            int we = ob_output_record(jf, o.json, rep);
            jf = NULL;
            if (we) {
                fprintf(stderr, PROG ": %s\n", ob_errmsg());
                out_failed = json_out;
                status = OB_EXIT_FAILURE;
            }
        }
        if (!o.quiet && !json_out)
            print_report(stdout, rep);
    }
    if (jf && !json_out)                   /* not written: the measurement failed */
        fclose(jf);
    cJSON_Delete(rep);
    cJSON_Delete(req);
    for (int i = 0; i < total; i++)
        ob_agree_rec_free(&copies[i]);
    free(copies);
    ob_agree_rec_free(&solo);
    if (ob_stdout_close()) {
        if (!out_failed)
            fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return OB_EXIT_FAILURE;
    }
    return status;
}
