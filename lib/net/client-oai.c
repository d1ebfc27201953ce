/*
 * client-oai.c — the request interface (client.h) on a server: each request or scoring is one
 * transfer of the OpenAI-compatible wire format (oai-client.h), up to the client's parallel
 * transfers at once on one curl multi handle (http.h), each reply turned into a result record
 * by the writer every route shares.
 */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "net/oai-client.h"

struct oclient {
    struct ob_client c;            /* first */
    struct ob_oai_cli *cli;
    char *endpoint_chat, *endpoint_cmpl;
    struct ob_oai_cli_params params;
    struct oreq *live;             /* transfers not yet finished (cancelled ones too) */
    uint64_t handles, tokens;
    int64_t nonf32;
};

/* one transfer */
struct oreq {
    struct oclient *oc;
    uint64_t handle;
    bool cancelled;                /* finished already: its reply is dropped */
    /* a generation */
    cJSON *req;
    struct ob_oai_cli_req q;
    int repeat;
    ob_client_token_fn on_token;
    ob_client_finish_fn on_finish;
    /* a scoring: its body's parts, owned */
    struct ob_oai_cli_score sc;
    int32_t *ids;                  /* prompt, then forced */
    char *text;
    ob_client_scored_fn on_scored;
    void *user;
    struct oreq *next;
};

static void oreq_free(struct oreq *q)
{
    cJSON_Delete(q->req);
    ob_oai_cli_req_free(&q->q);
    free(q->ids);
    free(q->text);
    free(q);
}

/* take q off the live list: false when it is not there */
static bool unlink_req(struct oclient *oc, const void *q)
{
    for (struct oreq **pp = &oc->live; *pp; pp = &(*pp)->next)
        if (*pp == q) {
            *pp = (*pp)->next;
            return true;
        }
    return false;
}

static void start(struct oclient *oc, struct oreq *q, uint64_t *handle)
{
    q->oc = oc;
    q->handle = ++oc->handles;
    q->next = oc->live;
    oc->live = q;
    oc->c.in_flight++;
    if (handle)
        *handle = q->handle;
}

static int o_submit(struct ob_client *c, const struct ob_client_req *cq, uint64_t *handle)
{
    struct oclient *oc = (struct oclient *)c;
    struct oreq *q = calloc(1, sizeof *q);
    if (!q)
        return ob_seterr(OB_ENOMEM, "out of memory");
    q->repeat = cq->repeat;
    q->on_token = cq->on_token;
    q->on_finish = cq->on_finish;
    q->user = cq->user;
    int e = ob_oai_cli_request(cq->rec, &oc->params, cq->line, &q->q);
    if (e)
        ob_errprefix(e, "%s:%llu: id %s", cq->name, (unsigned long long)cq->line,
                     q->q.id ? q->q.id : "?");
    else if (!(q->req = cJSON_Duplicate(cq->rec, true)))
        e = ob_seterr(OB_ENOMEM, "out of memory");
    else
        e = ob_http_start(oc->cli->http, q->q.chat ? oc->endpoint_chat : oc->endpoint_cmpl,
                          q->q.body, q);
    if (e) {
        oreq_free(q);
        return e;
    }
    start(oc, q, handle);
    return 0;
}

static int o_score(struct ob_client *c, const struct ob_client_score *s)
{
    struct oclient *oc = (struct oclient *)c;
    struct oreq *q = calloc(1, sizeof *q);
    if (!q)
        return ob_seterr(OB_ENOMEM, "out of memory");
    q->on_scored = s->on_scored;
    q->user = s->user;
    size_t n = (size_t)s->n_prompt + (size_t)s->n_forced;
    q->ids = malloc((n ? n : 1) * sizeof *q->ids);
    q->text = s->text ? strdup(s->text) : NULL;
    int e = !q->ids || (s->text && !q->text) ? ob_seterr(OB_ENOMEM, "out of memory") : 0;
    char *body = NULL;
    if (!e) {
        if (s->n_prompt)
            memcpy(q->ids, s->prompt, (size_t)s->n_prompt * sizeof *q->ids);
        if (s->n_forced)
            memcpy(q->ids + s->n_prompt, s->forced, (size_t)s->n_forced * sizeof *q->ids);
        q->sc = (struct ob_oai_cli_score){
            .model = oc->cli->model, .prompt = q->ids, .n_prompt = s->n_prompt,
            .forced = q->ids + s->n_prompt, .n_forced = s->n_forced, .text = q->text,
            .echo = c->p.score_echo, .top = s->top,
        };
        if (!(body = ob_oai_cli_score_body(&q->sc)))
            e = ob_seterr(OB_ENOMEM, "out of memory");
    }
    if (!e)
        e = ob_http_start(oc->cli->http, oc->endpoint_cmpl, body, q);
    free(body);
    if (e) {
        oreq_free(q);
        return e;
    }
    start(oc, q, NULL);
    return 0;
}

