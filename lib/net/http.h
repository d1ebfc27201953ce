/*
 * http.h — the URL route (http.c): an HTTP client on libcurl, and the mapping between 1b's
 * records (1b(7)) and the OpenAI-compatible wire format that 1b-serve, llama-server and vLLM
 * speak.
 *
 * Transport. A struct ob_http runs any number of transfers at once on one curl multi handle:
 * every transfer started before the next call to ob_http_next is on the wire together (this is
 * how 1b-batchrep releases N requests at the same moment and 1b-gen --parallel keeps N in
 * flight). Only connection errors are retried — the connection was refused, or closed or reset
 * before any byte of a reply — up to `retries` more times, pausing backoff_s, then twice that,
 * up to backoff_max_s; a reply of any HTTP status is a result, and so is a timeout.
 *
 * Wire mapping. A request record becomes a POST to URL/v1/chat/completions ("messages") or
 * URL/v1/completions ("prompt"), always with log-probabilities and at least one top
 * alternative asked for (llama-server reports none with zero), cache_prompt false unless the
 * record says otherwise, and "thinking" sent as chat_template_kwargs.enable_thinking. A reply
 * becomes a result record of the same shape as the in-process routes': tokens with their
 * float32 log-probabilities read from the wire's decimals (a double d is the float32 (float)d;
 * a d that is not exactly a float32 is counted in the record's "nonf32_values" and kept as
 * "wire_logprob"), token ids when the server reports them (none: the tokens carry only text
 * and bytes, and are matched by text later), the route (the URL) and the server's model name.
 *
 * Ownership: results and records returned belong to the caller (free functions below; cJSON
 * with cJSON_Delete). Threads: one struct ob_http is used by one thread at a time; distinct
 * clients may run on distinct threads.
 */
#ifndef OB_HTTP_H
#define OB_HTTP_H

#include "1b.h"

/* ---- transport ------------------------------------------------------------------------------- */

struct ob_http_opts {
    double timeout_s;              /* a whole transfer (rounded up to whole ms); 0: none */
    double connect_timeout_s;      /* 0: curl's default */
    int retries;                   /* further attempts after a connection error */
    double backoff_s, backoff_max_s;
    const char *api_key;           /* sent as "Authorization: Bearer KEY"; NULL: none; a key
                                      with a control character (CR, LF) is refused with
                                      OB_EUSAGE by ob_http_new (every tool reads OB_API_KEY) */
};
#define OB_HTTP_OPTS_DEFAULT ((struct ob_http_opts){.timeout_s = 600, .connect_timeout_s = 10, \
                                                    .retries = 5, .backoff_s = 0.2,            \
                                                    .backoff_max_s = 2})

struct ob_http_result {
    void *user;                    /* as given to ob_http_start */
    int err;                       /* 0: a reply arrived (any status); OB_EDEVICE: no connection
                                      (refused, or closed before a reply) after every retry;
                                      OB_EIO: the transfer failed otherwise (a timeout, a
                                      reply too large, a reply cut short: in its headers or
                                      in its body alike) */
    long status;                   /* HTTP status when err is 0 */
    char *body;                    /* the reply, NUL-terminated (never NULL); it may hold
                                      NUL bytes of its own: len is its length */
    size_t len;
    int attempts;
    double seconds;                /* the last attempt, start to end */
    char msg[480];                 /* err != 0: why */
};

struct ob_http;
int ob_http_new(const struct ob_http_opts *o, struct ob_http **out);
void ob_http_free(struct ob_http *h);                 /* aborts transfers still running */
/* Start a transfer: GET when json_body is NULL, else POST it as application/json. */
int ob_http_start(struct ob_http *h, const char *url, const char *json_body, void *user);
int ob_http_pending(const struct ob_http *h);          /* started and not yet returned */
/*
 * Drive the transfers for up to wait_s seconds (< 0: until one finishes). Returns 1 with *out
 * = a finished transfer (ob_http_result_free), 0 when none finished in time or none is
 * pending, < 0 on an internal failure.
 */
