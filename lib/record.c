/*
 * record.c — the request and result records every tool shares (schemas in 1b(7)).
 *
 * A request record is parsed into token ids and sampling parameters for one model: "prompt"
 * (text, tokenized as plain text with the model's BOS; or an array of token ids) or
 * "messages" (rendered with the model's chat template, "thinking" switching Qwen3's think
 * block), plus max_tokens, temperature, top_k, top_p, min_p, seed, stop, logprobs,
 * top_logprobs, cache_prompt. Fields whose meaning 1b does not implement but which would
 * change the answer (n > 1, penalties, logit_bias, tools, ...) are refused by name rather
 * than ignored; any other unknown field is passed through to the result. The fields, their
 * ranges and the refusals are one table that 1b-serve and the URL route read too (record.h).
 *
 * A result record, from any route (ob_result_record: the one writer of them), carries the
 * request's fields, then: repeat, route, model {name, sha256}, prompt_tokens, prompt_ids,
 * tokens [{id, text, bytes, logprob, bits, top}], text, finish_reason, completion_tokens,
 * cached_tokens, timing (and what only a server route has, record.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "agree.h"
#include "chat.h"
#include "local.h"
#include "record.h"
#include "sb.h"
#include "tok.h"

void ob_req_free(struct ob_req *r)
{
    if (!r)
        return;
    free(r->id);
    free(r->ids);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->stop);
    memset(r, 0, sizeof *r);
}

static int bad(const char *field, const char *why)
{
    return ob_seterr(OB_EFORMAT, "field '%s' %s", field, why);
}

/* ---- the field table ------------------------------------------------------------------------- */

enum { C_INT, C_U32, C_U64, C_FLOAT, C_BOOL };

#define ROW(name, type, lo, hi, def, member, ctype) \
    {name, type, lo, hi, def, offsetof(struct ob_req_params, member), ctype}

/* In the order they are checked. The ranges are the sampler's and the engine's (sample.h,
 * engine.h): max_tokens at most 2^24, top_logprobs at most OB_MAX_TOP, seeds as far as a double
 * holds every integer. */
const struct ob_req_field ob_req_fields[] = {
    ROW("max_tokens", OB_REQ_INT, 0, 1 << 24, 128, max_tokens, C_INT),
    ROW("max_completion_tokens", OB_REQ_INT, 0, 1 << 24, 128, max_tokens, C_INT),
    ROW("temperature", OB_REQ_NUM, 0, 100, 0, s.temperature, C_FLOAT),
    ROW("top_k", OB_REQ_INT, 0, INT32_MAX, 0, s.top_k, C_U32),
    ROW("top_p", OB_REQ_NUM, 0, 1, 1, s.top_p, C_FLOAT),
    ROW("min_p", OB_REQ_NUM, 0, 1, 0, s.min_p, C_FLOAT),
    ROW("seed", OB_REQ_INT, 0, OB_SEED_MAX, 0, s.seed, C_U64),
    ROW("logprobs", OB_REQ_BOOL, 0, 1, 1, logprobs, C_BOOL),
    ROW("top_logprobs", OB_REQ_INT, 0, OB_MAX_TOP, 0, top_logprobs, C_INT),
    ROW("cache_prompt", OB_REQ_BOOL, 0, 1, 1, cache_prompt, C_BOOL),
    ROW("thinking", OB_REQ_BOOL, 0, 1, 1, thinking, C_BOOL),
};
const int ob_req_n_fields = (int)(sizeof ob_req_fields / sizeof ob_req_fields[0]);

static void store(const struct ob_req_field *f, struct ob_req_params *p, double v)
{
    char *at = (char *)p + f->off;
    switch (f->ctype) {
    case C_INT: *(int *)at = (int)v; break;
    case C_U32: *(uint32_t *)at = (uint32_t)v; break;
    case C_U64: *(uint64_t *)at = (uint64_t)v; break;
    case C_FLOAT: *(float *)at = (float)v; break;
    case C_BOOL: *(bool *)at = v != 0; break;
    }
}

