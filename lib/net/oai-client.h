/*
 * oai-client.h — the client side of the OpenAI-compatible wire format (oai-client.c): the
 * mapping between 1b's records (1b(7)) and what 1b-serve, llama-server and vLLM speak, for
 * the URL route of 1b-gen, 1b-logprobs and 1b-batchrep. Transfers go through http.h.
 *
 * A request record becomes a POST to URL/v1/chat/completions ("messages") or
 * URL/v1/completions ("prompt"), always with log-probabilities and at least one top
 * alternative asked for (llama-server reports none with zero; a record with "logprobs" false
 * gets its tokens from them, without the values), cache_prompt false unless the
 * record says otherwise, and "thinking" sent as chat_template_kwargs.enable_thinking. A reply
 * becomes a result record of the same shape as the in-process routes': tokens with their
 * float32 log-probabilities read from the wire's decimals (a double d is the float32 (float)d;
 * a d that is not exactly a float32 is counted in the record's "nonf32_values" and kept as
 * "wire_logprob"), token ids when the server reports them (none: the tokens carry only text
 * and bytes, and are matched by text later), the route (the URL) and the server's model name.
 *
 * The server's side of the same wire format is oai-server.h.
 *
 * Ownership: results and records returned belong to the caller (free functions below; cJSON
 * with cJSON_Delete). Threads: no state of its own; one object, one thread at a time.
 */
#ifndef OB_OAI_CLIENT_H
#define OB_OAI_CLIENT_H

#include "1b.h"
#include "net/http.h"

/* ---- the client ------------------------------------------------------------------------------ */

/*
 * What every command of the URL route starts with (1b-gen, 1b-logprobs, 1b-batchrep --url):
 * the URL checked and taken apart (ob_http_base), the OB_API_KEY of the environment read and
 * checked, the server waited for (ob_oai_cli_wait_ready, up to o->wait seconds) and a transfer
 * handle with o's timeout and retries that sends the key.
 */
struct ob_oai_cli {
    char *base;                    /* the server's root, for ob_oai_cli_url */
    char *route;                   /* the URL as records and messages show it (no password) */
    char *model;                   /* the first model /v1/models lists, or NULL */
    char *model_name, *sha256;     /* its own name and its file's sha256 when the server
                                      reports them (1b-serve), or NULL */
    char note[320];                /* a readiness warning worth printing, "" when none */
    struct ob_http *http;          /* the transfers */
};
/* OB_EUSAGE for a URL that cannot be used ("--url: why") or a key that cannot be sent;
 * OB_EDEVICE when the server is unreachable or not ready in time; *out NULL then. */
int ob_oai_cli_open(const char *url, const struct ob_server_opts *o, struct ob_oai_cli **out);
void ob_oai_cli_close(struct ob_oai_cli *c);
/* base + path ("/v1/completions"), malloc'd; NULL when out of memory */
char *ob_oai_cli_url(const struct ob_oai_cli *c, const char *path);

/* ---- readiness ------------------------------------------------------------------------------- */

struct ob_oai_cli_ready {
    char *model;                   /* the first model /v1/models lists (malloc'd), or NULL */
    char *name, *sha256;           /* its "name" and "sha256" when it has both (malloc'd), or
                                      NULL */
    char note[320];                /* a warning worth printing, "" when none */
};
/*
 * Wait up to wait_s seconds for the server at base to be ready, polling GET /health (then
 * /v1/health where /health does not exist): 200 is ready; 503 is loading, except that a body
 * reporting "stalled" (an idle llama-server: it has loaded and only waits for work) is ready;
 * a refused connection is a server not up yet. When the time is up and the server answered
 * HTTP but never "ready" — or it has no health route at all — GET /v1/models (which answers
 * as soon as the server is alive, not when it is ready) decides: 200 goes on with a note.
 * OB_EDEVICE: unreachable, or not ready in time. out->model is filled from /v1/models when it
 * answers.
 */
int ob_oai_cli_wait_ready(const char *base, double wait_s, const char *api_key,
                          struct ob_oai_cli_ready *out);
void ob_oai_cli_ready_free(struct ob_oai_cli_ready *r);

/* ---- requests and results -------------------------------------------------------------------- */

struct ob_oai_cli_params {
    int max_tokens;                /* defaults for records without the field */
    double temperature;
    uint64_t seed;
    int top_logprobs;
    int thinking;                  /* -1: as the record says (not sent when absent); 0, 1 */
    const char *model;             /* "model" of the body; NULL: not sent */
};

struct ob_oai_cli_req {
    char *id;                      /* the record's id, or its line number */
    bool chat;                     /* /v1/chat/completions, else /v1/completions */
    const char *path;
    char *body;                    /* JSON text */
    bool logprobs;                 /* the record wants log-probabilities (default true) */
    int top_logprobs;              /* alternatives per token the record asked for */
    int max_tokens;
};
/* A request record -> its wire request. OB_EFORMAT, with the field named, for a record 1b
 * would refuse in process too (no prompt, both prompt and messages, a value out of range, a
 * field that changes the answer and that 1b does not implement). */
