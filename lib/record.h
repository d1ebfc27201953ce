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
    int spec;                      /* enum ob_spec (engine.h): "spec", else the command's */
    char **stop;
    int n_stop;
    int32_t stop_ids[OB_CHAT_MAX_STOPS];
    int n_stop_ids;
};

/* ---- request fields: one table for every reader of requests ---------------------------------
 *
 * The fields that shape a generation are read by three parsers: records (ob_req_parse, for
 * 1b-gen and 1b-batchrep in process), 1b-serve's request bodies (oai-server.c) and the URL
 * route, which checks a record before it sends it (oai-client.c). They all read them through
 * this table, so that a value is taken or refused alike whatever the route; man/1b.7 lists
 * the same names, types and ranges. null means absent (OpenAI reads it so). Numbers are read
 * as doubles: a whole number beyond 2^53 is read to a double's precision (2^53 + 1 reads as
 * 2^53, which is why a seed ends at 2^53 - 1: OB_SEED_MAX).
 */
enum ob_req_type { OB_REQ_INT, OB_REQ_NUM, OB_REQ_BOOL };

/* Where a field's value goes. */
struct ob_req_params {
    int max_tokens;
    struct ob_sampling s;          /* temperature, top_k, top_p, min_p, seed */
    int top_logprobs;
    bool logprobs, cache_prompt, thinking;
};

struct ob_req_field {
    const char *name;
    int type;                      /* enum ob_req_type */
    double lo, hi;                 /* OB_REQ_INT, OB_REQ_NUM: the closed range of the value */
    double def;                    /* a record's default (the commands' options may set
                                      others; 1b-serve's differ where OpenAI's do) */
    size_t off;                    /* the member of struct ob_req_params it sets */
    int ctype;                     /* that member's C type (private to record.c) */
};
extern const struct ob_req_field ob_req_fields[];
extern const int ob_req_n_fields;
/* The params a record starts from: every field's default. */
void ob_req_params_default(struct ob_req_params *p);
/* The row of a field, by name; NULL when the table has none. */
const struct ob_req_field *ob_req_field(const char *name);
/* What a value of the field must be: "an integer in [0, 20]", "a number in [0, 1]", "true or
 * false" (into buf, which it returns). */
const char *ob_req_field_want(const struct ob_req_field *f, char *buf, size_t size);
/* Read one field of object o into p: 1 when it is absent (or null), 0 when read, OB_EFORMAT
 * when its JSON type is wrong, OB_ERANGE when it is of its type but out of range (or not a
 * whole number for OB_REQ_INT). The caller words the message (ob_req_field_want). */
int ob_req_field_read(const cJSON *o, const struct ob_req_field *f, struct ob_req_params *p);
/* Every field of the table that o holds, in the table's order; on the first bad one
 * OB_EFORMAT "field 'NAME' must be WANT" (*bad, unless NULL, names the row). */
int ob_req_params_read(const cJSON *o, struct ob_req_params *p, const struct ob_req_field **bad);

/* "chat_template_kwargs": {"enable_thinking": bool} (llama-server's and vLLM's name for
 * "thinking"; it wins over "thinking"): into p->thinking. 1 when absent (or null), 0 when read,
 * OB_EFORMAT naming the field in *param ("chat_template_kwargs" or
 * "chat_template_kwargs.enable_thinking") when it is not of its type. Other keys are ignored. */
int ob_req_kwargs(const cJSON *o, struct ob_req_params *p, const char **param);

/* "spec" (a 1b extension): speculative decoding for this request, "ngram" or "off" (the
 * answer is the same either way; only its speed differs). 1 when absent (or null), 0 when
 * read into *spec (enum ob_spec), OB_EFORMAT "field 'spec' must be ..." otherwise
 * (*wrong_type: not even a string). */
int ob_req_spec(const cJSON *o, int *spec, bool *wrong_type);

/* Fields that would change the answer and that 1b does not implement (n > 1, penalties,
 * logit_bias, tools, response formats other than text, suffix, ...): they are refused by name
 * rather than ignored, unless they hold a neutral value (n 1, logit_bias {}, tool_choice
 * "none", response_format {"type":"text"}). The first such field of o, or NULL; *wrong_type
 * when a number field does not even hold a number; *why (unless NULL) what would be taken, to
 * end the message: " (only 1)", " (no tools)", or "". */
const char *ob_req_unsupported(const cJSON *o, bool *wrong_type, const char **why);

/* The same refusals in the wording of records (OB_EFORMAT "field 'K' is not supported ..."),
 * and what only 1b-serve's protocol has: echo true, prompt_logprobs (not null). 0 if none. */
int ob_req_refuse_record(const cJSON *rec);

/* "stop": a string or an array of at most OB_REQ_MAX_STOP non-empty strings. *n strings of o
 * (pointing into it) in out; 1 when absent (or null); OB_EFORMAT "field 'stop' ..." when it is
 * not a string or an array (or is too long: *wrong_type false), or holds anything but
 * non-empty strings. */
#define OB_REQ_MAX_STOP 16
int ob_req_stop(const cJSON *o, const char *out[OB_REQ_MAX_STOP], int *n, bool *wrong_type);

