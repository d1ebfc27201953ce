/*
 * fuzz-jsonl.c — libFuzzer harness for the JSON readers and record writers that need no
 * model: ob_json_parse (strict, and OB_JSON_ANY_BYTES as for a server's reply), the JSON-lines
 * reader over the input as lines, the URL route's mapping of a record to a wire request
 * (ob_oai_cli_request) and of a reply to a result record (ob_oai_cli_result,
 * ob_oai_cli_error_text).
 *
 * Checked for every input; anything else aborts:
 *  - what the strict reader accepts has no string that cJSON could have cut short: it prints
 *    as valid UTF-8 and reads back (strictly) to the same tree; ANY_BYTES accepts it too;
 *  - every line the reader returns is an object, and writing it (ob_jsonl_write) gives one
 *    line that the strict reader accepts, and that prints again the same;
 *  - a wire request made from a record is strict JSON;
 *  - the result record made from the input taken as a server's reply (any status, any bytes)
 *    is strict JSON as cJSON prints it, before ob_jsonl_write's own repair: every writer of
 *    reply text cleans it;
 *  - an error reply's text is one line of valid UTF-8 without control characters;
 *  - ob_json_parse_max takes the text with a bound of exactly the nodes cJSON made of it and
 *    refuses it (OB_ERANGE) with one less;
 *  - ob_json_print's text reads back to the same tree, every number to the same bits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "net/oai-client.h"

/* s must be strict JSON (ob_json_parse without flags); returns the tree */
static cJSON *must_parse(const char *s, size_t n, const char *what)
{
    cJSON *j = NULL;
    if (ob_json_parse(s, n, 0, &j)) {
        fprintf(stderr, "%s is not strict JSON (%s): %.*s\n", what, ob_errmsg(),
                (int)(n < 400 ? n : 400), s);
        abort();
    }
    return j;
}

/* cJSON's own text of a tree is strict JSON and a fixed point: read back and printed again,
 * it is the same text (cJSON_Compare cannot say so: it finds only the first of duplicate keys,
 * and whole numbers we write as raw JSON read back as numbers) */
static void round_trip(const cJSON *j, const char *what)
{
    char *s = cJSON_PrintUnformatted(j);
    if (!s)
        abort();
    cJSON *back = must_parse(s, strlen(s), what);
    char *t = cJSON_PrintUnformatted(back);
    if (!t || strcmp(s, t) != 0) {
        fprintf(stderr, "%s does not read back the same: %.400s\n", what, s);
        abort();
    }
    cJSON_free(t);
    cJSON_Delete(back);
    cJSON_free(s);
}

static int count_nodes(const cJSON *j)
{
    int n = 0;
    for (; j; j = j->next)
        n += 1 + count_nodes(j->child);
    return n;
}

/* the same shape, names and strings, and numbers with the same bits */
static int same_exact(const cJSON *a, const cJSON *b)
{
    for (; a && b; a = a->next, b = b->next) {
        if ((a->type & 0xff) != (b->type & 0xff) || !a->string != !b->string ||
            (a->string && strcmp(a->string, b->string)) ||
            (cJSON_IsString(a) && strcmp(a->valuestring, b->valuestring)) ||
            (cJSON_IsNumber(a) && memcmp(&a->valuedouble, &b->valuedouble, 8)) ||
            !same_exact(a->child, b->child))
            return 0;
    }
    return !a && !b;
}

static void parse(const char *data, size_t size)
{
    cJSON *j = NULL, *k = NULL;
    int strict = ob_json_parse(data, size, 0, &j);
    int lax = ob_json_parse(data, size, OB_JSON_ANY_BYTES, &k);
    if ((strict == 0) != (j != NULL) || (lax == 0) != (k != NULL) || (strict == 0 && lax != 0))
        abort();
    if (j) {
        round_trip(j, "a strictly parsed text");
        if (memchr(data, 0, size))
            abort();               /* a NUL byte let in */
        int n = count_nodes(j);
        cJSON *m = NULL;
        if (ob_json_parse_max(data, size, 0, (size_t)n, &m) || !m)
            abort();               /* refused at its own count */
        cJSON_Delete(m);
        m = NULL;
        if (n > 1 && (ob_json_parse_max(data, size, 0, (size_t)n - 1, &m) != OB_ERANGE || m))
            abort();               /* taken beyond its bound */
        char *s = ob_json_print(j);
        cJSON *back = s ? must_parse(s, strlen(s), "ob_json_print's text") : NULL;
        if (!back || !same_exact(j, back)) {
            fprintf(stderr, "ob_json_print is not exact: %.400s\n", s ? s : "(null)");
            abort();
        }
        cJSON_Delete(back);
        cJSON_free(s);
    }
    cJSON_Delete(j);
    cJSON_Delete(k);
}

