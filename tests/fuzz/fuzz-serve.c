/*
 * fuzz-serve.c — libFuzzer harness for 1b-serve's request side (lib/net/oai-server.c): any bytes as
 * a POST body to /v1/chat/completions, /v1/completions, /tokenize and /detokenize. No server and no
 * model: the body parser is a pure function, and the prompt is tokenized with a small byte-level
 * BPE vocabulary written here (ChatML specials and a Qwen3-style template, so that messages are
 * rendered and tokenized too).
 *
 * For every body that parses, the answer side is exercised as well and checked:
 *  - the fields are in their documented ranges;
 *  - a whole answer and every stream chunk built from the request's tokens are strict JSON
 *    (ob_json_parse: valid UTF-8, control characters escaped);
 *  - streaming the text piece by piece (ob_oai_srv_stream_safe, cut at the request's stop strings
 *    the way the engine cuts) gives exactly the text of the whole answer.
 * Anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "chat.h"
#include "net/oai-server.h"
#include "tok.h"
#include "../unit/bytelevel.h"

static struct ob_tok *tok;

/* the Qwen3 template is recognised by these words (chat.c) */
static const char *tmpl = "{%- if enable_thinking %}<|im_start|>{{ last_query_index }}"
                          "{{ reasoning_content }}<think></think><|im_end|>";


static void build(void)
{
    static struct ob_tok_str t[300];
    static int32_t ty[300];
    static char pool[512];
    uint32_t n = bl_byte_tokens(t, ty, pool);
    static const char *special[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>",
                                    "</think>"};
    for (int i = 0; i < 5; i++) {
        t[n] = (struct ob_tok_str){special[i], strlen(special[i])};
        ty[n++] = i < 3 ? OB_TOK_CONTROL : OB_TOK_USER_DEFINED;
    }
    /* two merges so that tokens of several bytes occur: "Ġt" and "he" */
    static struct ob_tok_str merges[2] = {{"\xc4\xa0 t", 4}, {"h e", 3}};
    t[n] = (struct ob_tok_str){"\xc4\xa0t", 3};
    ty[n++] = OB_TOK_NORMAL;
    t[n] = (struct ob_tok_str){"he", 2};
    ty[n++] = OB_TOK_NORMAL;
    struct ob_tok_spec sp = {.model = "gpt2", .pre = "qwen2", .n_vocab = n, .tokens = t,
                             .types = ty, .n_merges = 2, .merges = merges, .bos = -1, .eos = 258,
                             .unk = -1, .pad = -1, .add_bos = -1, .add_space_prefix = -1};
    if (ob_tok_new(&sp, &tok))
        abort();
}

/* strict JSON (ob_json_parse): valid UTF-8, no raw control bytes, nothing cJSON would cut */
static void must_parse(const char *s, size_t n, const char *what)
{
    cJSON *j = NULL;
    if (ob_json_parse(s, n, 0, &j)) {
        fprintf(stderr, "invalid JSON from %s: %.*s\n", what, (int)(n < 400 ? n : 400), s);
        abort();
    }
    cJSON_Delete(j);
}

/* every "data: {...}\n\n" event of a stream is JSON */
static void check_events(const struct ob_sb *b)
{
    if (!b->p)
        return;
    const char *p = b->p, *end = b->p + b->len;
    while (p < end) {
        if (strncmp(p, "data: ", 6))
            abort();
        const char *e = strstr(p, "\n\n");
        if (!e)
            abort();
        if (strncmp(p + 6, "[DONE]", 6))
            must_parse(p + 6, (size_t)(e - p - 6), "a stream chunk");
        p = e + 2;
    }
}

/* the engine's stop-string rule (engine.c append_text): after appending bytes [old, len),
 * the first stop string (in order) that has a match ending in the new bytes cuts the text at
 * its earliest such match */
static bool engine_stop(const char *text, size_t old, size_t len, const char *const *stop,
                        int n_stop, size_t *at)
{
    for (int i = 0; i < n_stop; i++) {
        size_t sl = strlen(stop[i]);
        if (!sl || sl > len)
            continue;
        size_t from = old + 1 > sl ? old + 1 - sl : 0;
        for (size_t k = from; k + sl <= len; k++)
            if (memcmp(text + k, stop[i], sl) == 0) {
                *at = k;
                return true;
            }
    }
    return false;
}