void ob_req_params_default(struct ob_req_params *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < ob_req_n_fields; i++)
        store(&ob_req_fields[i], p, ob_req_fields[i].def);
}

const struct ob_req_field *ob_req_field(const char *name)
{
    for (int i = 0; i < ob_req_n_fields; i++)
        if (!strcmp(ob_req_fields[i].name, name))
            return &ob_req_fields[i];
    return NULL;
}

const char *ob_req_field_want(const struct ob_req_field *f, char *buf, size_t size)
{
    if (f->type == OB_REQ_BOOL)
        snprintf(buf, size, "true or false");
    else if (f->type == OB_REQ_INT)
        snprintf(buf, size, "an integer in [%.0f, %.0f]", f->lo, f->hi);
    else
        snprintf(buf, size, "a number in [%g, %g]", f->lo, f->hi);
    return buf;
}

int ob_req_field_read(const cJSON *o, const struct ob_req_field *f, struct ob_req_params *p)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, f->name);
    if (!v || cJSON_IsNull(v))
        return 1;
    if (f->type == OB_REQ_BOOL) {
        if (!cJSON_IsBool(v))
            return OB_EFORMAT;
        store(f, p, cJSON_IsTrue(v));
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return OB_EFORMAT;
    double d = v->valuedouble;
    if (!(d >= f->lo && d <= f->hi) || (f->type == OB_REQ_INT && d != floor(d)))
        return OB_ERANGE;
    store(f, p, d);
    return 0;
}

int ob_req_params_read(const cJSON *o, struct ob_req_params *p, const struct ob_req_field **bad_f)
{
    for (int i = 0; i < ob_req_n_fields; i++) {
        const struct ob_req_field *f = &ob_req_fields[i];
        if (ob_req_field_read(o, f, p) < 0) {
            char want[64];
            if (bad_f)
                *bad_f = f;
            return ob_seterr(OB_EFORMAT, "field '%s' must be %s", f->name,
                             ob_req_field_want(f, want, sizeof want));
        }
    }
    return 0;
}

int ob_req_kwargs(const cJSON *o, struct ob_req_params *p, const char **param)
{
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(o, "chat_template_kwargs");
    if (!kw || cJSON_IsNull(kw))
        return 1;
    *param = "chat_template_kwargs";
    if (!cJSON_IsObject(kw))
        return ob_seterr(OB_EFORMAT, "'chat_template_kwargs' must be an object");
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
    if (!et || cJSON_IsNull(et))
        return 1;
    *param = "chat_template_kwargs.enable_thinking";
    if (!cJSON_IsBool(et))
        return ob_seterr(OB_EFORMAT, "'chat_template_kwargs.enable_thinking' must be a boolean");
    p->thinking = cJSON_IsTrue(et);
    return 0;
}

int ob_req_spec(const cJSON *o, int *spec, bool *wrong_type)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "spec");
    *wrong_type = false;
    if (!v || cJSON_IsNull(v))
        return 1;
    for (int i = 0; cJSON_IsString(v) && ob_spec_words[i].word; i++)
        if (!strcmp(v->valuestring, ob_spec_words[i].word)) {
            *spec = ob_spec_words[i].value;
            return 0;
        }
    *wrong_type = !cJSON_IsString(v);
    return ob_seterr(OB_EFORMAT, "field 'spec' must be \"ngram\", \"draft\" or \"off\"");
}

/* ---- fields 1b does not implement ------------------------------------------------------------ */

