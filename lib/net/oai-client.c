/*
 * oai-client.c — the client side of the OpenAI-compatible wire format (see oai-client.h):
 * readiness, request records to request bodies, replies to result records, error text. The
 * transfers themselves are http.c's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "net/http.h"
#include "net/oai-client.h"
#include "record.h"
#include "sample.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int oom(void)
{
    return ob_seterr(OB_ENOMEM, "out of memory");
}

/* base + path as messages show it */
static char *shown_join(const char *base, const char *path)
{
    char *u = ob_http_join(base, path), *s = u ? ob_http_shown(u) : NULL;
    free(u);
    return s;
}

/* ---- readiness ------------------------------------------------------------------------------- */

void ob_oai_cli_ready_free(struct ob_oai_cli_ready *r)
{
    if (!r)
        return;
    free(r->model);
    free(r->name);
    free(r->sha256);
    r->model = r->name = r->sha256 = NULL;
}

/* GET base+path: the HTTP status (0 when no reply) and the body (*len bytes); why, when not
 * NULL, gets the reason of a transfer that failed after the server answered (a reply cut short,
 * a timeout), so that such a server is not called unreachable */
static int get(struct ob_http *h, const char *base, const char *path, long *status, char **body,
               size_t *len, char *why, size_t why_size)
{
    *status = 0;
    *body = NULL;
    *len = 0;
    char *url = ob_http_join(base, path);
    if (!url)
        return oom();
    struct ob_http_result *r;
    int e = ob_http_fetch(h, url, NULL, &r);
    free(url);
    if (e)
        return e;
    if (r->err == 0) {
        *status = r->status;
        *body = r->body;
        *len = r->len;
        r->body = NULL;
    } else if (r->err == OB_EIO && why) {
        snprintf(why, why_size, "%s", r->msg);
    }
    ob_http_result_free(r);
    return 0;
}

static bool says_stalled(const char *body, size_t len)
{
    cJSON *j = NULL;
    if (body)
        ob_json_parse(body, len, OB_JSON_ANY_BYTES, &j);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "status");
    bool st = cJSON_IsString(s) && strcmp(s->valuestring, "stalled") == 0;
    cJSON_Delete(j);
    return st;
}

/* The first model /v1/models lists: its id, as valid UTF-8 (it is sent back in every request
 * body), and, when it reports them (1b-serve does), the model's own name and the sha256 of its
 * file, which result records carry as the in-process routes' do (the name stays the server's). */
static void first_model(const char *body, size_t len, struct ob_oai_cli_ready *out)
{
    cJSON *j = NULL;
    if (body)
        ob_json_parse(body, len, OB_JSON_ANY_BYTES, &j);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *m = cJSON_IsArray(d) ? cJSON_GetArrayItem(d, 0) : NULL;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(m, "name");
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(m, "sha256");
    out->model = cJSON_IsString(id) ? ob_utf8_sanitize(id->valuestring, strlen(id->valuestring))
                                    : NULL;
    if (out->model && cJSON_IsString(name) && cJSON_IsString(sha) &&
        strlen(sha->valuestring) == 64 && strspn(sha->valuestring, "0123456789abcdef") == 64) {
        out->name = ob_utf8_sanitize(name->valuestring, strlen(name->valuestring));
        out->sha256 = strdup(sha->valuestring);
    }
    cJSON_Delete(j);
}

