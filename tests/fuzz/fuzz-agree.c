/*
 * fuzz-agree.c — libFuzzer harness for the record reader and comparators of 1b-agree and
 * 1b-batchrep (lib/agree.c), and for the reply reader of the URL route (lib/net/oai-client.c) whose
 * output they read.
 *
 * Input: two JSON-lines streams separated by the first NUL byte (no NUL: the same stream
 * twice). Each is read as 1b-agree reads a file; when both read, they are compared by id and
 * by text, with and without gates, and their records are run through the batch report as
 * copies (the second stream's first record as the solo one). The second stream is also
 * handed to the reply reader as the body of an HTTP 200 reply, and its result record read
 * back. Nothing may crash, read out of bounds or leak; a report must always come back for
 * inputs that read.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "agree.h"
#include "net/oai-client.h"

static struct ob_agree_set *read_set(const uint8_t *p, size_t n, const char *name)
{
    /* fmemopen wants at least one byte */
    static const uint8_t nl = '\n';
    FILE *f = fmemopen((void *)(n ? p : &nl), n ? n : 1, "r");
    if (!f)
        return NULL;
    struct ob_agree_set *s = NULL;
    if (ob_agree_read(f, name, &s))
        s = NULL;
    fclose(f);
    return s;
}

static void compare(struct ob_agree_set *a, struct ob_agree_set *b)
{
    struct ob_agree_set *two[2] = {a, b};
    static const struct ob_agree_opts opts[] = {
        {.match = OB_MATCH_ID, .max_abs = -1, .mean_abs = -1, .min_match = -1},
        {.match = OB_MATCH_TEXT, .all_repeats = true, .gated = true, .max_abs = 0.06,
         .mean_abs = 0.005, .min_match = 0.5},
    };
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) {
        cJSON *rep = NULL;
        bool differs;
        if (ob_agree_compare(two, 2, &opts[i], &rep, &differs) == 0) {
            if (!rep)
                abort();                   /* success always comes with a report */
            char *s = cJSON_PrintUnformatted(rep);
            free(s);
        }
        cJSON_Delete(rep);
    }
    if (a->n > 0) {
        cJSON *rep = NULL;
        int states, same;
        if (ob_batchrep_report(a->recs, a->n, 1, b->n ? &b->recs[0] : NULL, OB_MATCH_ID, &rep,
                               &states, &same) == 0 &&
            (!rep || states < 1 || states > a->n || same < 0 || same > a->n))
            abort();
        cJSON_Delete(rep);
    }
    for (int i = 0; i < a->n && i < b->n; i++) {
        struct ob_agree_cmp c;
        ob_agree_cmp_recs(&a->recs[i], &b->recs[i], OB_MATCH_TEXT, &c);
        if (c.common > c.aligned || c.exact > c.n_lp || c.n_lp > c.common ||
            c.aligned > c.len_a || c.aligned > c.len_b)
            abort();
        (void)ob_agree_fingerprint(&a->recs[i], OB_MATCH_ID);
    }
}

static void reply(const uint8_t *p, size_t n)
{
    char *body = malloc(n + 1);
    if (!body)
        return;
    memcpy(body, p, n);
    body[n] = 0;
    struct ob_http_result res = {.status = 200, .body = body, .len = n, .attempts = 1};
    struct ob_oai_cli_req q = {.id = "f", .chat = n % 2, .logprobs = true, .top_logprobs = 3,
                               .max_tokens = 4};
    int err;
    struct ob_oai_cli cli = {.route = "http://fuzz", .model = "m", .model_name = "llama",
                             .sha256 = "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"};
    cJSON *rec = ob_oai_cli_result(&cli, NULL, &q, 0, &res, &err);
    if (rec) {
        char *s = cJSON_PrintUnformatted(rec);
        cJSON *back = s ? cJSON_Parse(s) : NULL;
        struct ob_agree_rec r;
        if (back && ob_agree_rec_from_json(back, &r) == 0)
            ob_agree_rec_free(&r);
        cJSON_Delete(back);
        free(s);
        cJSON_Delete(rec);
    }
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t na = nul ? (size_t)(nul - data) : size;
    const uint8_t *pb = nul ? nul + 1 : data;
    size_t nb = nul ? size - na - 1 : size;
    struct ob_agree_set *a = read_set(data, na, "a"), *b = read_set(pb, nb, "b");
    if (a && b)
        compare(a, b);
    ob_agree_set_free(a);
    ob_agree_set_free(b);
    reply(pb, nb);
    return 0;
}