const char *ob_req_unsupported(const cJSON *o, bool *wrong_type, const char **why)
{
    static const struct { const char *k; double neutral; const char *why; } num[] = {
        {"n", 1, " (only 1)"}, {"best_of", 1, " (only 1)"}, {"presence_penalty", 0, " (only 0)"},
        {"frequency_penalty", 0, " (only 0)"}, {"repeat_penalty", 1, " (only 1)"},
        {"repetition_penalty", 1, " (only 1)"}, {"typical_p", 1, " (only 1)"},
        {"tfs_z", 1, " (only 1)"}, {"mirostat", 0, " (only 0)"},
    };
    *wrong_type = false;
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = "";
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, num[i].k);
        if (!v || cJSON_IsNull(v))
            continue;
        *wrong_type = !cJSON_IsNumber(v);
        if (*wrong_type || v->valuedouble != num[i].neutral) {
            *why = num[i].why;
            return num[i].k;
        }
    }
    /* objects and arrays that must be empty, strings that must be empty */
    static const char *const empty[] = {"logit_bias", "tools", "functions", "grammar",
                                        "json_schema", "suffix"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, empty[i]);
        if (v && !cJSON_IsNull(v) && !((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child) &&
            !(cJSON_IsString(v) && !*v->valuestring))
            return empty[i];
    }
    /* without tools, choosing none (or letting the model choose) is neutral */
    static const char *const choice[] = {"tool_choice", "function_call"};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, choice[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && (!strcmp(v->valuestring, "none") ||
                                                             !strcmp(v->valuestring, "auto")))) {
            *why = " (no tools)";
            return choice[i];
        }
    }
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *t = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text")) {
            *why = " (only {\"type\":\"text\"})";
            return "response_format";
        }
    }
    return NULL;
}

int ob_req_refuse_record(const cJSON *rec)
{
    bool wrong;
    const char *why, *k = ob_req_unsupported(rec, &wrong, &why);
    if (k)
        return ob_seterr(OB_EFORMAT, "field '%s' is not supported by 1b%s", k, why);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "echo")))
        return ob_seterr(OB_EFORMAT, "field 'echo' is not supported here (use 1b-logprobs)");
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(rec, "prompt_logprobs");
    if (pl && !cJSON_IsNull(pl))
        return ob_seterr(OB_EFORMAT, "field 'prompt_logprobs' is not supported here (use "
                                     "1b-logprobs, or 1b-serve's /v1/completions)");
    return 0;
}

int ob_req_stop(const cJSON *o, const char *out[OB_REQ_MAX_STOP], int *n, bool *wrong_type)
{
    *n = 0;
    *wrong_type = false;
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (!stop || cJSON_IsNull(stop))
        return 1;
    int k = cJSON_IsString(stop) ? 1 : cJSON_IsArray(stop) ? cJSON_GetArraySize(stop) : -1;
    if (k < 0 || k > OB_REQ_MAX_STOP) {
        *wrong_type = k < 0;
        return bad("stop", "must be a string or an array of at most 16 strings");
    }
    const cJSON *it = cJSON_IsString(stop) ? stop : stop->child;
    for (int i = 0; i < k; i++, it = it->next) {
        if (!cJSON_IsString(it) || !*it->valuestring)
            return bad("stop", "must hold non-empty strings");
        out[i] = it->valuestring;
    }
    *n = k;
    return 0;
}