int ob_oai_cli_wait_ready(const char *base, double wait_s, const char *api_key,
                          struct ob_oai_cli_ready *out)
{
    memset(out, 0, sizeof *out);
    struct ob_http_opts o = {.timeout_s = 5, .connect_timeout_s = 2, .retries = 0,
                             .api_key = api_key};
    struct ob_http *h;
    int e = ob_http_new(&o, &h);
    if (e)
        return e;
    /* base and base + path as messages show them (without credentials) */
    char *shown = ob_http_shown(base), *shown_path = NULL;
    if (!shown) {
        ob_http_free(h);
        return oom();
    }
    double deadline = now_s() + (wait_s > 0 ? wait_s : 0), pause = 0.05;
    bool answered = false, no_health = false, ready = false;
    char broken[480] = "";             /* the last probe that failed after a connection */
    long last = 0;
    const char *last_path = "/health";
    for (;;) {
        long st;
        char *body;
        size_t blen;
        if ((e = get(h, base, "/health", &st, &body, &blen, broken, sizeof broken)))
            break;
        last_path = "/health";
        if (st == 404 || st == 405) {        /* no /health: the OpenAI-style path */
            free(body);
            if ((e = get(h, base, "/v1/health", &st, &body, &blen, broken, sizeof broken)))
                break;
            last_path = "/v1/health";
            no_health = st == 404 || st == 405;
        }
        answered |= st != 0;
        last = st;
        if (st == 200) {
            ready = true;
        } else if (st == 503 && says_stalled(body, blen)) {
            ready = true;
            free(shown_path);
            shown_path = shown_join(base, last_path);
            snprintf(out->note, sizeof out->note,
                     "%s reports \"stalled\" (an idle server that has loaded); "
                     "taken as ready", shown_path ? shown_path : shown);
        }
        free(body);
        if (ready || no_health || now_s() + pause > deadline)
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(pause * 1e9)};
        nanosleep(&ts, NULL);
        pause = pause * 2 < 0.5 ? pause * 2 : 0.5;
    }
    if (!e && !ready) {
        if (!answered && broken[0]) {
            e = ob_seterr(OB_EDEVICE, "%s: not ready after %g s: %s", shown, wait_s, broken);
        } else if (!answered) {
            e = ob_seterr(OB_EDEVICE, "%s: unreachable (no connection within %g s)", shown,
                          wait_s);
        } else {
            /* liveness only: /v1/models answers before the model has loaded */
            long st;
            char *body;
            size_t blen;
            if (!(e = get(h, base, "/v1/models", &st, &body, &blen, broken, sizeof broken))) {
                if (st == 200) {
                    if (no_health)
                        snprintf(out->note, sizeof out->note,
                                 "%s has no /health or /v1/health; /v1/models answers, so going "
                                 "on (it shows the server is alive, not that it is ready)",
                                 shown);
                    else if ((shown_path = shown_join(base, last_path)))
                        snprintf(out->note, sizeof out->note,
                                 "%s still answers %ld after %g s; /v1/models answers, so "
                                 "going on (it shows the server is alive, not that it is ready)",
                                 shown_path, last, wait_s);
                } else {
                    e = ob_seterr(OB_EDEVICE, "%s: not ready after %g s (%s answers %ld, "
                                  "/v1/models %ld)", shown, wait_s, last_path, last, st);
                }
                free(body);
            }
        }
    }
    if (!e) {
        long st;
        char *body;
        size_t blen;
        if (!get(h, base, "/v1/models", &st, &body, &blen, broken, sizeof broken) && st == 200)
            first_model(body, blen, out);
        free(body);
    }
    ob_http_free(h);
    free(shown);
    free(shown_path);
    return e;
}

/* ---- requests -------------------------------------------------------------------------------- */

void ob_oai_cli_req_free(struct ob_oai_cli_req *q)
{
    if (!q)
        return;
    free(q->id);
    free(q->body);
    memset(q, 0, sizeof *q);
}

static const cJSON *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int bad(const char *f, const char *why)
{
    return ob_seterr(OB_EFORMAT, "field '%s' %s", f, why);
}

static bool is_int_in(const cJSON *v, double lo, double hi)
{
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= lo &&
           v->valuedouble <= hi;
}

/* messages as every route reads them (record.h); the record's own array is what is sent */
static int check_messages(const cJSON *arr)
{
    struct ob_req_msgs m;
    char param[64];
    bool wrong;
    int e = ob_req_messages(arr, &m, param, sizeof param, &wrong);
    ob_req_msgs_free(&m);
    return e;
}

int ob_oai_cli_request(const cJSON *rec, const struct ob_oai_cli_params *p, uint64_t line,
                       struct ob_oai_cli_req *q)
{
    memset(q, 0, sizeof *q);
    const cJSON *id = field(rec, "id");
    char buf[OB_F32_BUFSZ];
    if (cJSON_IsString(id))
        q->id = strdup(id->valuestring);
    else if (cJSON_IsNumber(id))
        q->id = strdup(ob_f64_str(id->valuedouble, buf));
    else if (!id)
        q->id = (snprintf(buf, sizeof buf, "%llu", (unsigned long long)line), strdup(buf));
    else
        return bad("id", "must be a string or a number");
    if (!q->id)
        return oom();
    int e;
    /* the same refusals, from the same table, as the in-process routes (record.h), so that a
     * record means the same on every route */
    if ((e = ob_req_refuse_record(rec)))
        return e;
    int spec;                      /* checked as everywhere; not sent: it changes no answer */
    bool spec_type;
    if (ob_req_spec(rec, &spec, &spec_type) < 0)
        return OB_EFORMAT;
    const cJSON *prompt = field(rec, "prompt"), *msgs = field(rec, "messages");
    if (!prompt == !msgs)
        return ob_seterr(OB_EFORMAT, "a record needs exactly one of 'prompt' and 'messages'");
    if (msgs && (e = check_messages(msgs)))
        return e;
    if (prompt && !cJSON_IsString(prompt)) {
        if (!cJSON_IsArray(prompt) || !prompt->child)
            return bad("prompt", "must be a string or an array of token ids");
        const cJSON *it;
        cJSON_ArrayForEach(it, prompt)
            if (!is_int_in(it, 0, 2147483647.0))
                return bad("prompt", "must be a string or an array of token ids");
    }