int ob_http_next(struct ob_http *h, double wait_s, struct ob_http_result **out);
void ob_http_result_free(struct ob_http_result *r);
/* One transfer, start to end (other pending transfers progress too, but are not returned). */
int ob_http_fetch(struct ob_http *h, const char *url, const char *json_body,
                  struct ob_http_result **out);

/*
 * A server's URL as given to --url, checked before anything is sent (libcurl's URL API):
 * OB_EUSAGE when libcurl cannot parse it, or it is not http:// or https://, or names no host.
 * *base is the server's root for ob_http_join: "http://host:port/" or ".../v1" ->
 * "http://host:port/" (credentials and a query kept, a fragment dropped). *route (unless route
 * is NULL) is the URL as records and messages show it: as given, without "user:password@".
 * Both malloc'd.
 */
int ob_http_base(const char *url, char **base, char **route);
/* base + path ("/v1/models"), malloc'd; NULL when out of memory */
char *ob_http_join(const char *base, const char *path);

/* ---- readiness ------------------------------------------------------------------------------- */

struct ob_oai_ready {
    char *model;                   /* the first model /v1/models lists (malloc'd), or NULL */
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
int ob_oai_wait_ready(const char *base, double wait_s, const char *api_key,
                      struct ob_oai_ready *out);
void ob_oai_ready_free(struct ob_oai_ready *r);

/* ---- requests and results -------------------------------------------------------------------- */

struct ob_oai_params {
    int max_tokens;                /* defaults for records without the field */
    double temperature;
    uint64_t seed;
    int top_logprobs;
    int thinking;                  /* -1: as the record says (not sent when absent); 0, 1 */
    const char *model;             /* "model" of the body; NULL: not sent */
};

struct ob_oai_req {
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
int ob_oai_request(const cJSON *rec, const struct ob_oai_params *p, uint64_t line,
                   struct ob_oai_req *out);
void ob_oai_req_free(struct ob_oai_req *q);

/*
 * The tokens of one reply choice in 1b's record shape ({id?, text, bytes, logprob, bits, top}
 * per token, top lists cut to top_k entries), from either wire form: "logprobs":{"content":
 * [{id?, token, bytes?, logprob, top_logprobs:[...]}]} (chat; llama-server's completions) or
 * "logprobs":{"tokens", "token_logprobs", "top_logprobs":[{text: logprob}]} (OpenAI's and
 * vLLM's completions). A token with a null log-probability (the first token of an echoed
 * prompt) has no logprob. OB_ENOTFOUND when the choice carries no log-probabilities.
 * *nonf32 is incremented for every decimal that is not exactly a float32.
 */
int ob_oai_tokens(const cJSON *choice, int top_k, cJSON **tokens, int64_t *nonf32);

/*
 * The result record of one reply: the request's fields, then id, repeat, route, model,
 * prompt_tokens, tokens, text, finish_reason, completion_tokens, nonf32_values, timing — and
 * "error" (with finish_reason "error") when the reply is unusable. *err is 0, OB_EFORMAT (the
 * server refused the request with a 4xx, the reply is not a completion, or it carries no
 * log-probabilities although they were asked for), OB_EIO (a 5xx, a timeout or a broken
 * transfer) or OB_EDEVICE (unreachable); the reason is in ob_errmsg(). NULL only when out of
 * memory.
 */
cJSON *ob_oai_result(const cJSON *req, const struct ob_oai_req *q, int repeat, const char *route,
                     const struct ob_http_result *res, int *err);

/* The message of an error reply ({"error":{"message":...}} or {"error":"..."}), else the start
 * of the body when it is text, else "(empty reply)" or "(a binary reply of N bytes)"; written
 * to buf as one line of valid UTF-8 (control characters as spaces). */
const char *ob_oai_error_text(const char *body, size_t len, char *buf, size_t size);

#endif
