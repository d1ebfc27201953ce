/*
 * client.c — unit tests of the request interface (lib/client.h; TAP):   client MODEL [URL]
 *
 * On the in-process route (cpu, MODEL) and, given a URL, on a server (1b-serve of MODEL on cpu),
 * the same calls: two requests submitted together and one cancelled at once (their tokens
 * reported one by one as the record has them; the cancelled one finishes "cancelled"); a
 * record refused at submit with its place named; the greedy tokens scored again (forced) give
 * their bits back; the barrier's copies (width 3, 2 rounds) give the solo tokens; the stats
 * count the tokens. Across routes the tokens are byte-identical.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "tap.h"

static const char rec_a[] = "{\"id\":\"a\",\"prompt\":\"Once upon a time\",\"max_tokens\":8,"
                            "\"top_logprobs\":2,\"cache_prompt\":false}";

struct got {
    cJSON *rec;
    int err;
    int n_tokens;                  /* on_token calls */
    cJSON *seen;                   /* the tokens on_token saw */
    bool done;
};

static void on_token(void *user, const cJSON *t)
{
    struct got *g = user;
    g->n_tokens++;
    cJSON_AddItemToArray(g->seen, cJSON_Duplicate(t, true));
}

static void on_finish(void *user, struct ob_client_finish *f)
{
    struct got *g = user;
    g->rec = f->rec;
    g->err = f->err;
    g->done = true;
}

static const char *finish_reason(const cJSON *rec)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(rec, "finish_reason");
    return cJSON_IsString(r) ? r->valuestring : "(none)";
}

/* the tokens of a record, as text (NULL when it has none) */
static char *tokens_text(const cJSON *tokens)
{
    return tokens ? cJSON_PrintUnformatted(tokens) : NULL;
}

static bool same_tokens(const cJSON *x, const cJSON *y)
{
    char *a = tokens_text(x), *b = tokens_text(y);
    bool same = a && b && strcmp(a, b) == 0;
    free(a);
    free(b);
    return same;
}

/* an integer of a record: a number, or raw text (how the writer writes ids) */
static int int_of(const cJSON *v)
{
    return cJSON_IsNumber(v) ? v->valueint : cJSON_IsRaw(v) ? atoi(v->valuestring) : -1;
}

/* each token's id and bits, as text */
static char *ids_bits(const cJSON *tokens)
{
    size_t n = (size_t)cJSON_GetArraySize(tokens);
    char *s = calloc(n * 24 + 1, 1);
    const cJSON *t;
    cJSON_ArrayForEach(t, tokens) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(t, "id");
        const cJSON *bits = cJSON_GetObjectItemCaseSensitive(t, "bits");
        sprintf(s + strlen(s), "%d:%s ", int_of(id),
                cJSON_IsString(bits) ? bits->valuestring : "?");
    }
    return s;
}

struct scored {
    cJSON *tokens;
    int err, n;
    bool done;
};

static void on_scored(void *user, struct ob_client_scored *s)
{
    struct scored *sc = user;
    sc->tokens = s->tokens;
    sc->err = s->err;
    sc->n = s->n;
    sc->done = true;
}

struct copies {
    const cJSON *want;             /* the solo tokens */
    int n, same, failed;
};

static void on_copy(void *user, int round, int copy, struct ob_client_finish *f)
{
    struct copies *c = user;
    c->n++;
    if (f->err || !f->rec)
        c->failed++;
    else if (same_tokens(cJSON_GetObjectItemCaseSensitive(f->rec, "tokens"), c->want))
        c->same++;
    else {
        char *x = tokens_text(c->want), *y = cJSON_PrintUnformatted(f->rec);
        printf("#   round %d copy %d: want %s\n#   got %s\n", round, copy, x, y);
        free(x);
        free(y);
    }
    cJSON_Delete(f->rec);
}

static bool poll_until_idle(struct ob_client *c)
{
    for (int i = 0; i < 100000 && ob_client_in_flight(c) > 0; i++)
        if (ob_client_poll(c, 1.0) < 0)
            return false;
    return ob_client_in_flight(c) == 0;
}