    /* the fields 1b knows, checked by the table every route reads them with (record.h) */
    struct ob_req_params rp;
    ob_req_params_default(&rp);
    rp.max_tokens = p->max_tokens;
    rp.top_logprobs = p->top_logprobs;
    const char *kwp;
    int kw = 1;                            /* chat_template_kwargs.enable_thinking: 0 when set */
    if ((e = ob_req_params_read(rec, &rp, NULL)) || (e = kw = ob_req_kwargs(rec, &rp, &kwp)) < 0)
        return e;
    const char *stops[OB_REQ_MAX_STOP];
    bool wrong;
    int ns;
    if ((e = ob_req_stop(rec, stops, &ns, &wrong)) < 0)
        return e;

    const cJSON *v;
    q->chat = msgs != NULL;
    q->path = q->chat ? "/v1/chat/completions" : "/v1/completions";
    q->max_tokens = rp.max_tokens;
    q->top_logprobs = rp.top_logprobs;
    q->logprobs = rp.logprobs;
    int thinking = kw == 0 || field(rec, "thinking") ? rp.thinking : p->thinking;

    cJSON *b = cJSON_CreateObject();
    if (!b)
        return oom();
    if (p->model)
        cJSON_AddStringToObject(b, "model", p->model);
    if (q->chat)
        cJSON_AddItemToObject(b, "messages", cJSON_Duplicate(msgs, true));
    else
        cJSON_AddItemToObject(b, "prompt", cJSON_Duplicate(prompt, true));
    ob_json_add_int(b, "max_tokens", q->max_tokens);
    v = field(rec, "temperature");
    cJSON_AddItemToObject(b, "temperature", v ? cJSON_Duplicate(v, false)
                                              : ob_json_f64(p->temperature));
    v = field(rec, "seed");
    if (v)
        cJSON_AddItemToObject(b, "seed", cJSON_Duplicate(v, false));
    else
        ob_json_add_int(b, "seed", (long long)p->seed);
    static const char *const pass[] = {"top_k", "top_p", "min_p", "stop"};
    for (size_t i = 0; i < sizeof pass / sizeof *pass; i++)
        if ((v = field(rec, pass[i])))
            cJSON_AddItemToObject(b, pass[i], cJSON_Duplicate(v, true));
    /* at least one alternative: llama-server reports no log-probabilities with zero (the
     * extra ones are cut from the result). Asked for even when the record wants none: they
     * carry the tokens (ids, bytes), which a record has on every route; the values are then
     * left out of it. */
    int ask = q->logprobs && q->top_logprobs > 0 ? q->top_logprobs : 1;
    if (q->chat) {
        cJSON_AddBoolToObject(b, "logprobs", true);
        ob_json_add_int(b, "top_logprobs", ask);
    } else {
        ob_json_add_int(b, "logprobs", ask);
    }
    v = field(rec, "cache_prompt");
    cJSON_AddBoolToObject(b, "cache_prompt", v ? cJSON_IsTrue(v) : false);
    if (q->chat && thinking >= 0) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddBoolToObject(k, "enable_thinking", thinking);
        cJSON_AddItemToObject(b, "chat_template_kwargs", k);
    }
    cJSON_AddBoolToObject(b, "stream", false);
    q->body = ob_json_print(b);            /* the record's numbers exactly (a seed near 2^53) */
    cJSON_Delete(b);
    if (!q->body)
        return oom();
    return 0;
}

/* ---- replies --------------------------------------------------------------------------------- */

/* s (n bytes) into buf as one line of valid UTF-8: control characters become spaces, ill-formed
 * UTF-8 U+FFFD; cut at a character boundary when it does not fit (with "...") */