/* the record of a request that did not run to its reply: finish reason `reason`, no tokens */
static cJSON *empty_result(struct oclient *oc, struct oreq *q, const char *reason)
{
    struct ob_result res = {
        .id = q->q.id, .repeat = q->repeat, .route = oc->c.route, .model = oc->c.model,
        .prompt_tokens = -1, .finish_reason = reason, .completion_tokens = 0,
        .cached_tokens = -1,
    };
    return ob_result_record(q->req, &res);
}

/* a finished transfer: its callback */
static void deliver(struct oclient *oc, struct oreq *q, const struct ob_http_result *r)
{
    if (q->on_scored) {
        struct ob_client_scored s = {0};
        char *mn = NULL;
        s.err = ob_oai_cli_score_reply(&q->sc, r, &s.tokens, &s.sum, &mn, &s.nonf32);
        s.model = mn;
        s.why = s.err ? ob_errmsg() : NULL;
        s.n = s.tokens ? cJSON_GetArraySize(s.tokens) : 0;
        if (s.err) {
            cJSON_Delete(s.tokens);
            s.tokens = NULL;
        }
        oc->tokens += (uint64_t)s.n;
        oc->nonf32 += s.nonf32;
        q->on_scored(q->user, &s);
        free(mn);
        return;
    }
    struct ob_client_finish f = {0};
    char why[600];
    f.rec = ob_oai_cli_result(oc->cli, q->req, &q->q, q->repeat, r, &f.err);
    if (!f.rec) {
        f.err = OB_ENOMEM;
        f.why = "out of memory";
    } else if (f.err == OB_EDEVICE) {      /* unreachable: the message as it is */
        snprintf(why, sizeof why, "%s", ob_errmsg());
        f.why = why;
    } else if (f.err) {                    /* written as an error record */
        snprintf(why, sizeof why, "%s: id %s: %s", oc->c.route, q->q.id, ob_errmsg());
        f.why = why;
    }
    const cJSON *nf = cJSON_GetObjectItemCaseSensitive(f.rec, "nonf32_values");
    if (cJSON_IsRaw(nf))                   /* written by the writer as a raw integer */
        oc->nonf32 += strtoll(nf->valuestring, NULL, 10);
    const cJSON *t, *toks = cJSON_GetObjectItemCaseSensitive(f.rec, "tokens");
    cJSON_ArrayForEach(t, toks) {
        oc->tokens++;
        if (q->on_token)
            q->on_token(q->user, t);
    }
    q->on_finish(q->user, &f);
}

static int o_poll(struct ob_client *c, double wait_s)
{
    struct oclient *oc = (struct oclient *)c;
    int got = 0;
    while (oc->live) {
        struct ob_http_result *r;
        int k = ob_http_next(oc->cli->http, got ? 0 : wait_s, &r);
        if (k <= 0)
            return k < 0 ? k : got;
        struct oreq *q = r->user;
        unlink_req(oc, q);
        if (!q->cancelled) {
            c->in_flight--;
            deliver(oc, q, r);
        }
        ob_http_result_free(r);
        oreq_free(q);
        got++;
    }
    return got;
}

static void o_cancel(struct ob_client *c, uint64_t handle)
{
    struct oclient *oc = (struct oclient *)c;
    for (struct oreq *q = oc->live; q; q = q->next) {
        if (q->handle != handle || q->cancelled || q->on_scored)
            continue;
        /* the transfer runs on; its reply will be dropped */
        q->cancelled = true;
        c->in_flight--;
        struct ob_client_finish f = {.rec = empty_result(oc, q, "cancelled")};
        if (!f.rec) {
            f.err = OB_ENOMEM;
            f.why = "out of memory";
        }
        q->on_finish(q->user, &f);
        return;
    }
}

static void o_stats(const struct ob_client *c, struct ob_client_stats *s)
{
    const struct oclient *oc = (const struct oclient *)c;
    *s = (struct ob_client_stats){.running = c->in_flight, .tokens = oc->tokens,
                                  .nonf32 = oc->nonf32};
}