static void lines(const char *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f)
        return;
    struct ob_jsonl *in;
    if (ob_jsonl_open(f, "fuzz", &in)) {
        fclose(f);
        return;
    }
    for (int n = 0; n < 64; n++) {
        cJSON *rec = NULL;
        int r = ob_jsonl_next(in, &rec);
        if (r == 0)
            break;
        if (r < 0) {
            if (r != OB_EFORMAT && r != OB_ENOMEM)
                abort();
            continue;
        }
        if (!cJSON_IsObject(rec))
            abort();
        char *line = NULL;
        size_t cap = 0;
        FILE *o = open_memstream(&line, &cap);
        if (!o || ob_jsonl_write(o, rec))
            abort();
        fclose(o);
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n' || memchr(line, '\n', len - 1))
            abort();
        cJSON_Delete(must_parse(line, len - 1, "a written record"));
        round_trip(rec, "a record");
        free(line);
        /* the record as a wire request */
        struct ob_oai_cli_params p = {.max_tokens = 4, .temperature = 0, .seed = 1,
                                      .top_logprobs = 2, .thinking = -1, .model = "m"};
        struct ob_oai_cli_req q;
        if (ob_oai_cli_request(rec, &p, (uint64_t)n + 1, &q) == 0)
            cJSON_Delete(must_parse(q.body, strlen(q.body), "a wire request"));
        ob_oai_cli_req_free(&q);
        cJSON_Delete(rec);
    }
    ob_jsonl_close(in);
    fclose(f);
}

/* the input as a server's reply to a chat and to a completion request */
static void reply(const char *data, size_t size)
{
    static const char *const reqs[] = {
        "{\"id\":\"c\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"top_logprobs\":2}",
        "{\"id\":\"p\",\"prompt\":\"hi\",\"top_logprobs\":3,\"keep\":\"\\u00e9\"}",
    };
    char *body = malloc(size + 1);
    if (!body)
        return;
    memcpy(body, data, size);
    body[size] = 0;
    for (int i = 0; i < 2; i++) {
        cJSON *req = must_parse(reqs[i], strlen(reqs[i]), "a request");
        struct ob_oai_cli_params p = {.max_tokens = 4, .top_logprobs = 2, .thinking = -1};
        struct ob_oai_cli_req q;
        if (ob_oai_cli_request(req, &p, 1, &q))
            abort();
        static const long status[] = {200, 400, 503};
        for (int s = 0; s < 3; s++) {
            struct ob_http_result res = {.status = status[s], .body = body, .len = size,
                                         .attempts = 1};
            int err;
            struct ob_oai_cli cli = {.route = "http://127.0.0.1:1"};
            cJSON *rec = ob_oai_cli_result(&cli, req, &q, 0, &res, &err);
            if (!rec)
                abort();
            char *txt = cJSON_PrintUnformatted(rec);
            if (!txt)
                abort();
            cJSON_Delete(must_parse(txt, strlen(txt), "a result record"));
            cJSON_free(txt);
            cJSON_Delete(rec);
        }
        ob_oai_cli_req_free(&q);
        cJSON_Delete(req);
    }
    char t[256];
    ob_oai_cli_error_text(body, size, t, sizeof t);
    size_t n = strlen(t);
    if (!ob_utf8_valid(t, n))
        abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
            abort();
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* copy so that ASan sees reads past the end of exactly `size` bytes */
    char *d = malloc(size ? size : 1);
    if (!d)
        return 0;
    memcpy(d, data, size);
    parse(d, size);
    lines(d, size);
    reply(d, size);
    free(d);
    return 0;
}