static void one_line(const char *s, size_t n, char *buf, size_t size)
{
    char *t = ob_utf8_sanitize(s, n);
    size_t k = 0;
    if (!t) {
        snprintf(buf, size, "(out of memory)");
        return;
    }
    const char *p = t, *end = t + strlen(t);
    while (p < end) {
        int l = ob_utf8_len(p, end);
        l = l ? l : 1;
        if (k + (size_t)l + 4 > size)
            break;
        for (int i = 0; i < l; i++)
            buf[k++] = l == 1 && ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) ? ' ' : p[i];
        p += l;
    }
    if (p < end && size >= 4) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = 0;
    free(t);
}

const char *ob_oai_cli_error_text(const char *body, size_t len, char *buf, size_t size)
{
    cJSON *j = NULL;
    if (body && len)
        ob_json_parse(body, len, OB_JSON_ANY_BYTES, &j);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const cJSON *m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
    if (!cJSON_IsString(m))
        m = cJSON_GetObjectItemCaseSensitive(j, "message");
    if (cJSON_IsString(m)) {
        one_line(m->valuestring, strlen(m->valuestring), buf, size);
    } else if (!body || !len) {
        snprintf(buf, size, "(empty reply)");
    } else {
        /* the start of the body, on one line, if it is text */
        bool text = ob_utf8_valid(body, len);
        for (size_t i = 0; i < len && text; i++) {
            unsigned char c = (unsigned char)body[i];
            text = c >= 0x20 ? c != 0x7f : c == '\n' || c == '\r' || c == '\t';
        }
        if (text)
            one_line(body, len < 160 ? len : 160, buf, size);
        else
            snprintf(buf, size, "(a binary reply of %zu bytes)", len);
    }
    cJSON_Delete(j);
    return buf;
}

/* a string from a reply into o as valid UTF-8 (ill-formed sequences become U+FFFD: a token's
 * exact bytes are kept in its "bytes") */
static void add_text(cJSON *o, const char *key, const char *s)
{
    char *t = ob_utf8_sanitize(s, strlen(s));
    cJSON_AddStringToObject(o, key, t ? t : "");
    free(t);
}

/* the float32 of a wire decimal into o as logprob + bits; a decimal that is not a float32 is
 * kept as wire_logprob and counted. false when there is no number. */
static bool put_lp(cJSON *o, const cJSON *v, int64_t *nonf32)
{
    float f;
    bool exact;
    if (!v || cJSON_IsNull(v) || ob_json_get_f32(v, &f, &exact))
        return false;
    char hex[OB_F32_BUFSZ];
    cJSON_AddItemToObject(o, "logprob", ob_json_f32(f));
    cJSON_AddStringToObject(o, "bits", ob_f32_hex(f, hex));
    if (!exact) {
        (*nonf32)++;
        cJSON_AddItemToObject(o, "wire_logprob", ob_json_f64(v->valuedouble));
    }
    return true;
}