int ob_oai_cli_request(const cJSON *rec, const struct ob_oai_cli_params *p, uint64_t line,
                       struct ob_oai_cli_req *out);
void ob_oai_cli_req_free(struct ob_oai_cli_req *q);

/*
 * The tokens of one reply choice in 1b's record shape ({id?, text, bytes, logprob, bits, top}
 * per token, top lists cut to top_k entries), from either wire form: "logprobs":{"content":
 * [{id?, token, bytes?, logprob, top_logprobs:[...]}]} (chat; llama-server's completions) or
 * "logprobs":{"tokens", "token_logprobs", "top_logprobs":[{text: logprob}]} (OpenAI's and
 * vLLM's completions). A token with a null log-probability (the first token of an echoed
 * prompt) has no logprob. OB_ENOTFOUND when the choice carries no log-probabilities.
 * *nonf32 is incremented for every decimal that is not exactly a float32.
 */
int ob_oai_cli_tokens(const cJSON *choice, int top_k, cJSON **tokens, int64_t *nonf32);

/*
 * The result record of one reply, written by the writer of every route (ob_result_record in
 * record.h, so its fields are those of an in-process record, in the same order): the
 * request's fields, then id, repeat, route (c->route), model (the server's name for it, and
 * the sha256 that /v1/models reported for it with its name: 1b-serve's), prompt_tokens,
 * prompt_ids (when the reply has prompt_token_ids: 1b-serve, vLLM), tokens, text,
 * reasoning_content, finish_reason, completion_tokens, cached_tokens (when the usage reports
 * them), nonf32_values (when any value was not float32), timing {request_s, attempts} — and "error" (with finish_reason "error") when the reply is unusable. *err is 0,
 * OB_EFORMAT (the server refused the request with a 4xx, the reply is not a completion, or it
 * carries no log-probabilities although they were asked for), OB_EIO (a 5xx, a timeout or a
 * broken transfer) or OB_EDEVICE (unreachable); the reason is in ob_errmsg(). NULL only when
 * out of memory.
 */
cJSON *ob_oai_cli_result(const struct ob_oai_cli *c, const cJSON *req,
                         const struct ob_oai_cli_req *q, int repeat,
                         const struct ob_http_result *res, int *err);

/* The message of an error reply ({"error":{"message":...}} or {"error":"..."}), else the start
 * of the body when it is text, else "(empty reply)" or "(a binary reply of N bytes)"; written
 * to buf as one line of valid UTF-8 (control characters as spaces). */
const char *ob_oai_cli_error_text(const char *body, size_t len, char *buf, size_t size);

/* ---- teacher-forced scoring (1b-logprobs --url) -------------------------------------------- */

/*
 * Given tokens scored by a server: a POST to /v1/completions with max_tokens 0, temperature 0,
 * cache_prompt false and at least one top alternative asked for, as
 *  - forced: "prompt" the context ids and "forced_tokens" the tokens (1b-serve's extension);
 *  - echo: "prompt" the context ids and the tokens, "echo" true (any server with echo);
 *  - text: "prompt" the text, "echo" true: the server tokenizes it and scores every token.
 */
struct ob_oai_cli_score {
    const char *model;             /* "model" of the body; NULL: not sent */
    const int32_t *prompt;         /* the context */
    int n_prompt;
    const int32_t *forced;         /* the tokens to score */
    int n_forced;
    const char *text;              /* instead of ids: text (prompt and forced are not sent) */
    bool echo;                     /* the echo form rather than forced_tokens */
    int top;                       /* alternatives per token */
};
/* The body (JSON text, free()); NULL when out of memory. */
char *ob_oai_cli_score_body(const struct ob_oai_cli_score *s);
/*
 * The scored tokens of a reply in record shape ({id, text, bytes, logprob, bits, top}, id first;
 * ob_oai_cli_tokens): the reply's last n_forced tokens, each the id forced (one the server reports
 * without an id gets the forced id); with text, every token that carries a log-probability. *sum is
 * the sum of their float32 log-probabilities in double; *model (unless NULL) the server's model
 * name (malloc'd, or NULL; set from a completion even when its tokens are refused); *nonf32 counts
 * the decimals that were not float32. OB_EFORMAT (a 4xx, not a completion, no log-probabilities,
 * other tokens than the forced ones), OB_EIO (a 5xx, a broken transfer) or OB_EDEVICE, with the
 * reason in ob_errmsg().
 */
int ob_oai_cli_score_reply(const struct ob_oai_cli_score *s, const struct ob_http_result *res,
                           cJSON **tokens, double *sum, char **model, int64_t *nonf32);

#endif