void ob_req_msgs_free(struct ob_req_msgs *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* a refusal of the message at param */
static int bad_msg(bool *wrong_type, bool type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad_msg(bool *wrong_type, bool type, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *wrong_type = type;
    return ob_seterr(OB_EFORMAT, "%s", msg);
}

int ob_req_messages(const cJSON *arr, struct ob_req_msgs *m, char *param, size_t param_size,
                    bool *wrong_type)
{
    memset(m, 0, sizeof *m);
    *wrong_type = false;
    snprintf(param, param_size, "messages");
    if (!cJSON_IsArray(arr) || !arr->child)
        return bad_msg(wrong_type, true, "'messages' must be a non-empty array");
    size_t cnt = (size_t)cJSON_GetArraySize(arr), i = 0;
    m->v = calloc(cnt, sizeof *m->v);
    m->owned = calloc(cnt, sizeof *m->owned);      /* at most one joined content per message */
    if (!m->v || !m->owned)
        return ob_seterr(OB_ENOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        snprintf(param, param_size, "messages[%zu]", i);
        if (!cJSON_IsObject(it))
            return bad_msg(wrong_type, true, "'%s' must be an object", param);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(it, "reasoning_content");
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(it, "tool_calls");
        const cJSON *fc = cJSON_GetObjectItemCaseSensitive(it, "function_call");
        snprintf(param, param_size, "messages[%zu].role", i);
        if (!cJSON_IsString(role))
            return bad_msg(wrong_type, true, "'%s' must be a string", param);
        const char *rs = role->valuestring;
        if (!strcmp(rs, "developer"))
            rs = "system";                /* OpenAI's newer name for the system role */
        else if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant"))
            return bad_msg(wrong_type, false, "role '%s' is not supported (system, developer, "
                           "user, assistant)", role->valuestring);
        if ((tc && !cJSON_IsNull(tc)) || (fc && !cJSON_IsNull(fc))) {
            snprintf(param, param_size, "messages[%zu].tool_calls", i);
            return bad_msg(wrong_type, false, "tool calls are not supported by 1b");
        }
        snprintf(param, param_size, "messages[%zu].content", i);
        const char *text = NULL;
        if (cJSON_IsString(content)) {
            text = content->valuestring;
        } else if (cJSON_IsArray(content)) {
            /* content parts: text parts are joined; any other kind is refused */
            struct ob_sb b = {0};
            const cJSON *part;
            int k = 0;
            cJSON_ArrayForEach(part, content) {
                const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
                const cJSON *tx = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsObject(part) || !cJSON_IsString(ty) ||
                    strcmp(ty->valuestring, "text") || !cJSON_IsString(tx)) {
                    ob_sb_free(&b);
                    snprintf(param, param_size, "messages[%zu].content[%d]", i, k);
                    return bad_msg(wrong_type, false, "'%s' must be {\"type\":\"text\","
                                   "\"text\":string}: only text content is supported", param);
                }
                ob_sb_str(&b, tx->valuestring);
                k++;
            }
            if (!(text = ob_sb_take(&b, NULL)))
                return ob_seterr(OB_ENOMEM, "out of memory");
            m->owned[m->n_owned++] = (char *)text;
        } else {
            return bad_msg(wrong_type, true, "'%s' must be a string or an array of text parts",
                           param);
        }
        if (rc && !cJSON_IsNull(rc) && !cJSON_IsString(rc)) {
            snprintf(param, param_size, "messages[%zu].reasoning_content", i);
            return bad_msg(wrong_type, true, "'%s' must be a string", param);
        }
        m->v[i].role = rs;
        m->v[i].content = text;
        m->v[i].reasoning_content = cJSON_IsString(rc) ? rc->valuestring : NULL;
        i++;
    }
    m->n = cnt;
    return 0;
}

int ob_req_parse(const cJSON *rec, const struct ob_model *model, const struct ob_req_defaults *d,
                 uint64_t line, struct ob_req *r)
{
    memset(r, 0, sizeof *r);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(rec, "id");
    char buf[64];
    if (cJSON_IsString(id)) {
        r->id = strdup(id->valuestring);
    } else if (cJSON_IsNumber(id)) {
        ob_f64_str(id->valuedouble, buf);
        r->id = strdup(buf);
    } else if (!id || cJSON_IsNull(id)) {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)line);    /* the line number */
        r->id = strdup(buf);
    } else {
        return bad("id", "must be a string or a number");
    }
    if (!r->id)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int e;
    if ((e = ob_req_refuse_record(rec)))
        return e;

    /* sampling and limits: record, else defaults */
    struct ob_req_params p;
    ob_req_params_default(&p);
    p.s.temperature = d->temperature;
    p.s.seed = d->seed;
    p.max_tokens = d->max_tokens;
    p.top_logprobs = d->top_logprobs;
    const char *param;
    if ((e = ob_req_params_read(rec, &p, NULL)) || (e = ob_req_kwargs(rec, &p, &param)) < 0)
        return e;
    r->s = p.s;
    r->max_tokens = p.max_tokens;
    r->top_logprobs = p.top_logprobs;
    r->logprobs = p.logprobs;
    r->cache_prompt = p.cache_prompt;
    r->thinking = p.thinking;
    bool wrong;
    if ((e = ob_req_spec(rec, &r->spec, &wrong)) < 0)
        return e;

    /* stop strings */
    const char *stops[OB_REQ_MAX_STOP];
    if ((e = ob_req_stop(rec, stops, &r->n_stop, &wrong)) < 0)
        return e;
    if (r->n_stop) {
        r->stop = calloc((size_t)r->n_stop, sizeof *r->stop);
        if (!r->stop)
            return ob_seterr(OB_ENOMEM, "out of memory");
        for (int i = 0; i < r->n_stop; i++)
            if (!(r->stop[i] = strdup(stops[i])))
                return ob_seterr(OB_ENOMEM, "out of memory");
    }

    /* the prompt */
    const struct ob_tok *tok = ob_model_tok(model);
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(rec, "prompt");
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(rec, "messages");
    if (cJSON_IsNull(prompt))
        prompt = NULL;
    if (cJSON_IsNull(messages))
        messages = NULL;
    if ((prompt != NULL) == (messages != NULL))
        return ob_seterr(OB_EFORMAT, "a record needs exactly one of 'prompt' and 'messages'");
    size_t n = 0;
    if (cJSON_IsString(prompt)) {
        int32_t *ids;
        if ((e = ob_tok_encode(tok, prompt->valuestring, strlen(prompt->valuestring), false, &ids,
                               &n)))
            return e;
        bool bos = ob_tok_add_bos(tok) && ob_tok_bos(tok) >= 0;
        r->ids = malloc((n + 1) * sizeof *r->ids);
        if (!r->ids) {
            free(ids);
            return ob_seterr(OB_ENOMEM, "out of memory");
        }
        if (bos)
            r->ids[0] = ob_tok_bos(tok);
        memcpy(r->ids + bos, ids, n * sizeof *ids);
        free(ids);
        n += bos;
        r->templated = false;
    } else if (cJSON_IsArray(prompt)) {
        n = (size_t)cJSON_GetArraySize(prompt);
        r->ids = malloc((n ? n : 1) * sizeof *r->ids);
        if (!r->ids)
            return ob_seterr(OB_ENOMEM, "out of memory");
        size_t i = 0;
        const cJSON *it;
        uint32_t V = ob_model_hparams(model)->n_vocab;
        cJSON_ArrayForEach(it, prompt) {
            if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
                it->valuedouble < 0 || it->valuedouble >= V)
                return ob_seterr(OB_EFORMAT, "prompt[%zu] is not a token id below %u", i, V);
            r->ids[i++] = (int32_t)it->valuedouble;
        }
    } else if (prompt) {
        return bad("prompt", "must be a string or an array of token ids");
    } else {
        struct ob_req_msgs msgs;
        char param[64];
        if ((e = ob_req_messages(messages, &msgs, param, sizeof param, &wrong))) {
            ob_req_msgs_free(&msgs);
            return e;
        }
        struct ob_chat_opts o = OB_CHAT_OPTS_DEFAULT;
        o.enable_thinking = r->thinking;
        e = ob_chat_tokenize(tok, ob_model_chat_template(model), msgs.v, msgs.n, &o, &r->ids,
                             &n);
        ob_req_msgs_free(&msgs);
        if (e)
            return e;
        r->templated = true;
    }
    if (n == 0)
        return ob_seterr(OB_EFORMAT, "the prompt is empty");
    r->n_ids = (int)n;
    /* tokens that end generation: the template's end of turn, or the model's EOS */
    size_t ns = 0;
    if ((e = ob_chat_stops(tok, r->templated ? ob_model_chat_template(model) : NULL,
                           r->stop_ids, &ns)))
        return e;
    r->n_stop_ids = (int)ns;
    return 0;
}