/* "token_id:123", vLLM's form of a token when it is asked to return ids */
static int32_t vllm_id(const char *s)
{
    if (strncmp(s, "token_id:", 9) != 0 || !s[9])
        return -1;
    long long v = 0;
    for (const char *p = s + 9; *p; p++) {
        if (*p < '0' || *p > '9' || v > 2147483647LL)
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v <= 2147483647LL ? (int32_t)v : -1;
}

/* one entry {id?, token, bytes?, logprob} -> {id?, text, [bytes,] logprob, bits} */
static cJSON *entry_json(const cJSON *e, bool with_bytes, int64_t *nonf32)
{
    cJSON *o = cJSON_CreateObject();
    const cJSON *id = field(e, "id"), *tok = field(e, "token"), *by = field(e, "bytes");
    if (!tok)
        tok = field(e, "text");
    const char *text = cJSON_IsString(tok) ? tok->valuestring : NULL;
    int32_t vid = text ? vllm_id(text) : -1;
    if (is_int_in(id, 0, 2147483647.0))
        ob_json_add_int(o, "id", (long long)id->valuedouble);
    else if (vid >= 0)
        ob_json_add_int(o, "id", vid);
    if (text && vid < 0)
        add_text(o, "text", text);
    if (with_bytes) {
        bool ok = cJSON_IsArray(by);
        const cJSON *it, *arr = ok ? by : NULL;
        cJSON_ArrayForEach(it, arr)
            ok &= is_int_in(it, 0, 255);
        if (ok)
            cJSON_AddItemToObject(o, "bytes", cJSON_Duplicate(by, true));
        else if (text && vid < 0)
            cJSON_AddItemToObject(o, "bytes", ob_json_bytes((const unsigned char *)text,
                                                         strlen(text)));
    }
    put_lp(o, field(e, "logprob"), nonf32);
    return o;
}

struct topent {
    const cJSON *item;
    double lp;
};

static int by_lp_desc(const void *a, const void *b)
{
    const struct topent *x = a, *y = b;
    if (x->lp != y->lp)
        return x->lp > y->lp ? -1 : 1;
    return x->item < y->item ? -1 : x->item > y->item;   /* keep the wire's order */
}

int ob_oai_cli_tokens(const cJSON *choice, int top_k, cJSON **tokens, int64_t *nonf32)
{
    *tokens = NULL;
    const cJSON *lp = field(choice, "logprobs");
    if (!cJSON_IsObject(lp))
        return ob_seterr(OB_ENOTFOUND, "no log-probabilities in the reply");
    const cJSON *content = field(lp, "content"), *toks = field(lp, "tokens");
    cJSON *out = cJSON_CreateArray();
    if (!out)
        return oom();
    if (cJSON_IsArray(content)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, content) {
            cJSON *t = entry_json(e, true, nonf32);
            cJSON *top = cJSON_CreateArray();
            const cJSON *tl = field(e, "top_logprobs"), *x;
            if (!cJSON_IsArray(tl))
                tl = NULL;
            int k = 0;
            cJSON_ArrayForEach(x, tl) {
                if (k++ >= top_k)
                    break;
                cJSON_AddItemToArray(top, entry_json(x, false, nonf32));
            }
            cJSON_AddItemToObject(t, "top", top);
            cJSON_AddItemToArray(out, t);
        }
    } else if (cJSON_IsArray(toks)) {
        /* the legacy completions form: parallel arrays, top lists as {text: logprob} */
        const cJSON *tlp = field(lp, "token_logprobs"), *tops = field(lp, "top_logprobs");
        int i = 0;
        const cJSON *tk;
        cJSON_ArrayForEach(tk, toks) {
            cJSON *t = cJSON_CreateObject();
            if (cJSON_IsString(tk)) {
                int32_t vid = vllm_id(tk->valuestring);
                if (vid >= 0) {
                    ob_json_add_int(t, "id", vid);
                } else {
                    add_text(t, "text", tk->valuestring);
                    cJSON_AddItemToObject(t, "bytes",
                                          ob_json_bytes((const unsigned char *)tk->valuestring,
                                                     strlen(tk->valuestring)));
                }
            }
            put_lp(t, cJSON_IsArray(tlp) ? cJSON_GetArrayItem(tlp, i) : NULL, nonf32);
            cJSON *top = cJSON_CreateArray();
            const cJSON *d = cJSON_IsArray(tops) ? cJSON_GetArrayItem(tops, i) : NULL;
            int n = cJSON_IsObject(d) ? cJSON_GetArraySize(d) : 0;
            struct topent *te = n ? calloc((size_t)n, sizeof *te) : NULL;
            int m = 0;
            const cJSON *x, *dd = te ? d : NULL;
            cJSON_ArrayForEach(x, dd)
                if (cJSON_IsNumber(x))
                    te[m++] = (struct topent){x, x->valuedouble};
            if (m)
                qsort(te, (size_t)m, sizeof *te, by_lp_desc);
            for (int k = 0; k < m && k < top_k; k++) {
                cJSON *o = cJSON_CreateObject();
                int32_t vid = vllm_id(te[k].item->string);
                if (vid >= 0)
                    ob_json_add_int(o, "id", vid);
                else
                    add_text(o, "text", te[k].item->string);
                put_lp(o, te[k].item, nonf32);
                cJSON_AddItemToArray(top, o);
            }
            free(te);
            cJSON_AddItemToObject(t, "top", top);
            cJSON_AddItemToArray(out, t);
            i++;
        }
    } else {
        cJSON_Delete(out);
        return ob_seterr(OB_ENOTFOUND, "no log-probabilities in the reply");
    }
    *tokens = out;
    return 0;
}

