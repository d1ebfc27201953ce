/*
 * oai-server.c — request bodies to requests, results to response bodies, for 1b-serve (see
 * oai-server.h for the contract and man/1b-serve.1 for the shapes on the wire).
 *
 * The request side reads every field a record has with record.h's table (types, ranges,
 * neutral values of unimplemented fields, stop, messages, chat_template_kwargs), so that a
 * body is taken or refused as the same record would be in 1b-gen. What is its own is OpenAI's:
 * logprobs is a bool for chat and a count for legacy completions, echo, stream, a batch of
 * prompts (one choice each), OpenAI's defaults, the --max-tokens-cap, and errors that name
 * their field for the client. The prompt ids are made with the same calls as record.c, so that a request gives the
 * same tokens here and in 1b-gen.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "chat.h"
#include "net/oai-server.h"
#include "record.h"
#include "sb.h"
#include "tok.h"

/* ---- errors ------------------------------------------------------------------------------------ */

/* the name in parentheses: the function itself, not the analyzer's macro (oai-server.h) */
int (ob_oai_srv_fail)(struct ob_oai_srv_err *e, int err, int status, const char *type,
                      const char *code, const char *param, const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return ob_seterr(err, "%s", e->message);
}

void ob_oai_srv_error_body(struct ob_sb *b, const struct ob_oai_srv_err *e)
{
    ob_sb_str(b, "{\"error\":{\"message\":");
    ob_sb_json(b, e->message, strlen(e->message));
    ob_sb_str(b, ",\"type\":");
    ob_sb_json(b, e->type ? e->type : "invalid_request_error",
                strlen(e->type ? e->type : "invalid_request_error"));
    ob_sb_str(b, ",\"param\":");
    if (e->param[0])
        ob_sb_json(b, e->param, strlen(e->param));
    else
        ob_sb_str(b, "null");
    ob_sb_str(b, ",\"code\":");
    if (e->code)
        ob_sb_json(b, e->code, strlen(e->code));
    else
        ob_sb_str(b, "null");
    ob_sb_str(b, "}}");
}

/* a 400 naming the field */
#define BAD(e, param, code, ...) \
    ob_oai_srv_fail(e, OB_EFORMAT, 400, "invalid_request_error", code, param, __VA_ARGS__)

/* ---- request fields ---------------------------------------------------------------------------- */

static const cJSON *field(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && !cJSON_IsNull(v) ? v : NULL;       /* null means absent, as OpenAI reads it */
}

static const char *type_name(const cJSON *v)
{
    return cJSON_IsString(v) ? "a string" : cJSON_IsNumber(v) ? "a number"
           : cJSON_IsBool(v) ? "a boolean" : cJSON_IsArray(v) ? "an array"
           : cJSON_IsObject(v) ? "an object" : "null";
}