/* ---- results --------------------------------------------------------------------------------- */

void ob_json_add_first(cJSON *o, const char *key, cJSON *item)
{
    if (!item)
        return;
    /* added under its name, then moved to the front: cJSON keeps the name it was given */
    cJSON_AddItemToObject(o, key, item);
    if (o->child != item) {
        cJSON_DetachItemViaPointer(o, item);
        cJSON_InsertItemInArray(o, 0, item);
    }
}

/* {id, text, [bytes,] logprob, bits} of one token */
static cJSON *one_token(const struct ob_tok *tok, int32_t id, float lp, bool with_bytes)
{
    cJSON *t = cJSON_CreateObject();
    const char *b = "";
    size_t n = 0;
    ob_tok_piece(tok, id, &b, &n);
    char *txt = ob_utf8_sanitize(b, n), hex[OB_F32_BUFSZ];
    ob_json_add_int(t, "id", id);
    cJSON_AddStringToObject(t, "text", txt ? txt : "");
    free(txt);
    if (with_bytes)
        cJSON_AddItemToObject(t, "bytes", ob_json_bytes(b, n));
    cJSON_AddItemToObject(t, "logprob", ob_json_f32(lp));
    cJSON_AddStringToObject(t, "bits", ob_f32_hex(lp, hex));
    return t;
}

