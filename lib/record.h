/*
 * record.h — request and result records (record.c; schemas in man/1b.7).
 *
 * Ownership: ob_req_parse fills a struct ob_req whose arrays belong to it (ob_req_free); the
 * cJSON objects returned belong to the caller (cJSON_Delete).
 */
#ifndef OB_RECORD_H
#define OB_RECORD_H

#include "1b.h"
#include "chat.h"
#include "engine.h"
#include "sample.h"

struct ob_req_defaults {
    int max_tokens;
    float temperature;
    uint64_t seed;
    int top_logprobs;
};

struct ob_req {
    char *id;
    int32_t *ids;                  /* the prompt as tokens (BOS / template applied) */
    int n_ids;
    bool templated;                /* from messages */
    struct ob_sampling s;
    int max_tokens, top_logprobs;
    bool logprobs, cache_prompt, thinking;
    char **stop;
    int n_stop;
    int32_t stop_ids[OB_CHAT_MAX_STOPS];
    int n_stop_ids;
};

/* Parse one request record for a model; line names the record when it has no id. */
int ob_req_parse(const cJSON *rec, const struct ob_model *m, const struct ob_req_defaults *d,
                 uint64_t line, struct ob_req *out);
void ob_req_free(struct ob_req *r);

/* A result record: the request's fields, then the generator's; tokens are appended to its
 * "tokens" array with ob_token_json, then ob_result_finish adds the rest. */
cJSON *ob_result_begin(const cJSON *req, const struct ob_req *r, int repeat, const char *route,
                       const char *model_name, const char *sha256);
cJSON *ob_token_json(const struct ob_tok *tok, const struct ob_token_info *ti, bool logprobs);
int ob_result_finish(cJSON *rec, const char *text, size_t text_len, const char *finish_reason,
                     int n_gen, int n_cached, double prefill_s, double decode_s, int n_prefill);
const char *ob_finish_name(int reason);

#endif