/* the request's fields, then ours (replacing any of the same name), id first */
cJSON *ob_oai_cli_result(const struct ob_oai_cli *cli, const cJSON *req,
                         const struct ob_oai_cli_req *q, int repeat,
                         const struct ob_http_result *res, int *err)
{
    *err = 0;
    struct ob_result r = {.id = q->id, .repeat = repeat, .route = cli->route, .prompt_tokens = -1,
                          .completion_tokens = -1, .cached_tokens = -1};
    char msg[400], t[256];
    if (res->err) {
        *err = ob_seterr(res->err, "%s", res->msg);
        r.error = res->msg;
        return ob_result_record(req, &r);
    }
    if (res->status != 200) {
        snprintf(msg, sizeof msg, "HTTP %ld: %s", res->status,
                 ob_oai_cli_error_text(res->body, res->len, t, sizeof t));
        *err = ob_seterr(res->status >= 500 ? OB_EIO : OB_EFORMAT, "%s", msg);
        r.error = msg;
        return ob_result_record(req, &r);
    }
    /* token text may be part of a UTF-8 character: kept as bytes, written out as U+FFFD */
    cJSON *j = NULL;
    bool json = ob_json_parse(res->body, res->len, OB_JSON_ANY_BYTES, &j) == 0;
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    const cJSON *c = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    if (!cJSON_IsObject(c)) {
        if (json || !res->len)
            ob_oai_cli_error_text(res->body, res->len, t, sizeof t);
        else
            snprintf(t, sizeof t, "%s", ob_errmsg());
        snprintf(msg, sizeof msg, "%s: %s", json || !res->len ? "the reply is not a completion"
                 : "the reply cannot be read", t);
        *err = ob_seterr(OB_EFORMAT, "%s", msg);
        r.error = msg;
        cJSON_Delete(j);
        return ob_result_record(req, &r);
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    r.model = cJSON_IsString(model) ? model->valuestring : "";
    if (cli->sha256 && strcmp(r.model, cli->model) == 0)
        r.sha256 = cli->sha256;                /* the file the server serves (1b-serve) */
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens");
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(usage, "completion_tokens");
    const cJSON *cached = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(usage, "prompt_tokens_details"), "cached_tokens");
    if (is_int_in(pt, 0, INT32_MAX))
        r.prompt_tokens = (int)pt->valuedouble;
    if (is_int_in(cached, 0, INT32_MAX))
        r.cached_tokens = (int)cached->valuedouble;
    /* the prompt's ids, when the server reports them (1b-serve, vLLM): in the choice, or
     * beside the choices */
    const cJSON *pids = cJSON_GetObjectItemCaseSensitive(c, "prompt_token_ids");
    if (!pids)
        pids = cJSON_GetObjectItemCaseSensitive(j, "prompt_token_ids");
    int32_t *ids = NULL;
    int n_ids = cJSON_IsArray(pids) ? cJSON_GetArraySize(pids) : 0;
    if (n_ids > 0 && (ids = malloc((size_t)n_ids * sizeof *ids))) {
        const cJSON *x;
        int k = 0;
        cJSON_ArrayForEach(x, pids) {
            if (!is_int_in(x, 0, INT32_MAX))
                break;
            ids[k++] = (int32_t)x->valuedouble;
        }
        if (k == n_ids) {
            r.prompt_ids = ids;
            r.n_prompt_ids = n_ids;
        }
    }
    int e = ob_oai_cli_tokens(c, q->top_logprobs, &r.tokens, &r.nonf32);
    if (e == OB_ENOMEM || (n_ids > 0 && !ids)) {
        cJSON_Delete(r.tokens);
        free(ids);
        cJSON_Delete(j);
        return NULL;
    }
    /* the text: chat's message content (with any reasoning beside it), completions' text */
    const cJSON *msgo = cJSON_GetObjectItemCaseSensitive(c, "message");
    const cJSON *text = q->chat ? cJSON_GetObjectItemCaseSensitive(msgo, "content")
                                : cJSON_GetObjectItemCaseSensitive(c, "text");
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(msgo, "reasoning_content");
    r.text = cJSON_IsString(text) ? text->valuestring : "";
    r.text_len = strlen(r.text);
    r.reasoning = cJSON_IsString(rc) ? rc->valuestring : NULL;
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(c, "finish_reason");
    r.finish_reason = cJSON_IsString(fr) ? fr->valuestring : "unknown";
    int n_tok = r.tokens ? cJSON_GetArraySize(r.tokens) : 0;
    r.completion_tokens = is_int_in(ct, 0, INT32_MAX) ? (int)ct->valuedouble : n_tok;
    r.timing = cJSON_CreateObject();
    cJSON_AddItemToObject(r.timing, "request_s", ob_json_f64(res->seconds));
    ob_json_add_int(r.timing, "attempts", res->attempts);
    /* asked for log-probabilities and got tokens without them: unusable for measuring */
    bool generated = n_tok > 0 || (is_int_in(ct, 0, 1e15) && ct->valuedouble > 0) ||
                     (cJSON_IsString(text) && *text->valuestring);
    if (q->logprobs && q->max_tokens > 0 && (e == OB_ENOTFOUND || !n_tok) && generated) {
        *err = ob_seterr(OB_EFORMAT, "the server returned no log-probabilities");
    } else if (q->logprobs && r.tokens) {
        int missing = 0;
        const cJSON *tk;
        cJSON_ArrayForEach(tk, r.tokens)
            missing += !cJSON_GetObjectItemCaseSensitive(tk, "logprob");
        if (missing)
            *err = ob_seterr(OB_EFORMAT, "the server returned %d token%s without a "
                             "log-probability", missing, missing == 1 ? "" : "s");
    }
    if (*err) {
        snprintf(msg, sizeof msg, "%s", ob_errmsg());
        r.error = msg;
    }
    if (!q->logprobs && r.tokens) {
        /* not asked for: leave them out, as the in-process routes do */
        cJSON *tk;
        cJSON_ArrayForEach(tk, r.tokens) {
            cJSON_DeleteItemFromObjectCaseSensitive(tk, "logprob");
            cJSON_DeleteItemFromObjectCaseSensitive(tk, "bits");
            cJSON_DeleteItemFromObjectCaseSensitive(tk, "wire_logprob");
            cJSON_DeleteItemFromObjectCaseSensitive(tk, "top");
        }
    }
    cJSON *o = ob_result_record(req, &r);
    free(ids);
    cJSON_Delete(j);
    return o;
}