cJSON *ob_token_json(const struct ob_tok *tok, const struct ob_token_info *ti, bool logprobs)
{
    cJSON *t = one_token(tok, ti->id, ti->logprob, true);
    if (!logprobs) {
        cJSON_DeleteItemFromObject(t, "logprob");
        cJSON_DeleteItemFromObject(t, "bits");
        return t;
    }
    cJSON *top = cJSON_CreateArray();
    for (int i = 0; i < ti->n_top; i++)
        cJSON_AddItemToArray(top, one_token(tok, ti->top[i].id, ti->top[i].logprob, false));
    cJSON_AddItemToObject(t, "top", top);
    return t;
}

const char *ob_finish_name(int reason)
{
    switch (reason) {
    case OB_FINISH_STOP:
    case OB_FINISH_STOP_STRING: return "stop";
    case OB_FINISH_LENGTH:
    case OB_FINISH_CONTEXT: return "length";
    case OB_FINISH_CANCELLED: return "cancelled";
    }
    return "error";
}

/* The record's own fields, in the order they are written; a request's field of the same name
 * is replaced. */
static const char *const result_fields[] = {
    "id", "repeat", "route", "model", "prompt_tokens", "prompt_ids", "tokens", "text",
    "reasoning_content", "finish_reason", "completion_tokens", "cached_tokens", "nonf32_values",
    "timing", "error",
};

cJSON *ob_result_record(const cJSON *req, struct ob_result *r)
{
    cJSON *o = req ? cJSON_Duplicate(req, true) : cJSON_CreateObject();
    cJSON *id = cJSON_CreateString(r->id ? r->id : "");
    char *text = r->text ? ob_utf8_sanitize(r->text, r->text_len) : NULL;
    char *reasoning = r->reasoning && *r->reasoning
                          ? ob_utf8_sanitize(r->reasoning, strlen(r->reasoning)) : NULL;
    char *model = r->model ? ob_utf8_sanitize(r->model, strlen(r->model)) : NULL;
    /* a server's finish_reason and error text may hold any bytes: records are valid UTF-8 */
    char *finish = r->finish_reason && !r->error
                       ? ob_utf8_sanitize(r->finish_reason, strlen(r->finish_reason)) : NULL;
    char *error = r->error ? ob_utf8_sanitize(r->error, strlen(r->error)) : NULL;
    if (!o || !id || (r->text && !text) || (r->reasoning && *r->reasoning && !reasoning) ||
        (r->model && !model) || (r->finish_reason && !r->error && !finish) ||
        (r->error && !error)) {
        cJSON_Delete(o);
        cJSON_Delete(id);
        free(text);
        free(reasoning);
        free(model);
        free(finish);
        free(error);
        cJSON_Delete(r->tokens);
        cJSON_Delete(r->timing);
        r->tokens = r->timing = NULL;
        return NULL;
    }
    for (size_t i = 0; i < sizeof result_fields / sizeof result_fields[0]; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(o, result_fields[i]);
    ob_json_add_first(o, "id", id);
    ob_json_add_int(o, "repeat", r->repeat);
    cJSON_AddStringToObject(o, "route", r->route ? r->route : "");
    if (model) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "name", model);
        if (r->sha256)
            cJSON_AddStringToObject(m, "sha256", r->sha256);
        cJSON_AddItemToObject(o, "model", m);
        free(model);
    }
    if (r->prompt_tokens >= 0)
        ob_json_add_int(o, "prompt_tokens", r->prompt_tokens);
    if (r->prompt_ids)
        cJSON_AddItemToObject(o, "prompt_ids", ob_json_ids(r->prompt_ids, r->n_prompt_ids));
    cJSON_AddItemToObject(o, "tokens", r->tokens ? r->tokens : cJSON_CreateArray());
    r->tokens = NULL;
    if (text)
        cJSON_AddStringToObject(o, "text", text);
    if (reasoning)
        cJSON_AddStringToObject(o, "reasoning_content", reasoning);
    free(text);
    free(reasoning);
    if (r->finish_reason || r->error)
        cJSON_AddStringToObject(o, "finish_reason", r->error ? "error" : finish);
    free(finish);
    if (r->completion_tokens >= 0)
        ob_json_add_int(o, "completion_tokens", r->completion_tokens);
    if (r->cached_tokens >= 0)
        ob_json_add_int(o, "cached_tokens", r->cached_tokens);
    if (r->nonf32 > 0)
        ob_json_add_int(o, "nonf32_values", r->nonf32);
    if (r->timing)
        cJSON_AddItemToObject(o, "timing", r->timing);
    r->timing = NULL;
    if (error)
        cJSON_AddStringToObject(o, "error", error);
    free(error);
    return o;
}

