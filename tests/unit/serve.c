/*
 * serve.c — unit tests of 1b-serve's wire layer (lib/net/oai-server.c) that need no server:
 *  - every float32 written as a log-probability reads back to its bits, whether the client
 *    parses the JSON number as a double and rounds it to float32 or parses it as a float;
 *  - ob_oai_srv_stream_safe holds back partial UTF-8 and possible stop strings, and streamed
 *    pieces concatenate to the whole text;
 *  - JSON strings are escaped so that any bytes give valid JSON that decodes to the
 *    sanitized text;
 *  - request bodies: defaults, field values, and the param named by each error.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "net/oai-server.h"
#include "tap.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void floats(void)
{
    /* random bit patterns over the whole finite range, and log-probability-like values */
    long bad_d = 0, bad_f = 0, n = 0;
    char first[80] = "";
    for (int i = 0; i < 300000; i++) {
        uint32_t u = (uint32_t)tap_rand();
        float f;
        if (i % 2) {
            memcpy(&f, &u, 4);
            if (!isfinite(f))
                continue;
        } else {
            f = -(float)((double)(u >> 8) / 16777216.0 * 30.0);   /* [-30, 0] */
        }
        struct ob_sb b = {0};
        ob_sb_lp(&b, f);
        float fd = (float)strtod(b.p, NULL), ff = strtof(b.p, NULL);
        if (bits(fd) != bits(f)) {
            if (!bad_d++)
                snprintf(first, sizeof first, "%08x -> %s", bits(f), b.p);
        }
        bad_f += bits(ff) != bits(f);
        ob_sb_free(&b);
        n++;
    }
    ok(bad_d == 0, "%ld float32 logprobs: float32(strtod(text)) gives the bits back (%ld wrong %s)", n,
       bad_d, first);
    ok(bad_f == 0, "and strtof(text) too (%ld wrong)", bad_f);
    struct ob_sb b = {0};
    ob_sb_lp(&b, -INFINITY);
    ob_sb_lp(&b, -0.031750053f);
    ok(b.p && !strcmp(b.p, "\"-Infinity\"-0.03175005316734314"), "non-finite as a string; %s", b.p);
    ob_sb_free(&b);
}

static void stream_safe(void)
{
    static const struct {
        const char *text;
        size_t from;
        const char *stop[2];
        size_t want;
    } cases[] = {
        {"hello", 0, {NULL}, 5},
        {"caf\xc3", 0, {NULL}, 3},                    /* half of é */
        {"caf\xc3\xa9", 0, {NULL}, 5},
        {"\xe2\x82", 0, {NULL}, 0},                   /* two thirds of € */
        {"a\xe2\x41", 0, {NULL}, 3},                  /* not a prefix any more: ill-formed */
        {"\xf0\x9f\x98", 1, {NULL}, 3},             /* from inside a character */
        {"ab\xff", 0, {NULL}, 3},                     /* ill-formed: nothing to wait for */
        {"Once upon a ti", 0, {"time", NULL}, 12},     /* may become "time" */
        {"Once upon a time", 0, {"time", NULL}, 12},   /* is "time" */
        {"Once upon a tide", 0, {"time", NULL}, 16},
        {"x Lil", 0, {"Lily", " day"}, 2},
        {"x Li", 1, {"Lily", " day"}, 2},
        {"end ", 0, {"Lily", " day"}, 3},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int ns = cases[i].stop[0] ? (cases[i].stop[1] ? 2 : 1) : 0;
        size_t got = ob_oai_srv_stream_safe(cases[i].text, cases[i].from, strlen(cases[i].text),
                                            cases[i].stop, ns);
        if (got != cases[i].want) {
            printf("# case %zu: %zu, want %zu\n", i, got, cases[i].want);
            bad++;
        }
    }
    ok(!bad, "stream_safe: %zu cases (partial UTF-8, stop strings)", sizeof cases / sizeof cases[0]);

    /* random byte strings fed a few bytes at a time: the sanitized pieces = sanitized whole */
    int bad_cat = 0;
    for (int t = 0; t < 20000; t++) {
        unsigned char text[64];
        size_t len = 1 + tap_rand() % 60;
        static const unsigned char alphabet[] = {'a', 'b', 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0,
                                                 0x9f, 0x98, 0x80, 0xff, 0x80, 0};
        for (size_t i = 0; i < len; i++)
            text[i] = alphabet[tap_rand() % sizeof alphabet];
        struct ob_sb cat = {0};
        ob_sb_add(&cat, "", 0);
        size_t sent = 0, have = 0;
        while (have < len) {
            have += 1 + tap_rand() % 4;
            if (have > len)
                have = len;
            size_t safe = ob_oai_srv_stream_safe((const char *)text, sent, have, NULL, 0);
            char *s = ob_utf8_sanitize((const char *)text + sent, safe - sent);
            ob_sb_str(&cat, s);
            free(s);
            sent = safe;
        }
        char *s = ob_utf8_sanitize((const char *)text + sent, len - sent);
        ob_sb_str(&cat, s);
        free(s);
        char *whole = ob_utf8_sanitize((const char *)text, len);
        bad_cat += strcmp(whole, cat.p) != 0;
        free(whole);
        ob_sb_free(&cat);
    }
    ok(!bad_cat, "20000 random texts streamed in pieces read as the whole text (%d differ)", bad_cat);
}

