/*
 * record.c — the request and result records every tool shares (schemas in 1b(7)).
 *
 * A request record is parsed into token ids and sampling parameters for one model: "prompt"
 * (text, tokenized as plain text with the model's BOS; or an array of token ids) or
 * "messages" (rendered with the model's chat template, "thinking" switching Qwen3's think
 * block), plus max_tokens, temperature, top_k, top_p, min_p, seed, stop, logprobs,
 * top_logprobs, cache_prompt. Fields whose meaning 1b does not implement but which would
 * change the answer (n > 1, penalties, logit_bias, tools, ...) are refused by name rather
 * than ignored; any other unknown field is passed through to the result.
 *
 * A result record carries the request's fields, then: repeat, route, model {name, sha256},
 * prompt_tokens, prompt_ids, tokens [{id, text, bytes, logprob, bits, top}], text,
 * finish_reason, completion_tokens, cached_tokens, timing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "chat.h"
#include "record.h"
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

/* a JSON number that is an integer in [lo, hi] */
static int get_int(const cJSON *rec, const char *k, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, k);
    if (!v || cJSON_IsNull(v))
        return 1;                        /* absent */
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi) {
        char why[96];
        snprintf(why, sizeof why, "must be an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return bad(k, why);
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int get_num(const cJSON *rec, const char *k, double lo, double hi, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, k);
    if (!v || cJSON_IsNull(v))
        return 1;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) {
        char why[96];
        snprintf(why, sizeof why, "must be a number in [%g, %g]", lo, hi);
        return bad(k, why);
    }
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *rec, const char *k, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, k);
    if (!v || cJSON_IsNull(v))
        return 1;
    if (!cJSON_IsBool(v))
        return bad(k, "must be true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

#define OPT(call) do { int r_ = (call); if (r_ < 0) return r_; } while (0)

/* fields that would change the answer and that 1b does not implement */
static int refuse_unimplemented(const cJSON *rec)
{
    static const struct { const char *k; double neutral; } num[] = {
        {"n", 1}, {"best_of", 1}, {"presence_penalty", 0}, {"frequency_penalty", 0},
        {"repeat_penalty", 1}, {"repetition_penalty", 1}, {"typical_p", 1}, {"tfs_z", 1},
        {"mirostat", 0},
    };
    for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, num[i].k);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == num[i].neutral))
            return ob_seterr(OB_EFORMAT, "field '%s' is not supported by 1b (only %g)", num[i].k,
                             num[i].neutral);
    }
    static const char *const obj[] = {"logit_bias", "tools", "tool_choice", "functions",
                                       "response_format", "grammar", "json_schema", "suffix"};
    for (size_t i = 0; i < sizeof obj / sizeof obj[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, obj[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsObject(v) && !v->child) &&
            !(cJSON_IsArray(v) && !v->child) && !(cJSON_IsString(v) && !*v->valuestring))
            return ob_seterr(OB_EFORMAT, "field '%s' is not supported by 1b", obj[i]);
    }
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, "echo");
    if (cJSON_IsTrue(v))
        return ob_seterr(OB_EFORMAT, "field 'echo' is not supported here (use 1b-logprobs)");
    return 0;
}