/* "messages", as OpenAI sends them: a non-empty array of {role, content[, reasoning_content]};
 * role system, developer (read as system), user or assistant; content a string or an array of
 * {"type":"text","text":...} parts (joined); no tool calls. v[] points into arr and into
 * owned[] (the joined contents), which m owns (ob_req_msgs_free). A message 1b cannot take:
 * OB_EFORMAT with its place in param ("messages[2].content") and a message that names it;
 * *wrong_type when a value is not of its JSON type. OB_ENOMEM when out of memory. */
struct ob_req_msgs {
    struct ob_chat_msg *v;
    size_t n;
    char **owned;
    size_t n_owned;
};
int ob_req_messages(const cJSON *arr, struct ob_req_msgs *m, char *param, size_t param_size,
                    bool *wrong_type);
void ob_req_msgs_free(struct ob_req_msgs *m);

/* Parse one request record for a model; line names the record when it has no id. */
int ob_req_parse(const cJSON *rec, const struct ob_model *m, const struct ob_req_defaults *d,
                 uint64_t line, struct ob_req *out);
void ob_req_free(struct ob_req *r);

/* Put item into object o under key as its first member (records start with "id"); o takes
 * item. */
void ob_json_add_first(cJSON *o, const char *key, cJSON *item);

/*
 * ---- result records: one writer for every route ---------------------------------------------
 *
 * What a route knows of one result. The in-process routes (1b-gen's engine) and the server
 * route (oai-client.c) fill it and ob_result_record writes it, so that the records of both
 * have the same fields in the same order: the request's fields, then id (first), repeat,
 * route, model {name, sha256}, prompt_tokens, prompt_ids, tokens, text, reasoning_content,
 * finish_reason, completion_tokens, cached_tokens, nonf32_values, timing, error. A field the
 * route does not know is left out (a server may report no sha256, and reports no prompt ids;
 * nonf32_values, the count of the wire's decimals that were not float32, appears only when
 * there were some).
 */
struct ob_result {
    const char *id;
    int repeat;
    const char *route;
    const char *model;             /* the model's name; NULL: no "model" */
    const char *sha256;            /* NULL: not known */
    int prompt_tokens;             /* < 0: not known */
    const int32_t *prompt_ids;     /* NULL: not known */
    int n_prompt_ids;
    cJSON *tokens;                 /* taken (ob_result_record owns it then); NULL: [] */
    const char *text;              /* text_len bytes, written as UTF-8 (U+FFFD for what is
                                      not); NULL: no "text" */
    size_t text_len;
    const char *reasoning;         /* NULL or "": no "reasoning_content" */
    const char *finish_reason;     /* NULL: none (but "error" when error is set) */
    int completion_tokens;         /* < 0: none */
    int cached_tokens;             /* < 0: not known */
    int64_t nonf32;                /* the wire's decimals that were not float32 (a server
                                      route); 0: no "nonf32_values" */
    cJSON *timing;                 /* taken; NULL: none */
    const char *error;             /* a failed request: why (finish_reason is then "error") */
};
/* The record (NULL when out of memory); r->tokens and r->timing are taken either way. */
cJSON *ob_result_record(const cJSON *req, struct ob_result *r);
/* The in-process routes' timing: {prefill_s, decode_s, prefill_tps, decode_tps}. */
cJSON *ob_result_timing(double prefill_s, double decode_s, int n_prefill, int n_gen);
cJSON *ob_token_json(const struct ob_tok *tok, const struct ob_token_info *ti, bool logprobs);
const char *ob_finish_name(int reason);

/* A record's id as text (malloc'd; NULL when out of memory): its "id" (a string, or a number
 * as 1b writes numbers), else its line number. */
char *ob_record_id(const cJSON *rec, uint64_t line);

/* What teacher-forced scoring takes from a result record (1b-logprobs; the tokens read by the
 * reader of every result record, agree.h). */
struct ob_result_forced {
    char *id;                      /* ob_record_id */
    int32_t *prompt;               /* the context: prompt_ids, else the prompt or messages
                                      tokenized again (with m) */
    int n_prompt;
    int32_t *forced;               /* the tokens' ids, or those their text has in m's
                                      vocabulary (ids_from_text) */
    int n_forced;
    int top;                       /* alternatives per token: the caller's top when >= 0, else
                                      the record's top_logprobs, else as many as its tokens
                                      carry (at most OB_MAX_TOP) */
    bool ids_from_text;
};
/* rec -> *out (ob_result_forced_free whatever the result). m may be NULL (a server's scoring
 * without a tokenizer): a record that needs one is refused with OB_EUSAGE naming -m MODEL.
 * OB_EFORMAT / OB_ERANGE naming the field: a failed request ("error"), no tokens, ids that are
 * not m's, a token whose text is no single token, a bad top_logprobs. */
int ob_result_forced(const cJSON *rec, uint64_t line, struct ob_model *m, int top,
                     struct ob_result_forced *out);
void ob_result_forced_free(struct ob_result_forced *f);

#endif