/* ---- the client ------------------------------------------------------------------------------ */

void ob_oai_cli_close(struct ob_oai_cli *c)
{
    if (!c)
        return;
    ob_http_free(c->http);
    free(c->base);
    free(c->route);
    free(c->model);
    free(c->model_name);
    free(c->sha256);
    free(c);
}

int ob_oai_cli_open(const char *url, const struct ob_server_opts *o, struct ob_oai_cli **out)
{
    *out = NULL;
    struct ob_oai_cli *c = calloc(1, sizeof *c);
    if (!c)
        return oom();
    int e = ob_http_base(url, &c->base, &c->route);
    if (e) {
        ob_oai_cli_close(c);
        return ob_errprefix(e, "--url");
    }
    struct ob_http_opts ho = OB_HTTP_OPTS_DEFAULT;
    ho.timeout_s = o->timeout;
    ho.retries = o->retries;
    ho.api_key = getenv("OB_API_KEY");
    struct ob_oai_cli_ready ready;
    memset(&ready, 0, sizeof ready);
    /* the key is checked (ob_http_new) before anything is sent */
    if (!(e = ob_http_new(&ho, &c->http)))
        e = ob_oai_cli_wait_ready(c->base, o->wait, ho.api_key, &ready);
    if (e) {
        ob_oai_cli_ready_free(&ready);
        ob_oai_cli_close(c);
        return e;
    }
    c->model = ready.model;
    c->model_name = ready.name;
    c->sha256 = ready.sha256;
    snprintf(c->note, sizeof c->note, "%s", ready.note);
    *out = c;
    return 0;
}

char *ob_oai_cli_url(const struct ob_oai_cli *c, const char *path)
{
    return ob_http_join(c->base, path);
}

/* ---- teacher-forced scoring ------------------------------------------------------------------ */

char *ob_oai_cli_score_body(const struct ob_oai_cli_score *s)
{
    cJSON *b = cJSON_CreateObject();
    if (!b)
        return NULL;
    if (s->model)
        cJSON_AddStringToObject(b, "model", s->model);
    if (s->text) {
        cJSON_AddStringToObject(b, "prompt", s->text);
    } else if (s->echo) {
        /* the tokens after the context, in one prompt */
        int32_t *all = malloc((size_t)(s->n_prompt + s->n_forced + 1) * sizeof *all);
        if (!all) {
            cJSON_Delete(b);
            return NULL;
        }
        memcpy(all, s->prompt, (size_t)s->n_prompt * sizeof *all);
        memcpy(all + s->n_prompt, s->forced, (size_t)s->n_forced * sizeof *all);
        cJSON_AddItemToObject(b, "prompt", ob_json_ids(all, s->n_prompt + s->n_forced));
        free(all);
    } else {
        cJSON_AddItemToObject(b, "prompt", ob_json_ids(s->prompt, s->n_prompt));
        cJSON_AddItemToObject(b, "forced_tokens", ob_json_ids(s->forced, s->n_forced));
    }
    ob_json_add_int(b, "max_tokens", 0);
    /* echo: the prompt's own scores come back; the forced tokens come back without it */
    cJSON_AddBoolToObject(b, "echo", s->text || s->echo);
    ob_json_add_int(b, "logprobs", s->top > 0 ? s->top : 1);
    ob_json_add_int(b, "temperature", 0);
    cJSON_AddBoolToObject(b, "cache_prompt", false);
    cJSON_AddBoolToObject(b, "stream", false);
    char *body = ob_json_print(b);
    cJSON_Delete(b);
    return body;
}