static void json_strings(void)
{
    int bad = 0;
    for (int t = 0; t < 20000; t++) {
        char s[48];
        size_t n = tap_rand() % sizeof s;
        for (size_t i = 0; i < n; i++)
            s[i] = (char)(tap_rand() % 4 ? tap_rand() % 128 : tap_rand() % 256);
        struct ob_sb b = {0};
        ob_sb_json(&b, s, n);
        cJSON *j = cJSON_ParseWithLength(b.p, b.len);
        char *want = ob_utf8_sanitize(s, n);
        bad += !cJSON_IsString(j) || strcmp(j->valuestring, want) != 0;
        free(want);
        cJSON_Delete(j);
        ob_sb_free(&b);
    }
    ok(!bad, "20000 random byte strings: valid JSON strings holding the sanitized text (%d bad)", bad);
}

static void requests(void)
{
    struct ob_oai_srv_defaults d = {.max_tokens_chat = 100, .max_tokens_completion = 16,
                                    .max_tokens_cap = 100, .temperature = 1.0f, .seed = 5};
    struct ob_oai_srv_req q;
    struct ob_oai_srv_err e;
    const char *body = "{\"prompt\":\"hi\"}";
    int r = ob_oai_srv_parse(body, strlen(body), OB_OAI_SRV_COMPLETION, &d, &q, &e);
    ok(r == 0 && q.max_tokens == 16 && q.s.temperature == 1.0f && q.s.seed == 5 && q.s.top_p == 1.0f &&
       !q.logprobs && !q.stream && q.cache_prompt && q.n_prompts == 1 && !strcmp(q.prompts[0].text, "hi"),
       "completion defaults: max_tokens 16, temperature and seed from the server");
    ob_oai_srv_free(&q);
    body = "{\"messages\":[{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
           "{\"type\":\"text\",\"text\":\"b\"}]}],\"logprobs\":true,\"top_logprobs\":4,"
           "\"max_completion_tokens\":7,\"stop\":\"x\",\"chat_template_kwargs\":{\"enable_thinking\":false},"
           "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"seed\":9,\"temperature\":0}";
    r = ob_oai_srv_parse(body, strlen(body), OB_OAI_SRV_CHAT, &d, &q, &e);
    ok(r == 0 && q.n_msgs == 1 && !strcmp(q.msgs[0].role, "system") && !strcmp(q.msgs[0].content, "ab") &&
       q.logprobs && q.top_logprobs == 4 && q.max_tokens == 7 && q.n_stop == 1 && !q.thinking &&
       q.stream && q.include_usage && q.s.seed == 9 && q.s.temperature == 0,
       "chat fields: developer role, content parts, logprobs, stop, thinking, stream options");
    ob_oai_srv_free(&q);
    body = "{\"prompt\":\"x\",\"logprobs\":3,\"echo\":true,\"forced_tokens\":[1,2]}";
    r = ob_oai_srv_parse(body, strlen(body), OB_OAI_SRV_COMPLETION, &d, &q, &e);
    ok(r == 0 && q.logprobs && q.top_logprobs == 3 && q.echo && q.n_forced == 2 && q.forced[1] == 2,
       "legacy logprobs count, echo, forced_tokens");
    ob_oai_srv_free(&q);
    /* one user message */
#define USER "{\"role\":\"user\",\"content\":\"x\"}"
    static const struct { int kind; const char *body, *param; int status; } errs[] = {
        {OB_OAI_SRV_COMPLETION, "{\"prompt\":\"x\",\"max_tokens\":101}", "max_tokens", 400},
        {OB_OAI_SRV_COMPLETION, "{\"prompt\":\"x\",\"n\":3}", "n", 400},
        {OB_OAI_SRV_COMPLETION, "{\"prompt\":\"x\",\"seed\":1.5}", "seed", 400},
        {OB_OAI_SRV_CHAT, "{\"messages\":[" USER ",{\"role\":\"user\"}]}", "messages[1].content",
         400},
        {OB_OAI_SRV_CHAT, "{\"messages\":[" USER "],\"stop\":[1]}", "stop", 400},
        {OB_OAI_SRV_CHAT, "{\"messages\":[" USER "],\"tool_choice\":\"required\"}", "tool_choice",
         400},
        {OB_OAI_SRV_CHAT, "{\"messages\":null}", "messages", 400},
        {OB_OAI_SRV_CHAT, "{\"messages\":[" USER "],\"chat_template_kwargs\":[]}",
         "chat_template_kwargs", 400},
        {OB_OAI_SRV_COMPLETION, "{\"prompt\":\"x\"", "", 400},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        r = ob_oai_srv_parse(errs[i].body, strlen(errs[i].body), errs[i].kind, &d, &q, &e);
        if (r == 0 || e.status != errs[i].status || strcmp(e.param, errs[i].param)) {
            printf("# %s: %d %d '%s' %s\n", errs[i].body, r, e.status, e.param, e.message);
            bad++;
        }
        ob_oai_srv_free(&q);
    }
    ok(!bad, "%zu bad bodies: 400 naming the field", sizeof errs / sizeof errs[0]);
    struct ob_sb b = {0};
    r = ob_oai_srv_parse("{\"prompt\":5}", 12, OB_OAI_SRV_COMPLETION, &d, &q, &e);
    ob_oai_srv_error_body(&b, &e);
    cJSON *j = cJSON_Parse(b.p);
    cJSON *err = cJSON_GetObjectItem(j, "error");
    ok(r && cJSON_IsString(cJSON_GetObjectItem(err, "message")) &&
       !strcmp(cJSON_GetObjectItem(err, "type")->valuestring, "invalid_request_error") &&
       !strcmp(cJSON_GetObjectItem(err, "param")->valuestring, "prompt") &&
       !strcmp(cJSON_GetObjectItem(err, "code")->valuestring, "invalid_type"),
       "the error body: %s", b.p);
    cJSON_Delete(j);
    ob_sb_free(&b);
    ob_oai_srv_free(&q);
}

int main(void)
{
    tap_seed(6000);
    floats();
    stream_safe();
    json_strings();
    requests();
    return tap_done();
}