/* the checks on one route; *a_tokens: request a's tokens (the caller's) */
static void route(const char *model, const char *url, cJSON **a_tokens)
{
    struct ob_route_opts r = OB_ROUTE_OPTS_DEFAULT;
    r.lp.threads = 1;
    r.url = url;
    r.srv.wait = 30;
    struct ob_client_params p = {.model = url ? NULL : model, .r = &r, .parallel = 2,
                                 .d = {.max_tokens = 16}, .thinking = -1};
    struct ob_client *c;
    int e = ob_client_open(&p, &c);
    const char *name = url ? "url" : "cpu";
    ok(e == 0, "%s: open (%s)", name, e ? ob_errmsg() : "ok");
    if (e)
        return;
    ok(strcmp(ob_client_route(c), url ? url : "cpu") == 0, "%s: the route is named %s", name,
       ob_client_route(c));

    cJSON *a = cJSON_Parse(rec_a), *b = cJSON_Duplicate(a, true);
    cJSON_ReplaceItemInObject(b, "id", cJSON_CreateString("b"));
    cJSON *cr = cJSON_Parse("{\"id\":\"c\",\"prompt\":\"Lily\",\"max_tokens\":64}");
    struct got ga = {.seen = cJSON_CreateArray()}, gb = {.seen = cJSON_CreateArray()}, gc = {0};
    struct ob_client_req qa = {.rec = a, .name = "t", .line = 1, .on_token = on_token,
                               .on_finish = on_finish, .user = &ga};
    struct ob_client_req qb = qa, qc = qa;
    qb.rec = b, qb.line = 2, qb.user = &gb;
    qc.rec = cr, qc.line = 3, qc.user = &gc, qc.on_token = NULL;
    uint64_t hc = 0;
    e = ob_client_submit(c, &qa, NULL);
    if (!e)
        e = ob_client_submit(c, &qb, NULL);
    if (!e)
        e = ob_client_submit(c, &qc, &hc);
    ok(e == 0 && ob_client_in_flight(c) == 3, "%s: three requests in flight", name);
    ob_client_cancel(c, hc);
    ok(poll_until_idle(c) && ga.done && gb.done && gc.done, "%s: every request finished", name);
    const cJSON *ta = cJSON_GetObjectItemCaseSensitive(ga.rec, "tokens");
    ok(ga.err == 0 && strcmp(finish_reason(ga.rec), "length") == 0 &&
       cJSON_GetArraySize(ta) == 8, "%s: a: 8 tokens, finish length (%s)", name,
       finish_reason(ga.rec));
    ok(ga.n_tokens == 8 && same_tokens(ga.seen, ta), "%s: a: each token reported as the record "
       "has it (%d calls)", name, ga.n_tokens);
    ok(same_tokens(ta, cJSON_GetObjectItemCaseSensitive(gb.rec, "tokens")),
       "%s: a and b: the same tokens", name);
    ok(strcmp(finish_reason(gc.rec), "cancelled") == 0, "%s: c cancelled (%s)", name,
       finish_reason(gc.rec));

    /* a refused record: its place named */
    cJSON *bad = cJSON_Parse("{\"id\":\"r\",\"prompt\":5}");
    struct got gr = {0};
    struct ob_client_req qr = {.rec = bad, .name = "t", .line = 9, .on_finish = on_finish,
                               .user = &gr};
    e = ob_client_submit(c, &qr, NULL);
    ok(e && ob_client_refused(e) && strncmp(ob_errmsg(), "t:9: id r: ", 11) == 0 && !gr.done,
       "%s: a refused record: %s", name, e ? ob_errmsg() : "taken");

    /* a's tokens, forced after its prompt: the same bits */
    const cJSON *pids = cJSON_GetObjectItemCaseSensitive(ga.rec, "prompt_ids");
    int np = cJSON_GetArraySize(pids), nf = cJSON_GetArraySize(ta);
    int32_t *prompt = calloc((size_t)np + 1, sizeof *prompt), *forced = calloc((size_t)nf + 1, 4);
    for (int i = 0; i < np; i++)
        prompt[i] = int_of(cJSON_GetArrayItem(pids, i));
    for (int i = 0; i < nf; i++)
        forced[i] = int_of(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ta, i), "id"));
    struct scored sc = {0};
    struct ob_client_score s = {.prompt = prompt, .n_prompt = np, .forced = forced,
                                .n_forced = nf, .top = 2, .on_scored = on_scored, .user = &sc};
    e = ob_client_score(c, &s);
    bool idle = e == 0 && poll_until_idle(c);
    char *x = ids_bits(ta), *y = sc.tokens ? ids_bits(sc.tokens) : strdup("");
    ok(idle && sc.done && sc.err == 0 && sc.n == nf && strcmp(x, y) == 0,
       "%s: the tokens scored again: the same ids and bits", name);
    if (strcmp(x, y))
        printf("#   generated %s\n#   scored    %s\n", x, y);
    free(x);
    free(y);

    /* the barrier */
    struct copies k = {.want = ta};
    e = ob_client_release(c, a, 3, 2, on_copy, &k);
    ok(e == 0 && k.n == 6 && k.same == 6 && !k.failed, "%s: the barrier: %d of 6 copies the "
       "solo tokens", name, k.same);

    struct ob_client_stats st;
    ob_client_stats(c, &st);
    ok(st.tokens >= 16 && st.running == 0, "%s: stats: %llu tokens, %d running", name,
       (unsigned long long)st.tokens, st.running);

    *a_tokens = cJSON_Duplicate(ta, true);
    cJSON_Delete(sc.tokens);
    free(prompt);
    free(forced);
    cJSON_Delete(bad);
    cJSON_Delete(ga.rec);
    cJSON_Delete(gb.rec);
    cJSON_Delete(gc.rec);
    cJSON_Delete(ga.seen);
    cJSON_Delete(gb.seen);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(cr);
    ob_client_close(c);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: client MODEL [URL]\n");
        return 2;
    }
    cJSON *local = NULL, *remote = NULL;
    route(argv[1], NULL, &local);
    if (argc == 3) {
        route(argv[1], argv[2], &remote);
        ok(local && remote && same_tokens(local, remote),
           "in process and on the server: byte-identical tokens");
    }
    cJSON_Delete(local);
    cJSON_Delete(remote);
    return tap_done();
}