static void o_report(const struct ob_client *c, FILE *f, const char *prog, bool verbose)
{
    (void)verbose;
    const struct oclient *oc = (const struct oclient *)c;
    if (oc->nonf32)
        fprintf(f, "%s: %s: %lld log-probabilit%s on the wire %s not float32 (rounded to "
                "float32; the wire value is kept as wire_logprob)\n", prog, c->route,
                (long long)oc->nonf32, oc->nonf32 == 1 ? "y" : "ies",
                oc->nonf32 == 1 ? "was" : "were");
}

/* ---- the barrier ------------------------------------------------------------------------------ */

static int o_release(struct ob_client *c, const cJSON *rec, int width, int rounds,
                     ob_client_copy_fn fn, void *user)
{
    struct oclient *oc = (struct oclient *)c;
    struct ob_oai_cli_req q;
    memset(&q, 0, sizeof q);
    struct ob_http *h = oc->cli->http;
    int e = ob_oai_cli_request(rec, &oc->params, 1, &q);
    if (e)
        ob_errprefix(e, "the request");
    const char *url = q.chat ? oc->endpoint_chat : oc->endpoint_cmpl;
    char *copy = calloc((size_t)width, 1);  /* the transfers' user pointers: &copy[k] */
    if (!e && !copy)
        e = ob_seterr(OB_ENOMEM, "out of memory");
    for (int round = 0; round < rounds && !e; round++) {
        /* every copy is on the wire before any reply is read */
        for (int k = 0; k < width && !e; k++)
            e = ob_http_start(h, url, q.body, copy + k);
        for (int got = 0; got < width && !e;) {
            struct ob_http_result *r;
            int k = ob_http_next(h, -1, &r);
            if (k <= 0) {
                e = k < 0 ? k : ob_seterr(OB_EINTERNAL, "a transfer was lost");
                break;
            }
            if (unlink_req(oc, r->user)) {     /* a cancelled request's reply: dropped */
                oreq_free(r->user);
                ob_http_result_free(r);
                continue;
            }
            const char *at = r->user;
            got++;
            struct ob_client_finish f = {0};
            f.rec = ob_oai_cli_result(oc->cli, rec, &q, 0, r, &f.err);
            if (!f.rec)
                f.err = OB_ENOMEM;
            if (f.err)
                f.why = f.rec ? ob_errmsg() : "out of memory";
            fn(user, round, (int)(at - copy), &f);
            ob_http_result_free(r);
        }
    }
    free(copy);
    ob_oai_cli_req_free(&q);
    return e;
}

static void o_close(struct ob_client *c)
{
    struct oclient *oc = (struct oclient *)c;
    while (oc->live) {
        struct oreq *q = oc->live;
        oc->live = q->next;
        oreq_free(q);
    }
    free(oc->endpoint_chat);
    free(oc->endpoint_cmpl);
    ob_oai_cli_close(oc->cli);           /* aborts the transfers still running */
    free(oc);
}

static const struct ob_client_ops oai_ops = {
    .submit = o_submit, .score = o_score, .release = o_release, .poll = o_poll,
    .cancel = o_cancel, .stats = o_stats, .report = o_report, .close = o_close,
};

int ob_client_open_oai(const struct ob_client_params *p, struct ob_client **out)
{
    struct oclient *oc = ob_client_new(sizeof *oc, &oai_ops, p);
    if (!oc)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int e = ob_oai_cli_open(p->r->url, &p->r->srv, &oc->cli);
    if (!e) {
        oc->endpoint_chat = ob_oai_cli_url(oc->cli, "/v1/chat/completions");
        oc->endpoint_cmpl = ob_oai_cli_url(oc->cli, "/v1/completions");
        if (!oc->endpoint_chat || !oc->endpoint_cmpl)
            e = ob_seterr(OB_ENOMEM, "out of memory");
    }
    if (e) {
        if (oc->cli)
            o_close(&oc->c);
        else
            free(oc);
        return e;
    }
    const struct ob_oai_cli *cli = oc->cli;
    oc->params = (struct ob_oai_cli_params){
        .max_tokens = p->d.max_tokens, .temperature = p->d.temperature, .seed = p->d.seed,
        .top_logprobs = p->d.top_logprobs, .thinking = p->thinking,
        .model = p->model ? p->model : cli->model,
    };
    oc->c.route = cli->route;
    oc->c.model = cli->model_name ? cli->model_name : cli->model;
    snprintf(oc->c.note, sizeof oc->c.note, "%s", cli->note);
    *out = &oc->c;
    return 0;
}