static void answers(const struct ob_oai_srv_req *q, const int32_t *ids, int n_ids)
{
    /* pretend the model generated the prompt's tokens again (at most 24) */
    int n = n_ids < 24 ? n_ids : 24;
    struct ob_token_info *ti = calloc((size_t)n + 1, sizeof *ti);
    char *text = malloc(16 * (size_t)n + 1);
    if (!ti || !text)
        abort();
    size_t len = 0, cut = 0, sent = 0;
    bool stopped = false;
    int n_toks = 0;
    struct ob_sb stream = {0}, pieces = {0};
    struct ob_oai_srv_result r = {
        .kind = q->kind, .id = "cmpl-fuzz", .model = "m", .fingerprint = "1b-x", .created = 1,
        .tok = tok, .echo = q->echo, .prompt = ids, .n_prompt = n_ids, .ptoks = ti,
        .n_ptoks = n > 0 ? n - 1 : 0, .toks = ti, .text = text, .finish_reason = "length",
        .logprobs = q->logprobs, .top_logprobs = q->top_logprobs,
        .prompt_logprobs = q->prompt_logprobs,
    };
    for (int i = 0; i < n && !stopped; i++) {
        ti[i].id = ids[i];
        ti[i].logprob = -(float)i / 3.0f;
        ti[i].rank = i + 1;
        /* scored with the more alternatives of logprobs and prompt_logprobs, as 1b-serve does */
        int nt = q->top_logprobs > q->prompt_logprobs ? q->top_logprobs : q->prompt_logprobs;
        ti[i].n_top = nt < 3 ? nt : 3;
        /* distinct ids, as a distribution's best are; at even places the token itself is the
         * best (prompt_logprobs lists it once), at odd ones it is not among them */
        for (int k = 0; k < ti[i].n_top; k++)
            ti[i].top[k] = (struct ob_top_lp){
                .id = (int32_t)(((uint32_t)ids[i] + (uint32_t)k + (uint32_t)(i & 1)) %
                                ob_tok_n_vocab(tok)),
                .logprob = -(float)k};
        const char *p;
        size_t pl;
        if (ob_tok_piece(tok, ids[i], &p, &pl))
            abort();
        size_t old = len;
        memcpy(text + len, p, pl);
        len += pl;
        n_toks = i + 1;
        r.n_toks = n_toks;
        size_t at;
        stopped = q->n_forced == 0 && engine_stop(text, old, len, q->stop, q->n_stop, &at);
        size_t safe = ob_oai_srv_stream_safe(text, sent, len, q->stop, q->n_forced ? 0 : q->n_stop);
        if (safe < sent || safe > len)
            abort();
        if (stopped && safe > at)
            abort();               /* text after the cut was let out */
        ob_oai_srv_chunk_token(&stream, &r, &ti[i], text + sent, safe - sent, 0);
        char *s = ob_utf8_sanitize(text + sent, safe - sent);
        ob_sb_str(&pieces, s);
        free(s);
        sent = safe;
        cut = stopped ? at : len;
    }
    if (!n_toks)
        cut = 0;
    if (cut < sent)
        abort();
    r.text_len = cut;
    r.finish_reason = stopped ? "stop" : "length";
    char *s = ob_utf8_sanitize(text + sent, cut - sent);
    ob_sb_str(&pieces, s);
    free(s);
    ob_oai_srv_chunk_end(&stream, &r, text + sent, cut - sent, true);
    char *whole = ob_utf8_sanitize(text, cut);
    if (strcmp(whole, pieces.p ? pieces.p : "") != 0) {
        fprintf(stderr, "streamed text differs from the whole text\n");
        abort();
    }
    free(whole);
    struct ob_sb b = {0};
    ob_oai_srv_chunk_start(&b, &r);
    check_events(&b);
    check_events(&stream);
    ob_sb_reset(&b);
    ob_oai_srv_body(&b, &r);
    must_parse(b.p, b.len, "a whole answer");
    ob_sb_free(&b);
    ob_sb_free(&stream);
    ob_sb_free(&pieces);
    free(text);
    free(ti);
}