cJSON *ob_result_timing(double prefill_s, double decode_s, int n_prefill, int n_gen)
{
    cJSON *tm = cJSON_CreateObject();
    cJSON_AddItemToObject(tm, "prefill_s", ob_json_f64(prefill_s));
    cJSON_AddItemToObject(tm, "decode_s", ob_json_f64(decode_s));
    cJSON_AddItemToObject(tm, "prefill_tps", ob_json_f64(prefill_s > 0 ? n_prefill / prefill_s : 0));
    cJSON_AddItemToObject(tm, "decode_tps",
                          ob_json_f64(decode_s > 0 && n_gen > 1 ? (n_gen - 1) / decode_s : 0));
    return tm;
}

/* ---- what a result record asks to score (1b-logprobs) ------------------------------------- */

static int ids_array(const cJSON *a, uint32_t n_vocab, int32_t **out, int *n, const char *what)
{
    int k = cJSON_GetArraySize(a);
    int32_t *v = malloc((size_t)(k ? k : 1) * sizeof *v);
    if (!v)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, a) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
            it->valuedouble < 0 || (n_vocab && it->valuedouble >= n_vocab)) {
            free(v);
            return ob_seterr(OB_EFORMAT, "%s[%d] is not a token id of this model", what, i);
        }
        v[i++] = (int32_t)it->valuedouble;
    }
    *out = v;
    *n = k;
    return 0;
}

char *ob_record_id(const cJSON *rec, uint64_t line)
{
    char buf[OB_F32_BUFSZ];
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(rec, "id");
    if (cJSON_IsString(id))
        return strdup(id->valuestring);
    if (cJSON_IsNumber(id))
        return strdup(ob_f64_str(id->valuedouble, buf));
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)line);
    return strdup(buf);
}