/* a token's id as ob_oai_cli_tokens wrote it (raw digits), or dflt when it has none */
static long long token_id(const cJSON *t, long long dflt)
{
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(t, "id");
    return cJSON_IsRaw(id) ? strtoll(id->valuestring, NULL, 10)
           : cJSON_IsNumber(id) ? (long long)id->valuedouble : dflt;
}

int ob_oai_cli_score_reply(const struct ob_oai_cli_score *s, const struct ob_http_result *res,
                           cJSON **tokens, double *sum, char **model, int64_t *nonf32)
{
    *tokens = NULL;
    *sum = 0;
    if (model)
        *model = NULL;
    const char *wire = s->echo ? "echo" : "forced_tokens";
    char t[256];
    if (res->err)
        return ob_seterr(res->err, "%s", res->msg);
    if (res->status != 200)
        return ob_seterr(res->status >= 500 ? OB_EIO : OB_EFORMAT, "HTTP %ld: %s", res->status,
                         ob_oai_cli_error_text(res->body, res->len, t, sizeof t));
    cJSON *reply = NULL;
    if (ob_json_parse(res->body, res->len, OB_JSON_ANY_BYTES, &reply))
        return ob_errprefix(OB_EFORMAT, "the reply cannot be read");
    const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(reply, "choices"), 0);
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(reply, "model");
    if (model && cJSON_IsString(mn) && !(*model = strdup(mn->valuestring))) {
        cJSON_Delete(reply);
        return oom();
    }
    cJSON *toks = NULL;
    int e = ch ? ob_oai_cli_tokens(ch, s->top, &toks, nonf32)
               : ob_seterr(OB_EFORMAT, "the reply is not a completion");
    cJSON_Delete(reply);
    if (e == OB_ENOTFOUND)
        e = ob_seterr(OB_EFORMAT, "the server returned no log-probabilities");
    if (e)
        goto fail;
    /* the scored tokens are the last n_forced of what came back (an echo also returns the
     * prompt's); with the text to the server, every token that carries a log-probability */
    int n = cJSON_GetArraySize(toks), from = s->text ? 0 : n - s->n_forced;
    if (from < 0) {
        e = ob_seterr(OB_EFORMAT, "the reply scores %d tokens, not the %d forced ones (does the "
                      "server support %s?)", n, s->n_forced, wire);
        goto fail;
    }
    cJSON *out = cJSON_CreateArray();
    if (!out) {
        e = oom();
        goto fail;
    }
    for (int i = from; i < n; i++) {
        cJSON *x = cJSON_DetachItemFromArray(toks, from);
        if (s->text && !cJSON_GetObjectItemCaseSensitive(x, "logprob")) {
            cJSON_Delete(x);               /* the first token has nothing before it */
            continue;
        }
        cJSON_AddItemToArray(out, x);
        if (!s->text) {
            int32_t want = s->forced[i - from];
            long long got = token_id(x, want);
            if (got != want) {
                e = ob_seterr(OB_EFORMAT, "the reply's token %d is id %lld, not the forced %d "
                              "(does the server support %s?)", i - from, got, want, wire);
                cJSON_Delete(out);
                goto fail;
            }
            if (!cJSON_GetObjectItemCaseSensitive(x, "id")) {
                char d[16];
                snprintf(d, sizeof d, "%d", (int)want);
                ob_json_add_first(x, "id", cJSON_CreateRaw(d));
            }
        }
        const cJSON *lp = cJSON_GetObjectItemCaseSensitive(x, "logprob");
        if (!lp) {
            e = ob_seterr(OB_EFORMAT, "the reply's token %d has no log-probability", i - from);
            cJSON_Delete(out);
            goto fail;
        }
        /* the float32 itself (its bits), as the in-process sum adds it */
        const cJSON *bits = cJSON_GetObjectItemCaseSensitive(x, "bits");
        float f = 0;
        if (cJSON_IsString(bits) && ob_f32_from_hex(bits->valuestring, &f) == 0)
            *sum += (double)f;
        else
            *sum += cJSON_IsRaw(lp) ? strtod(lp->valuestring, NULL) : lp->valuedouble;
    }
    cJSON_Delete(toks);
    *tokens = out;
    return 0;
fail:
    cJSON_Delete(toks);
    return e;
}