/* JSON values a body may hold: as many as 1b-serve takes with --ctx 2048 */
#define MAX_VALUES (4 * 2048 + 4096)

static void one(const char *body, size_t size, int kind, const char *t)
{
    struct ob_oai_srv_defaults d = {.max_tokens_chat = 64, .max_tokens_completion = 16,
                                    .max_tokens_cap = 64, .temperature = 1.0f, .seed = 0,
                                    .max_values = MAX_VALUES};
    struct ob_oai_srv_req q;
    struct ob_oai_srv_err e;
    if (ob_oai_srv_parse(body, size, kind, &d, &q, &e)) {
        if (e.status < 400 || e.status > 599 || !e.type)
            abort();
        struct ob_sb b = {0};
        ob_oai_srv_error_body(&b, &e);
        must_parse(b.p, b.len, "an error body");
        ob_sb_free(&b);
        ob_oai_srv_free(&q);
        return;
    }
    if (q.max_tokens < 0 || q.max_tokens > 64 || q.top_logprobs < 0 || q.top_logprobs > OB_MAX_TOP ||
        q.n_stop < 0 || q.n_stop > 16 || (kind == OB_OAI_SRV_CHAT && q.n_msgs == 0) ||
        q.prompt_logprobs < -1 || q.prompt_logprobs > OB_MAX_TOP ||
        (q.stream && q.prompt_logprobs >= 0))
        abort();
    for (int i = 0; i < q.n_stop; i++)
        if (!q.stop[i][0])
            abort();
    /* every prompt of a batch (chat: its one) */
    if (kind == OB_OAI_SRV_COMPLETION && (q.n_prompts < 1 || !q.prompts))
        abort();
    for (int k = 0; k < (kind == OB_OAI_SRV_CHAT ? 1 : q.n_prompts); k++) {
        int32_t *ids = NULL, stops[OB_CHAT_MAX_STOPS];
        int n = 0, ns = 0;
        if (ob_oai_srv_tokens_at(&q, k, tok, t, &ids, &n, stops, &ns, &e) != 0)
            continue;
        if (n < 1)
            abort();
        for (int i = 0; i < n; i++)
            if ((uint32_t)ids[i] >= ob_tok_n_vocab(tok))
                abort();
        answers(&q, ids, n);
        free(ids);
    }
    ob_oai_srv_free(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!tok)
        build();
    /* copy so that ASan sees reads past the end of exactly `size` bytes */
    char *body = malloc(size ? size : 1);
    if (!body)
        return 0;
    memcpy(body, data, size);
    one(body, size, OB_OAI_SRV_CHAT, tmpl);
    one(body, size, OB_OAI_SRV_CHAT, NULL);
    one(body, size, OB_OAI_SRV_COMPLETION, NULL);
    struct ob_oai_srv_err e;
    struct ob_oai_srv_tokenize t;
    if (ob_oai_srv_parse_tokenize(body, size, MAX_VALUES, &t, &e) == 0) {
        int32_t *ids;
        size_t n;
        struct ob_chat_opts o = OB_CHAT_OPTS_DEFAULT;
        o.add_generation_prompt = t.add_generation_prompt;
        o.enable_thinking = t.thinking;
        if (t.text ? ob_tok_encode(tok, t.text, strlen(t.text), t.parse_special, &ids, &n) == 0
                   : ob_chat_tokenize(tok, tmpl, t.msgs.v, t.msgs.n, &o, &ids, &n) == 0)
            free(ids);
        ob_oai_srv_tokenize_free(&t);
    }
    int32_t *ids;
    int n;
    if (!ob_oai_srv_parse_detokenize(body, size, MAX_VALUES, ob_tok_n_vocab(tok), &ids, &n, &e)) {
        char *text;
        size_t len;
        if (ob_tok_decode(tok, ids, (size_t)n, &text, &len) == 0)
            free(text);
        free(ids);
    }
    free(body);
    return 0;
}