int ob_result_forced(const cJSON *rec, uint64_t line, struct ob_model *m, int top,
                     struct ob_result_forced *j)
{
    memset(j, 0, sizeof *j);
    const struct ob_tok *tok = m ? ob_model_tok(m) : NULL;
    uint32_t nv = tok ? ob_tok_n_vocab(tok) : 0;
    if (!(j->id = ob_record_id(rec, line)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(rec, "error");
    if (err && !cJSON_IsNull(err))
        return ob_seterr(OB_EFORMAT, "the record is a failed request (it has an 'error'): "
                         "nothing to score");
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(rec, "tokens");
    if (!cJSON_IsArray(toks))
        return ob_seterr(OB_EFORMAT, "no 'tokens' (not a result record)");
    int e;
    /* the context */
    const cJSON *pids = cJSON_GetObjectItemCaseSensitive(rec, "prompt_ids");
    if (pids && !cJSON_IsNull(pids) && (!cJSON_IsArray(pids) || !pids->child))
        return ob_seterr(OB_EFORMAT, "prompt_ids is not a non-empty array of token ids");
    if (pids && !cJSON_IsNull(pids)) {
        if ((e = ids_array(pids, nv, &j->prompt, &j->n_prompt, "prompt_ids")))
            return e;
    } else {
        if (!m)
            return ob_seterr(OB_EUSAGE, "the record has no prompt_ids: -m MODEL is needed to "
                             "tokenize its prompt");
        struct ob_req_defaults d = {.max_tokens = 0, .top_logprobs = 0};
        struct ob_req q;
        /* the scoring fields are ours: a record's own sampling fields do not matter here */
        cJSON *copy = cJSON_Duplicate(rec, true);
        if (!copy)
            return ob_seterr(OB_ENOMEM, "out of memory");
        static const char *const drop[] = {"tokens", "n", "echo", "logprobs", "top_logprobs"};
        for (size_t i = 0; i < sizeof drop / sizeof *drop; i++)
            cJSON_DeleteItemFromObjectCaseSensitive(copy, drop[i]);
        e = ob_req_parse(copy, m, &d, line, &q);
        cJSON_Delete(copy);
        if (e) {
            ob_req_free(&q);
            return e;
        }
        j->prompt = q.ids;
        j->n_prompt = q.n_ids;
        q.ids = NULL;
        ob_req_free(&q);
    }
    /* the tokens, read as every reader of result records reads them (agree.h): their ids,
     * or ids found from their bytes */
    struct ob_agree_rec ar;
    memset(&ar, 0, sizeof ar);
    if ((e = ob_agree_tokens_from_json(toks, &ar))) {
        ob_agree_rec_free(&ar);
        return e;
    }
    int n = ar.n, maxtop = 0;
    if (!(j->forced = malloc((size_t)(n ? n : 1) * sizeof *j->forced))) {
        ob_agree_rec_free(&ar);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n && !e; i++) {
        const struct ob_agree_tok *t = &ar.t[i];
        if (t->n_top > maxtop)
            maxtop = t->n_top;
        if (t->id >= 0) {
            if (nv && (uint32_t)t->id >= nv)
                e = ob_seterr(OB_EFORMAT, "token %d: id is not a token id of this model", i);
            j->forced[i] = t->id;
            continue;
        }
        if (!m) {
            e = ob_seterr(OB_EUSAGE, "token %d has no id: -m MODEL is needed to find it from "
                          "its text", i);
            break;
        }
        int32_t v = t->has_key ? ob_tok_find_piece(tok, t->key, t->key_len) : -1;
        if (v < 0) {
            char *x = ob_utf8_sanitize(t->key ? t->key : "", t->key_len);
            e = ob_seterr(OB_EFORMAT, "token %d (\"%s\") has no id and its text is not one "
                          "token of this vocabulary", i, x ? x : "?");
            free(x);
            break;
        }
        j->forced[i] = v;
        j->ids_from_text = true;
    }
    ob_agree_rec_free(&ar);
    if (e)
        return e;
    j->n_forced = n;
    /* alternatives: --top-logprobs, else the record's top_logprobs, else as many as its
     * tokens carry */
    const cJSON *tl = cJSON_GetObjectItemCaseSensitive(rec, "top_logprobs");
    if (top >= 0) {
        j->top = top;
    } else if (tl && !cJSON_IsNull(tl)) {
        if (!cJSON_IsNumber(tl) || tl->valuedouble != floor(tl->valuedouble) ||
            tl->valuedouble < 0 || tl->valuedouble > OB_MAX_TOP)
            return ob_seterr(OB_ERANGE, "top_logprobs is not an integer in [0, %d]", OB_MAX_TOP);
        j->top = (int)tl->valuedouble;
    } else {
        j->top = maxtop > OB_MAX_TOP ? OB_MAX_TOP : maxtop;
    }
    return 0;
}

void ob_result_forced_free(struct ob_result_forced *f)
{
    free(f->id);
    free(f->prompt);
    free(f->forced);
    memset(f, 0, sizeof *f);
}