/* 1: absent; 0: *out set; <0: error (e filled) */
static int get_int(const cJSON *o, const char *k, int64_t lo, int64_t hi, int64_t *out,
                   struct ob_oai_srv_err *e)
{
    const cJSON *v = field(o, k);
    if (!v)
        return 1;
    if (!cJSON_IsNumber(v))
        return BAD(e, k, "invalid_type", "'%s' must be an integer, not %s", k, type_name(v));
    double d = v->valuedouble;
    if (d != floor(d) || !(d >= (double)lo && d <= (double)hi))
        return BAD(e, k, "invalid_value", "'%s' must be an integer in [%lld, %lld]", k,
                   (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return 0;
}

static int get_bool(const cJSON *o, const char *k, bool *out, struct ob_oai_srv_err *e)
{
    const cJSON *v = field(o, k);
    if (!v)
        return 1;
    if (!cJSON_IsBool(v))
        return BAD(e, k, "invalid_type", "'%s' must be a boolean, not %s", k, type_name(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

#define TRY(call) do { int r_ = (call); if (r_ < 0) return r_; } while (0)

/* an array of token ids (integers in [0, 2^31)); the vocabulary is checked later */
static int get_ids(const cJSON *arr, const char *param, int32_t **out, int *n,
                   struct ob_oai_srv_err *e)
{
    int cnt = cJSON_GetArraySize(arr), i = 0;
    int32_t *ids = malloc((size_t)(cnt ? cnt : 1) * sizeof *ids);
    if (!ids)
        return ob_oai_srv_fail(e, OB_ENOMEM, 500, "server_error", NULL, NULL, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
            !(it->valuedouble >= 0 && it->valuedouble < 2147483648.0)) {
            free(ids);
            return BAD(e, param, "invalid_value", "'%s[%d]' is not a token id", param, i);
        }
        ids[i++] = (int32_t)it->valuedouble;
    }
    *out = ids;
    *n = i;                            /* cnt: every element was read */
    return 0;
}

/* fields that would change the answer and that 1b does not implement (record.h): refused
 * unless they hold their neutral value */
static int refuse_unimplemented(const cJSON *o, struct ob_oai_srv_err *e)
{
    bool wrong;
    const char *why, *k = ob_req_unsupported(o, &wrong, &why);
    if (k && wrong)
        return BAD(e, k, "invalid_type", "'%s' must be a number, not %s", k,
                   type_name(field(o, k)));
    if (k)
        return BAD(e, k, "unsupported_value", "'%s' is not supported by 1b-serve%s", k, why);
    return 0;
}

/* one field of the table (record.h) in the server's wording; max_tokens fields with the
 * server's cap as their range */
static int get_field(const cJSON *o, const struct ob_req_field *f, struct ob_req_params *p,
                     int cap, struct ob_oai_srv_err *e)
{
    int err = ob_req_field_read(o, f, p);
    if (err >= 0)
        return err;
    const cJSON *v = field(o, f->name);
    if (err == OB_EFORMAT)
        return BAD(e, f->name, "invalid_type", "'%s' must be %s, not %s", f->name,
                   f->type == OB_REQ_BOOL ? "a boolean" : f->type == OB_REQ_INT ? "an integer"
                                                                        : "a number",
                   type_name(v));
    char want[64];
    if (f->off == offsetof(struct ob_req_params, max_tokens))
        snprintf(want, sizeof want, "an integer in [0, %d]", cap);
    else
        ob_req_field_want(f, want, sizeof want);
    return BAD(e, f->name, "invalid_value", "'%s' must be %s", f->name, want);
}

/* messages, read as every route reads them (record.h); *m is the caller's to free, whatever
 * the outcome */
static int read_messages(const cJSON *arr, struct ob_req_msgs *m, struct ob_oai_srv_err *e)
{
    memset(m, 0, sizeof *m);
    if (!arr)
        return BAD(e, "messages", "missing_required_parameter", "'messages' is required");
    char param[64];
    bool wrong;
    int err = ob_req_messages(arr, m, param, sizeof param, &wrong);
    if (err)
        m->n = 0;
    if (err == OB_ENOMEM)
        return ob_oai_srv_fail(e, OB_ENOMEM, 500, "server_error", NULL, NULL, "out of memory");
    if (err)
        return BAD(e, param, wrong ? "invalid_type" : strstr(param, "tool_calls")
                                                      ? "unsupported_value" : "invalid_value",
                   "%s", ob_errmsg());
    return 0;
}

static int parse_messages(const cJSON *arr, struct ob_oai_srv_req *r, struct ob_oai_srv_err *e)
{
    struct ob_req_msgs m;
    int err = read_messages(arr, &m, e);
    r->msgs = m.v;
    r->n_msgs = m.n;
    r->owned = m.owned;
    r->n_owned = m.n_owned;
    return err;
}

/* A body as JSON (ob_json_parse_max): text that cJSON would cut short (\u0000, a bad escape),
 * raw control bytes in strings and ill-formed UTF-8 are refused with a 400, never truncated;
 * more than max_values values with a 413, before cJSON allocates anything. */
static int parse_body(const char *body, size_t len, size_t max_values, cJSON **root,
                      struct ob_oai_srv_err *e)
{
    if (!ob_utf8_valid(body, len))
        return BAD(e, NULL, "invalid_utf8", "the request body is not valid UTF-8");
    int err = ob_json_parse_max(body, len, 0, max_values, root);
    if (err == OB_ERANGE)
        return ob_oai_srv_fail(e, OB_ERANGE, 413, "invalid_request_error", "request_too_large",
                               NULL, "the request body holds more JSON values than this server "
                               "takes (%zu)", max_values);
    if (err)
        return BAD(e, NULL, "invalid_json", "the request body: %s", ob_errmsg());
    return 0;
}

/* what a "prompt" element is: a string, a number, an array, or another thing */
static const char *prompt_kind(const cJSON *v)
{
    return cJSON_IsString(v) ? "strings" : cJSON_IsNumber(v) ? "token ids"
           : cJSON_IsArray(v) ? "arrays" : NULL;
}

/* "prompt": a string, an array of token ids (one prompt), an array of strings or an array of
 * arrays of token ids (one prompt each, at most max_prompts); empty arrays and arrays that mix
 * kinds are refused */
static int parse_prompt(const cJSON *p, int max_prompts, struct ob_oai_srv_req *r,
                        struct ob_oai_srv_err *e)
{
    if (!p)
        return BAD(e, "prompt", "missing_required_parameter", "'prompt' is required");
    if (!cJSON_IsString(p) && !cJSON_IsArray(p))
        return BAD(e, "prompt", "invalid_type", "'prompt' must be a string, an array of strings, "
                   "an array of token ids or an array of arrays of token ids, not %s",
                   type_name(p));
    if (cJSON_IsArray(p) && !p->child)
        return BAD(e, "prompt", "invalid_value", "'prompt' is an empty array");
    const cJSON *it;
    int i = 0;
    if (cJSON_IsArray(p)) {
        /* every element of the same kind as the first */
        const char *k0 = prompt_kind(p->child);
        cJSON_ArrayForEach(it, p) {
            const char *k = prompt_kind(it);
            if (!k)
                return BAD(e, "prompt", "invalid_type", "'prompt[%d]' must be a string, a token "
                           "id or an array of token ids, not %s", i, type_name(it));
            if (k != k0)
                return BAD(e, "prompt", "invalid_value", "'prompt' mixes %s and %s ('prompt[%d]' "
                           "is %s): send all strings, all token ids, or all arrays of token ids",
                           k0, k, i, type_name(it));
            i++;
        }
    }
    bool batch = cJSON_IsArray(p) && !cJSON_IsNumber(p->child);
    int n = batch ? cJSON_GetArraySize(p) : 1;
    if (max_prompts > 0 && n > max_prompts)
        return BAD(e, "prompt", "too_many_prompts", "'prompt' holds %d prompts; this server "
                   "takes at most %d in one request (--max-prompts)", n, max_prompts);
    r->prompts = calloc((size_t)n, sizeof *r->prompts);
    if (!r->prompts)
        return ob_oai_srv_fail(e, OB_ENOMEM, 500, "server_error", NULL, NULL, "out of memory");
    r->n_prompts = n;
    r->prompt_batch = batch;
    if (cJSON_IsString(p)) {
        r->prompts[0].text = p->valuestring;
        return 0;
    }
    if (!batch)
        return get_ids(p, "prompt", &r->prompts[0].ids, &r->prompts[0].n_ids, e);
    i = 0;
    cJSON_ArrayForEach(it, p) {
        struct ob_oai_srv_prompt *q = &r->prompts[i];
        char param[32];
        snprintf(param, sizeof param, "prompt[%d]", i++);
        if (cJSON_IsString(it)) {
            q->text = it->valuestring;
            continue;
        }
        if (!it->child)
            return BAD(e, param, "invalid_value", "'%s' is an empty array of token ids", param);
        TRY(get_ids(it, param, &q->ids, &q->n_ids, e));
    }
    return 0;
}

int ob_oai_srv_parse(const char *body, size_t len, int kind, const struct ob_oai_srv_defaults *d,
                     struct ob_oai_srv_req *r, struct ob_oai_srv_err *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->prompt_logprobs = -1;
    int err = 0;
    if ((err = parse_body(body, len, d->max_values, &r->root, e)))
        return err;
    const cJSON *o = r->root;
    if (!cJSON_IsObject(o)) {
        err = BAD(e, NULL, "invalid_json", "the request body must be a JSON object");
        goto fail;
    }
#define CHECK(call) do { if ((err = (call)) < 0) goto fail; } while (0)
    CHECK(refuse_unimplemented(o, e));

    const cJSON *model = field(o, "model");
    if (model && !cJSON_IsString(model)) {
        err = BAD(e, "model", "invalid_type", "'model' must be a string");
        goto fail;
    }
    r->model = model ? model->valuestring : NULL;

    /* sampling and limits: the fields of the table (record.h), over the server's defaults */
    struct ob_req_params p;
    ob_req_params_default(&p);
    p.s.temperature = d->temperature;
    p.s.seed = d->seed;
    p.max_tokens = kind == OB_OAI_SRV_CHAT ? d->max_tokens_chat : d->max_tokens_completion;
    if (p.max_tokens > d->max_tokens_cap)
        p.max_tokens = d->max_tokens_cap;
    p.logprobs = false;            /* OpenAI's default: none */
    int64_t iv = 0;
    static const char *const mt[] = {"max_tokens", "max_completion_tokens"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = field(o, mt[i]);
        if (v && cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
            v->valuedouble > d->max_tokens_cap) {
            err = BAD(e, mt[i], "invalid_value", "'%s' is %.0f; this server allows at most %d",
                      mt[i], v->valuedouble, d->max_tokens_cap);
            goto fail;
        }
    }
    /* logprobs: a boolean for chat; for legacy completions the number of alternatives (a
     * boolean is taken too) */
    const cJSON *lp = field(o, "logprobs");
    if (lp && cJSON_IsBool(lp)) {
        p.logprobs = cJSON_IsTrue(lp);
    } else if (lp && kind == OB_OAI_SRV_COMPLETION) {
        CHECK(get_int(o, "logprobs", 0, OB_MAX_TOP, &iv, e));
        p.logprobs = true;
        p.top_logprobs = (int)iv;
    } else if (lp) {
        err = BAD(e, "logprobs", "invalid_type", "'logprobs' must be a boolean, not %s",
                  type_name(lp));
        goto fail;
    }
    for (int i = 0; i < ob_req_n_fields; i++)
        if (strcmp(ob_req_fields[i].name, "logprobs"))
            CHECK(get_field(o, &ob_req_fields[i], &p, d->max_tokens_cap, e));
    if (field(o, "top_logprobs")) {
        if (kind == OB_OAI_SRV_CHAT && !p.logprobs && p.top_logprobs > 0) {
            err = BAD(e, "top_logprobs", "invalid_value",
                      "'top_logprobs' needs 'logprobs' set to true");
            goto fail;
        }
        if (kind == OB_OAI_SRV_COMPLETION && !lp)
            p.logprobs = true;
    }
    r->max_tokens = p.max_tokens;
    r->s = p.s;
    r->logprobs = p.logprobs;
    r->top_logprobs = p.top_logprobs;
    r->cache_prompt = p.cache_prompt;
    r->thinking = p.thinking;
    CHECK(get_bool(o, "stream", &r->stream, e));
    const cJSON *so = field(o, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so)) {
            err = BAD(e, "stream_options", "invalid_type", "'stream_options' must be an object");
            goto fail;
        }
        const cJSON *iu = field(so, "include_usage");
        if (iu && !cJSON_IsBool(iu)) {
            err = BAD(e, "stream_options.include_usage", "invalid_type",
                      "'stream_options.include_usage' must be a boolean");
            goto fail;
        }
        r->include_usage = cJSON_IsTrue(iu);
    }
    if (kind == OB_OAI_SRV_COMPLETION)
        CHECK(get_bool(o, "echo", &r->echo, e));
    /* 1b extension: speculative decoding for this request ("ngram", "draft", "off"); the
     * answer is the same, only its speed differs */
    bool sw;
    if (ob_req_spec(o, &r->spec, &sw) < 0) {
        err = BAD(e, "spec", sw ? "invalid_type" : "invalid_value",
                  "'spec' must be \"ngram\", \"draft\" or \"off\"");
        goto fail;
    }
    /* vLLM's prompt_logprobs: each prompt token's logprob and rank, with alternatives; not
     * streamed (vLLM refuses it there too) */
    if (field(o, "prompt_logprobs")) {
        CHECK(get_int(o, "prompt_logprobs", 0, OB_MAX_TOP, &iv, e));
        r->prompt_logprobs = (int)iv;
        if (r->stream) {
            err = BAD(e, "prompt_logprobs", "invalid_value",
                      "'prompt_logprobs' is not available with \"stream\": true (ask without "
                      "streaming, or for echo with logprobs)");
            goto fail;
        }
    }

    /* stop strings */
    const char *stops[OB_REQ_MAX_STOP];
    bool wrong;
    int ns;
    if (ob_req_stop(o, stops, &ns, &wrong) < 0) {
        err = BAD(e, "stop", wrong ? "invalid_type" : "invalid_value", "'stop' %s",
                  strstr(ob_errmsg(), "must"));
        goto fail;
    }
    if (ns) {
        if (!(r->stop = calloc((size_t)ns, sizeof *r->stop))) {
            err = ob_oai_srv_fail(e, OB_ENOMEM, 500, "server_error", NULL, NULL, "out of memory");
            goto fail;
        }
        memcpy(r->stop, stops, (size_t)ns * sizeof *stops);
        r->n_stop = ns;
    }

    /* 1b extension: score these tokens after the prompt instead of generating */
    const cJSON *forced = field(o, "forced_tokens");
    if (forced) {
        if (!cJSON_IsArray(forced) || !forced->child) {
            err = BAD(e, "forced_tokens", "invalid_type",
                      "'forced_tokens' must be a non-empty array of token ids");
            goto fail;
        }
        CHECK(get_ids(forced, "forced_tokens", &r->forced, &r->n_forced, e));
    }

    /* thinking: chat_template_kwargs.enable_thinking (llama-server, vLLM), over "thinking" as
     * in 1b's request records (read with the table above) */
    const char *kwp;
    if (ob_req_kwargs(o, &p, &kwp) < 0) {
        err = BAD(e, kwp, "invalid_type", "%s", ob_errmsg());
        goto fail;
    }
    r->thinking = p.thinking;

    /* a record has one of them (record.c); a body with both is refused on either endpoint,
     * naming the one that endpoint does not read, rather than answered from the other */
    if (field(o, "prompt") && field(o, "messages")) {
        const char *other = kind == OB_OAI_SRV_CHAT ? "prompt" : "messages";
        err = BAD(e, other, "invalid_value", "a request needs exactly one of 'prompt' and "
                  "'messages', not both (%s takes '%s')",
                  kind == OB_OAI_SRV_CHAT ? "/v1/chat/completions" : "/v1/completions",
                  kind == OB_OAI_SRV_CHAT ? "messages" : "prompt");
        goto fail;
    }
    if (kind == OB_OAI_SRV_CHAT)
        CHECK(parse_messages(field(o, "messages"), r, e));
    else
        CHECK(parse_prompt(field(o, "prompt"), d->max_prompts, r, e));
#undef CHECK
    return 0;
fail:
    ob_oai_srv_free(r);
    r->kind = kind;
    return err ? err : OB_EFORMAT;
}

void ob_oai_srv_free(struct ob_oai_srv_req *r)
{
    if (!r)
        return;
    cJSON_Delete(r->root);
    for (int i = 0; i < r->n_prompts; i++)
        free(r->prompts[i].ids);
    free(r->prompts);
    free(r->msgs);
    for (size_t i = 0; i < r->n_owned; i++)
        free(r->owned[i]);
    free(r->owned);
    free(r->stop);
    free(r->forced);
    memset(r, 0, sizeof *r);
}

int ob_oai_srv_tokens_at(const struct ob_oai_srv_req *r, int which, const struct ob_tok *tok,
                         const char *tmpl, int32_t **ids_out, int *n_out,
                         int32_t stop_ids[OB_CHAT_MAX_STOPS], int *n_stop_ids,
                         struct ob_oai_srv_err *e)
{
    uint32_t V = ob_tok_n_vocab(tok);
    int32_t *ids = NULL;
    size_t n = 0;
    int err;
    for (int i = 0; i < r->n_forced; i++)
        if ((uint32_t)r->forced[i] >= V)
            return BAD(e, "forced_tokens", "invalid_value",
                       "'forced_tokens[%d]' = %d is not below the vocabulary size %u", i,
                       r->forced[i], V);
    /* the prompt's name in errors: prompt, or prompt[which] in a batch */
    char param[32] = "prompt";
    if (r->kind != OB_OAI_SRV_CHAT && r->prompt_batch)
        snprintf(param, sizeof param, "prompt[%d]", which);
    const struct ob_oai_srv_prompt *p =
        r->kind != OB_OAI_SRV_CHAT && which >= 0 && which < r->n_prompts ? &r->prompts[which]
                                                                          : NULL;
    if (r->kind == OB_OAI_SRV_CHAT) {
        struct ob_chat_opts o = OB_CHAT_OPTS_DEFAULT;
        o.enable_thinking = r->thinking;
        if ((err = ob_chat_tokenize(tok, tmpl, r->msgs, r->n_msgs, &o, &ids, &n)))
            return ob_oai_srv_fail(e, err, err == OB_ENOMEM ? 500 : 400,
                                   err == OB_ENOMEM ? "server_error" : "invalid_request_error",
                                   err == OB_EUNSUPP ? "unsupported_value" : "invalid_value",
                                   "messages", "%s", ob_errmsg());
    } else if (!p) {
        return ob_oai_srv_fail(e, OB_EINTERNAL, 500, "server_error", NULL, NULL,
                               "no prompt %d in the request", which);
    } else if (!p->text) {
        for (int i = 0; i < p->n_ids; i++)
            if ((uint32_t)p->ids[i] >= V)
                return BAD(e, param, "invalid_value",
                           "'%s[%d]' = %d is not below the vocabulary size %u", param, i,
                           p->ids[i], V);
        ids = malloc((size_t)(p->n_ids ? p->n_ids : 1) * sizeof *ids);
        if (!ids)
            return ob_oai_srv_fail(e, OB_ENOMEM, 500, "server_error", NULL, NULL, "out of memory");
        memcpy(ids, p->ids, (size_t)p->n_ids * sizeof *ids);
        n = (size_t)p->n_ids;
    } else {
        /* plain text after BOS, as record.c does for a "prompt" string */
        int32_t *t;
        size_t nt;
        if ((err = ob_tok_encode(tok, p->text, strlen(p->text), false, &t, &nt)))
            return ob_oai_srv_fail(e, err, 500, "server_error", NULL, param, "%s", ob_errmsg());
        bool bos = ob_tok_add_bos(tok) && ob_tok_bos(tok) >= 0;
        ids = malloc((nt + 1) * sizeof *ids);
        if (!ids) {
            free(t);
            return ob_oai_srv_fail(e, OB_ENOMEM, 500, "server_error", NULL, NULL, "out of memory");
        }
        if (bos)
            ids[0] = ob_tok_bos(tok);
        memcpy(ids + bos, t, nt * sizeof *t);
        free(t);
        n = nt + bos;
    }
    if (n == 0) {
        free(ids);
        if (r->kind != OB_OAI_SRV_CHAT && r->prompt_batch)
            return BAD(e, param, "invalid_value", "'%s' is empty", param);
        return BAD(e, r->kind == OB_OAI_SRV_CHAT ? "messages" : "prompt", "invalid_value",
                   "the prompt is empty");
    }
    if (n > INT32_MAX / 2) {
        free(ids);
        return BAD(e, param, "invalid_value", "the prompt is too long");
    }
    size_t ns = 0;
    if ((err = ob_chat_stops(tok, r->kind == OB_OAI_SRV_CHAT ? tmpl : NULL, stop_ids, &ns))) {
        free(ids);
        return ob_oai_srv_fail(e, err, 400, "invalid_request_error", NULL, NULL, "%s", ob_errmsg());
    }
    *ids_out = ids;
    *n_out = (int)n;
    *n_stop_ids = (int)ns;
    return 0;
}


/* ---- tokenize / detokenize ---------------------------------------------------------------------- */

static cJSON *parse_object(const char *body, size_t len, size_t max_values,
                           struct ob_oai_srv_err *e)
{
    cJSON *root;
    if (parse_body(body, len, max_values, &root, e))
        return NULL;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        BAD(e, NULL, "invalid_json", "the request body must be one JSON object");
        return NULL;
    }
    return root;
}

int ob_oai_srv_parse_tokenize(const char *body, size_t len, size_t max_values,
                              struct ob_oai_srv_tokenize *t, struct ob_oai_srv_err *e)
{
    memset(t, 0, sizeof *t);
    cJSON *o = t->root = parse_object(body, len, max_values, e);
    if (!o)
        return OB_EFORMAT;
    static const char *const inputs[] = {"content", "prompt", "messages"};
    const char *in = NULL;
    int err = 0;
    for (int i = 0; i < 3 && !err; i++)
        if (field(o, inputs[i])) {
            if (in)
                err = BAD(e, inputs[i], "invalid_value", "give one of 'content', 'prompt' and "
                          "'messages', not '%s' and '%s'", in, inputs[i]);
            in = inputs[i];
        }
    if (!err && !in)
        err = BAD(e, "content", "missing_required_parameter", "one of 'content' (llama-server), "
                  "'prompt' or 'messages' (vLLM) is required");
    if (err)
        goto fail;
    const cJSON *v = field(o, in);
    bool vllm = strcmp(in, "content") != 0, chat = strcmp(in, "messages") == 0;
    if (chat)
        err = read_messages(v, &t->msgs, e);
    else if (!cJSON_IsString(v)) {
        err = BAD(e, in, "invalid_type", "'%s' must be a string, not %s", in, type_name(v));
    } else {
        t->text = v->valuestring;
    }
    if (err)
        goto fail;
    /* the defaults of the dialect the input names */
    t->add_special = vllm && !chat;
    t->parse_special = vllm;
    t->add_generation_prompt = true;
    if (field(o, "add_special") && field(o, "add_special_tokens")) {
        err = BAD(e, "add_special", "invalid_value", "give one of 'add_special' (llama-server) "
                  "and 'add_special_tokens' (vLLM), not both");
        goto fail;
    }
    struct ob_req_params p;
    ob_req_params_default(&p);
    const char *kwp;
    if ((err = get_bool(o, "add_special", &t->add_special, e)) < 0 ||
        (err = get_bool(o, "add_special_tokens", &t->add_special, e)) < 0 ||
        (err = get_bool(o, "parse_special", &t->parse_special, e)) < 0 ||
        (err = get_bool(o, "with_pieces", &t->with_pieces, e)) < 0 ||
        (err = get_bool(o, "add_generation_prompt", &t->add_generation_prompt, e)) < 0)
        goto fail;
    if (ob_req_kwargs(o, &p, &kwp) < 0) {
        err = BAD(e, kwp, "invalid_type", "%s", ob_errmsg());
        goto fail;
    }
    t->thinking = p.thinking;
    return 0;
fail:
    ob_oai_srv_tokenize_free(t);
    return err < 0 ? err : OB_EFORMAT;
}

void ob_oai_srv_tokenize_free(struct ob_oai_srv_tokenize *t)
{
    ob_req_msgs_free(&t->msgs);
    cJSON_Delete(t->root);
    memset(t, 0, sizeof *t);
}

int ob_oai_srv_parse_detokenize(const char *body, size_t len, size_t max_values,
                                uint32_t n_vocab, int32_t **ids, int *n,
                                struct ob_oai_srv_err *e)
{
    cJSON *root = parse_object(body, len, max_values, e);
    if (!root)
        return OB_EFORMAT;
    const cJSON *t = field(root, "tokens");
    int err = 0;
    *ids = NULL;
    *n = 0;
    if (!t)
        err = BAD(e, "tokens", "missing_required_parameter", "'tokens' is required");
    else if (!cJSON_IsArray(t))
        err = BAD(e, "tokens", "invalid_type", "'tokens' must be an array of token ids");
    else
        err = get_ids(t, "tokens", ids, n, e);
    for (int i = 0; !err && i < *n; i++)
        if ((uint32_t)(*ids)[i] >= n_vocab)
            err = BAD(e, "tokens", "invalid_value",
                      "'tokens[%d]' = %d is not below the vocabulary size %u", i, (*ids)[i], n_vocab);
    cJSON_Delete(root);
    if (err) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return err;
}

/* ---- responses ---------------------------------------------------------------------------------- */

static void piece(const struct ob_tok *tok, int32_t id, const char **b, size_t *n)
{
    if (ob_tok_piece(tok, id, b, n)) {
        *b = "";
        *n = 0;
    }
}

static void bytes_arr(struct ob_sb *b, const char *s, size_t n)
{
    ob_sb_add(b, "[", 1);
    for (size_t i = 0; i < n; i++)
        ob_sb_fmt(b, i ? ",%u" : "%u", (unsigned char)s[i]);
    ob_sb_add(b, "]", 1);
}

/* {"id":ID,"token":TEXT,"logprob":LP,"bytes":[...]} without the closing brace */
static void entry_open(struct ob_sb *b, const struct ob_tok *tok, int32_t id, const float *lp)
{
    const char *s;
    size_t n;
    piece(tok, id, &s, &n);
    ob_sb_fmt(b, "{\"id\":%d,\"token\":", id);
    ob_sb_json(b, s, n);
    ob_sb_str(b, ",\"logprob\":");
    if (lp)
        ob_sb_lp(b, *lp);
    else
        ob_sb_str(b, "null");
    ob_sb_str(b, ",\"bytes\":");
    bytes_arr(b, s, n);
}

/* a content-style logprobs entry: the chat shape, plus the token id */
static void content_entry(struct ob_sb *b, const struct ob_tok *tok, int32_t id,
                          const struct ob_token_info *t, int top)
{
    entry_open(b, tok, id, t ? &t->logprob : NULL);
    ob_sb_str(b, ",\"top_logprobs\":[");
    for (int i = 0; t && i < t->n_top && i < top; i++) {
        if (i)
            ob_sb_add(b, ",", 1);
        entry_open(b, tok, t->top[i].id, &t->top[i].logprob);
        ob_sb_add(b, "}", 1);
    }
    ob_sb_str(b, "]}");
}

/* Legacy completions logprobs for a run of tokens: tokens, token_logprobs, top_logprobs,
 * text_offset (bytes into the choice's text, starting at *offset), and content (the chat-style
 * entries with ids, exact where the legacy maps of text to logprob cannot be: two tokens with
 * the same text). A map holds each text once, with the first (most likely) alternative's
 * logprob: a key twice would be ambiguous JSON, which 1b's own readers refuse (1b(7)). ts[i]
 * may be NULL: the first prompt token, which has no logprob. At most top alternatives are
 * written (a prompt scored for prompt_logprobs may carry more). */
static void legacy_logprobs(struct ob_sb *b, const struct ob_tok *tok, const int32_t *ids,
                            const struct ob_token_info *const *ts, int n, int top,
                            size_t *offset)
{
    const char *s;
    size_t len;
    ob_sb_str(b, "{\"tokens\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            ob_sb_add(b, ",", 1);
        piece(tok, ids[i], &s, &len);
        ob_sb_json(b, s, len);
    }
    ob_sb_str(b, "],\"token_logprobs\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            ob_sb_add(b, ",", 1);
        if (ts[i])
            ob_sb_lp(b, ts[i]->logprob);
        else
            ob_sb_str(b, "null");
    }
    ob_sb_str(b, "],\"top_logprobs\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            ob_sb_add(b, ",", 1);
        if (!ts[i]) {
            ob_sb_str(b, "null");
            continue;
        }
        ob_sb_add(b, "{", 1);
        size_t key[OB_MAX_TOP][2];    /* each key written: where it is in b */
        int keys = 0;
        for (int k = 0; k < ts[i]->n_top && k < top && k < OB_MAX_TOP; k++) {
            size_t mark = b->len;
            if (keys)
                ob_sb_add(b, ",", 1);
            size_t at = b->len;
            piece(tok, ts[i]->top[k].id, &s, &len);
            ob_sb_json(b, s, len);
            size_t kl = b->len - at;
            bool twice = false;
            for (int q = 0; q < keys && !twice && !b->oom; q++)
                twice = key[q][1] == kl && !memcmp(b->p + key[q][0], b->p + at, kl);
            if (twice) {                     /* the text as JSON writes it (U+FFFD included) */
                b->len = mark;
                if (b->p)
                    b->p[mark] = 0;
                continue;
            }
            key[keys][0] = at;
            key[keys++][1] = b->len - at;
            ob_sb_add(b, ":", 1);
            ob_sb_lp(b, ts[i]->top[k].logprob);
        }
        ob_sb_add(b, "}", 1);
    }
    ob_sb_str(b, "],\"text_offset\":[");
    for (int i = 0; i < n; i++) {
        ob_sb_fmt(b, i ? ",%zu" : "%zu", *offset);
        piece(tok, ids[i], &s, &len);
        *offset += len;
    }
    ob_sb_str(b, "],\"content\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            ob_sb_add(b, ",", 1);
        content_entry(b, tok, ids[i], ts[i], top);
    }
    ob_sb_str(b, "]}");
}

static void head(struct ob_sb *b, const struct ob_oai_srv_result *r, const char *object)
{
    ob_sb_str(b, "{\"id\":");
    ob_sb_json(b, r->id, strlen(r->id));
    ob_sb_fmt(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object, r->created);
    ob_sb_json(b, r->model, strlen(r->model));
    ob_sb_str(b, ",\"system_fingerprint\":");
    ob_sb_json(b, r->fingerprint, strlen(r->fingerprint));
}

/* the usage of n results, summed */
static void usage(struct ob_sb *b, const struct ob_oai_srv_result *r, int n)
{
    long long pt = 0, ct = 0, cached = 0;
    for (int i = 0; i < n; i++) {
        pt += r[i].prompt_tokens;
        ct += r[i].completion_tokens;
        cached += r[i].cached_tokens;
    }
    ob_sb_fmt(b, "\"usage\":{\"prompt_tokens\":%lld,\"completion_tokens\":%lld,"
                  "\"total_tokens\":%lld,\"prompt_tokens_details\":{\"cached_tokens\":%lld}}",
               pt, ct, pt + ct, cached);
}

/* the prompt's tokens and their scores for echo: arrays of n_prompt */
static void echo_arrays(const struct ob_oai_srv_result *r, const struct ob_token_info ***ts)
{
    *ts = calloc((size_t)(r->n_prompt ? r->n_prompt : 1), sizeof **ts);
    if (!*ts)
        return;
    for (int i = 1; i < r->n_prompt && i - 1 < r->n_ptoks; i++)
        (*ts)[i] = &r->ptoks[i - 1];
}

static void echo_text(struct ob_sb *b, const struct ob_oai_srv_result *r)
{
    for (int i = 0; i < r->n_prompt; i++) {
        const char *s;
        size_t n;
        piece(r->tok, r->prompt[i], &s, &n);
        ob_sb_add(b, s, n);
    }
}

/* one entry of vLLM's prompt_logprobs: "id":{"logprob":...,"rank":...,"decoded_token":...} */
static void prompt_lp_entry(struct ob_sb *b, const struct ob_tok *tok, int32_t id, float lp,
                            int32_t rank)
{
    const char *s;
    size_t n;
    piece(tok, id, &s, &n);
    ob_sb_fmt(b, "\"%d\":{\"logprob\":", id);
    ob_sb_lp(b, lp);
    ob_sb_fmt(b, ",\"rank\":%d,\"decoded_token\":", rank);
    ob_sb_json(b, s, n);
    ob_sb_add(b, "}", 1);
}

/* ,"prompt_logprobs":[null,{...},...]: for each prompt token after the first an object keyed
 * by token id (a string, as JSON keys are): the prompt's token first, with its rank in the
 * whole vocabulary, then the prompt_logprobs best tokens other than it (rank k + 1 for the
 * k-th of the top list, whose order ranks are counted in) */
static void prompt_logprobs(struct ob_sb *b, const struct ob_oai_srv_result *r)
{
    ob_sb_str(b, ",\"prompt_logprobs\":[");
    for (int i = 0; i < r->n_prompt; i++) {
        if (i)
            ob_sb_add(b, ",", 1);
        const struct ob_token_info *t = i >= 1 && i - 1 < r->n_ptoks ? &r->ptoks[i - 1] : NULL;
        if (!t) {
            ob_sb_str(b, "null");
            continue;
        }
        ob_sb_add(b, "{", 1);
        prompt_lp_entry(b, r->tok, t->id, t->logprob, t->rank);
        for (int k = 0; k < t->n_top && k < r->prompt_logprobs; k++) {
            if (t->top[k].id == t->id)
                continue;
            ob_sb_add(b, ",", 1);
            prompt_lp_entry(b, r->tok, t->top[k].id, t->top[k].logprob, k + 1);
        }
        ob_sb_add(b, "}", 1);
    }
    ob_sb_add(b, "]", 1);
}

/* one choice of a body: {"index":...,...} */
static void choice(struct ob_sb *b, const struct ob_oai_srv_result *r)
{
    bool chat = r->kind == OB_OAI_SRV_CHAT;
    ob_sb_fmt(b, "{\"index\":%d,", r->index);
    if (chat) {
        ob_sb_str(b, "\"message\":{\"role\":\"assistant\",\"content\":");
        ob_sb_json(b, r->text, r->text_len);
        ob_sb_str(b, "},\"logprobs\":");
        if (r->logprobs) {
            ob_sb_str(b, "{\"content\":[");
            for (int i = 0; i < r->n_toks; i++) {
                if (i)
                    ob_sb_add(b, ",", 1);
                content_entry(b, r->tok, r->toks[i].id, &r->toks[i], r->top_logprobs);
            }
            ob_sb_str(b, "]}");
        } else {
            ob_sb_str(b, "null");
        }
    } else {
        struct ob_sb t = {0};
        if (r->echo)
            echo_text(&t, r);
        ob_sb_add(&t, r->text, r->text_len);
        ob_sb_str(b, "\"text\":");
        ob_sb_json(b, t.p ? t.p : "", t.len);
        ob_sb_free(&t);
        ob_sb_str(b, ",\"logprobs\":");
        if (r->logprobs) {
            int np = r->echo ? r->n_prompt : 0, n = np + r->n_toks;
            int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
            const struct ob_token_info **ts = calloc((size_t)(n ? n : 1), sizeof *ts);
            const struct ob_token_info **pt = NULL;
            if (np)
                echo_arrays(r, &pt);
            if (!ids || !ts || (np && !pt)) {
                b->oom = true;
            } else {
                for (int i = 0; i < np; i++) {
                    ids[i] = r->prompt[i];
                    ts[i] = pt[i];
                }
                for (int i = 0; i < r->n_toks; i++) {
                    ids[np + i] = r->toks[i].id;
                    ts[np + i] = &r->toks[i];
                }
                size_t off = 0;
                legacy_logprobs(b, r->tok, ids, ts, n, r->top_logprobs, &off);
            }
            free(ids);
            free(ts);
            free(pt);
        } else {
            ob_sb_str(b, "null");
        }
    }
    if (!chat && r->prompt_logprobs >= 0)
        prompt_logprobs(b, r);
    /* the prompt as the model read it (vLLM's name): a client's records carry it as the
     * in-process routes' do */
    ob_sb_str(b, ",\"prompt_token_ids\":[");
    for (int i = 0; i < r->n_prompt; i++)
        ob_sb_fmt(b, i ? ",%d" : "%d", (int)r->prompt[i]);
    ob_sb_str(b, "]");
    ob_sb_str(b, ",\"finish_reason\":");
    ob_sb_json(b, r->finish_reason, strlen(r->finish_reason));
    if (r->timed_out)
        ob_sb_str(b, ",\"timed_out\":true");
    ob_sb_str(b, "}");
}

void ob_oai_srv_body_n(struct ob_sb *b, const struct ob_oai_srv_result *r, int n)
{
    head(b, r, r->kind == OB_OAI_SRV_CHAT ? "chat.completion" : "text_completion");
    ob_sb_str(b, ",\"choices\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            ob_sb_add(b, ",", 1);
        choice(b, &r[i]);
    }
    ob_sb_str(b, "]");
    /* chat: the one prompt's, beside the choices (where vLLM puts it) */
    if (n && r->kind == OB_OAI_SRV_CHAT && r->prompt_logprobs >= 0)
        prompt_logprobs(b, r);
    ob_sb_str(b, ",");
    usage(b, r, n);
    ob_sb_str(b, "}");
}

void ob_oai_srv_body(struct ob_sb *b, const struct ob_oai_srv_result *r)
{
    ob_oai_srv_body_n(b, r, 1);
}


/* ---- streaming ---------------------------------------------------------------------------------- */

static void sse_begin(struct ob_sb *b)
{
    ob_sb_str(b, "data: ");
}

static void sse_end(struct ob_sb *b)
{
    ob_sb_str(b, "\n\n");
}

void ob_oai_srv_chunk_start(struct ob_sb *b, const struct ob_oai_srv_result *r)
{
    if (r->kind == OB_OAI_SRV_CHAT) {
        sse_begin(b);
        head(b, r, "chat.completion.chunk");
        ob_sb_fmt(b, ",\"choices\":[{\"index\":%d,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                     "\"logprobs\":null,\"finish_reason\":null}]}", r->index);
        sse_end(b);
        return;
    }
    if (!r->echo)
        return;
    /* completions with echo: the prompt text (and its scores) comes first */
    sse_begin(b);
    head(b, r, "text_completion");
    ob_sb_fmt(b, ",\"choices\":[{\"index\":%d,\"text\":", r->index);
    struct ob_sb t = {0};
    echo_text(&t, r);
    ob_sb_json(b, t.p ? t.p : "", t.len);
    ob_sb_free(&t);
    ob_sb_str(b, ",\"logprobs\":");
    const struct ob_token_info **pt = NULL;
    if (r->logprobs)
        echo_arrays(r, &pt);
    if (r->logprobs && pt) {
        size_t off = 0;
        legacy_logprobs(b, r->tok, r->prompt, pt, r->n_prompt, r->top_logprobs, &off);
    } else {
        ob_sb_str(b, "null");
    }
    free(pt);
    ob_sb_str(b, ",\"finish_reason\":null}]}");
    sse_end(b);
}

void ob_oai_srv_chunk_token(struct ob_sb *b, const struct ob_oai_srv_result *r,
                            const struct ob_token_info *t, const char *text, size_t n,
                            size_t offset)
{
    sse_begin(b);
    if (r->kind == OB_OAI_SRV_CHAT) {
        head(b, r, "chat.completion.chunk");
        ob_sb_fmt(b, ",\"choices\":[{\"index\":%d,\"delta\":{\"content\":", r->index);
        ob_sb_json(b, text, n);
        ob_sb_str(b, "},\"logprobs\":");
        if (r->logprobs) {
            ob_sb_str(b, "{\"content\":[");
            content_entry(b, r->tok, t->id, t, r->top_logprobs);
            ob_sb_str(b, "]}");
        } else {
            ob_sb_str(b, "null");
        }
    } else {
        head(b, r, "text_completion");
        ob_sb_fmt(b, ",\"choices\":[{\"index\":%d,\"text\":", r->index);
        ob_sb_json(b, text, n);
        ob_sb_str(b, ",\"logprobs\":");
        if (r->logprobs) {
            /* text_offset continues after the bytes of the tokens before */
            size_t off = offset;
            legacy_logprobs(b, r->tok, &t->id, &t, 1, r->top_logprobs, &off);
        } else {
            ob_sb_str(b, "null");
        }
    }
    ob_sb_str(b, ",\"finish_reason\":null}]}");
    sse_end(b);
}

void ob_oai_srv_chunk_finish(struct ob_sb *b, const struct ob_oai_srv_result *r, const char *text,
                             size_t n)
{
    bool chat = r->kind == OB_OAI_SRV_CHAT;
    sse_begin(b);
    head(b, r, chat ? "chat.completion.chunk" : "text_completion");
    if (chat) {
        ob_sb_fmt(b, ",\"choices\":[{\"index\":%d,\"delta\":", r->index);
        if (n) {
            ob_sb_str(b, "{\"content\":");
            ob_sb_json(b, text, n);
            ob_sb_str(b, "}");
        } else {
            ob_sb_str(b, "{}");
        }
    } else {
        ob_sb_fmt(b, ",\"choices\":[{\"index\":%d,\"text\":", r->index);
        ob_sb_json(b, text, n);
    }
    ob_sb_str(b, ",\"logprobs\":null,\"finish_reason\":");
    ob_sb_json(b, r->finish_reason, strlen(r->finish_reason));
    if (r->timed_out)
        ob_sb_str(b, ",\"timed_out\":true");
    ob_sb_str(b, "}]}");
    sse_end(b);
}

void ob_oai_srv_chunk_done(struct ob_sb *b, const struct ob_oai_srv_result *r, int n,
                           bool include_usage)
{
    if (include_usage) {
        sse_begin(b);
        head(b, r, r->kind == OB_OAI_SRV_CHAT ? "chat.completion.chunk" : "text_completion");
        ob_sb_str(b, ",\"choices\":[],");
        usage(b, r, n);
        ob_sb_str(b, "}");
        sse_end(b);
    }
    ob_sb_str(b, "data: [DONE]\n\n");
}

void ob_oai_srv_chunk_end(struct ob_sb *b, const struct ob_oai_srv_result *r, const char *text,
                          size_t n, bool include_usage)
{
    ob_oai_srv_chunk_finish(b, r, text, n);
    ob_oai_srv_chunk_done(b, r, 1, include_usage);
}

void ob_oai_srv_chunk_error(struct ob_sb *b, const struct ob_oai_srv_err *e)
{
    sse_begin(b);
    ob_oai_srv_error_body(b, e);
    sse_end(b);
    ob_sb_str(b, "data: [DONE]\n\n");
}

size_t ob_oai_srv_stream_safe(const char *text, size_t from, size_t len, const char *const *stop,
                              int n_stop)
{
    const unsigned char *t = (const unsigned char *)text;
    /* walk the decoder from `from`: stop before a sequence that could still complete */
    size_t safe = from;
    while (safe < len) {
        unsigned c = t[safe];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n > 1 && safe + n > len) {
            /* incomplete only if what is there are continuation bytes so far */
            bool cont = true;
            for (size_t k = safe + 1; k < len; k++)
                cont &= (t[k] & 0xc0) == 0x80;
            if (cont)
                break;
        }
        int k = ob_utf8_len(text + safe, text + len);
        safe += k ? (size_t)k : 1;
    }
    /* hold back from the first place where a stop string matches or may match */
    for (size_t p = from; p < safe; p++)
        for (int i = 0; i < n_stop; i++) {
            size_t sl = strlen(stop[i]), m = len - p < sl ? len - p : sl;
            if (m && memcmp(text + p, stop[i], m) == 0)
                return p;
        }
    return safe;
}