static int parse_messages(const cJSON *arr, struct ob_chat_msg **out, size_t *n)
{
    if (!cJSON_IsArray(arr) || !arr->child)
        return bad("messages", "must be a non-empty array");
    size_t cnt = (size_t)cJSON_GetArraySize(arr), i = 0;
    struct ob_chat_msg *m = calloc(cnt, sizeof *m);
    if (!m)
        return ob_seterr(OB_ENOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *rc = cJSON_GetObjectItemCaseSensitive(it, "reasoning_content");
        if (!cJSON_IsObject(it) || !cJSON_IsString(role) || !cJSON_IsString(content)) {
            free(m);
            return ob_seterr(OB_EFORMAT, "messages[%zu] needs string 'role' and 'content'", i);
        }
        m[i].role = role->valuestring;
        m[i].content = content->valuestring;
        m[i].reasoning_content = cJSON_IsString(rc) ? rc->valuestring : NULL;
        i++;
    }
    *out = m;
    *n = cnt;
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
    } else if (!id) {
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)line);    /* the line number */
        r->id = strdup(buf);
    } else {
        return bad("id", "must be a string or a number");
    }
    if (!r->id)
        return ob_seterr(OB_ENOMEM, "out of memory");
    int e;
    if ((e = refuse_unimplemented(rec)))
        return e;

    /* sampling and limits: record, else defaults */
    r->s = OB_SAMPLING_GREEDY;
    r->s.temperature = d->temperature;
    r->s.seed = d->seed;
    r->max_tokens = d->max_tokens;
    r->top_logprobs = d->top_logprobs;
    r->logprobs = true;
    r->cache_prompt = true;
    r->thinking = true;
    int64_t iv;
    double dv;
    OPT(e = get_int(rec, "max_tokens", 0, 1 << 24, &iv));
    if (e == 0)
        r->max_tokens = (int)iv;
    OPT(e = get_int(rec, "max_completion_tokens", 0, 1 << 24, &iv));
    if (e == 0)
        r->max_tokens = (int)iv;
    OPT(e = get_num(rec, "temperature", 0, 100, &dv));
    if (e == 0)
        r->s.temperature = (float)dv;
    OPT(e = get_int(rec, "top_k", 0, INT32_MAX, &iv));
    if (e == 0)
        r->s.top_k = (uint32_t)iv;
    OPT(e = get_num(rec, "top_p", 0, 1, &dv));
    if (e == 0)
        r->s.top_p = (float)dv;
    OPT(e = get_num(rec, "min_p", 0, 1, &dv));
    if (e == 0)
        r->s.min_p = (float)dv;
    OPT(e = get_int(rec, "seed", 0, (int64_t)1 << 53, &iv));
    if (e == 0)
        r->s.seed = (uint64_t)iv;
    OPT(get_bool(rec, "logprobs", &r->logprobs));
    OPT(e = get_int(rec, "top_logprobs", 0, OB_MAX_TOP, &iv));
    if (e == 0)
        r->top_logprobs = (int)iv;
    OPT(get_bool(rec, "cache_prompt", &r->cache_prompt));
    OPT(get_bool(rec, "thinking", &r->thinking));

    /* stop strings */
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(rec, "stop");
    if (stop && !cJSON_IsNull(stop)) {
        int n = cJSON_IsString(stop) ? 1 : cJSON_IsArray(stop) ? cJSON_GetArraySize(stop) : -1;
        if (n < 0 || n > 16)
            return bad("stop", "must be a string or an array of at most 16 strings");
        r->stop = calloc((size_t)(n ? n : 1), sizeof *r->stop);
        if (!r->stop)
            return ob_seterr(OB_ENOMEM, "out of memory");
        const cJSON *it = cJSON_IsString(stop) ? stop : stop->child;
        for (int i = 0; i < n; i++, it = it->next) {
            if (!cJSON_IsString(it) || !*it->valuestring)
                return bad("stop", "must hold non-empty strings");
            if (!(r->stop[r->n_stop++] = strdup(it->valuestring)))
                return ob_seterr(OB_ENOMEM, "out of memory");
        }
    }

    /* the prompt */
    const struct ob_tok *tok = ob_model_tok(model);
    const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(rec, "prompt");
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(rec, "messages");
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
        struct ob_chat_msg *msgs = NULL;
        size_t nm = 0;
        if ((e = parse_messages(messages, &msgs, &nm)))
            return e;
        struct ob_chat_opts o = OB_CHAT_OPTS_DEFAULT;
        o.enable_thinking = r->thinking;
        e = ob_chat_tokenize(tok, ob_model_chat_template(model), msgs, nm, &o, &r->ids, &n);
        free(msgs);
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

cJSON *ob_result_begin(const cJSON *req, const struct ob_req *r, int repeat, const char *route,
                       const char *model_name, const char *sha256)
{
    cJSON *o = req ? cJSON_Duplicate(req, true) : cJSON_CreateObject();
    if (!o)
        return NULL;
    /* the tool's own fields replace any of the same name */
    static const char *const ours[] = {"id", "repeat", "route", "model", "prompt_tokens",
                                       "prompt_ids", "tokens", "text", "finish_reason",
                                       "completion_tokens", "cached_tokens", "timing", "error"};
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        cJSON_DeleteItemFromObjectCaseSensitive(o, ours[i]);
    cJSON *first = cJSON_CreateString(r->id);
    /* id first: insert at the head of the object */
    first->next = o->child;
    if (o->child) {
        first->prev = o->child->prev;
        o->child->prev = first;
    } else {
        first->prev = first;
    }
    first->string = strdup("id");
    o->child = first;
    ob_json_add_int(o, "repeat", repeat);
    cJSON_AddStringToObject(o, "route", route);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", model_name);
    if (sha256)
        cJSON_AddStringToObject(m, "sha256", sha256);
    cJSON_AddItemToObject(o, "model", m);
    ob_json_add_int(o, "prompt_tokens", r->n_ids);
    cJSON_AddItemToObject(o, "prompt_ids", ob_json_ids(r->ids, r->n_ids));
    cJSON_AddItemToObject(o, "tokens", cJSON_CreateArray());
    return o;
}

int ob_result_finish(cJSON *o, const char *text, size_t text_len, const char *finish_reason,
                     int n_gen, int n_cached, double prefill_s, double decode_s, int n_prefill)
{
    char *t = ob_utf8_sanitize(text ? text : "", text ? text_len : 0);
    if (!t)
        return ob_seterr(OB_ENOMEM, "out of memory");
    cJSON_AddStringToObject(o, "text", t);
    free(t);
    cJSON_AddStringToObject(o, "finish_reason", finish_reason);
    ob_json_add_int(o, "completion_tokens", n_gen);
    ob_json_add_int(o, "cached_tokens", n_cached);
    cJSON *tm = cJSON_CreateObject();
    cJSON_AddItemToObject(tm, "prefill_s", ob_json_f64(prefill_s));
    cJSON_AddItemToObject(tm, "decode_s", ob_json_f64(decode_s));
    cJSON_AddItemToObject(tm, "prefill_tps", ob_json_f64(prefill_s > 0 ? n_prefill / prefill_s : 0));
    cJSON_AddItemToObject(tm, "decode_tps",
                          ob_json_f64(decode_s > 0 && n_gen > 1 ? (n_gen - 1) / decode_s : 0));
    cJSON_AddItemToObject(o, "timing", tm);
    return 0;
}
