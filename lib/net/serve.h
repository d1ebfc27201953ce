/*
 * serve.h — the HTTP server of 1b-serve (serve.c): libmicrohttpd with a pool of HTTP threads
 * in front of one continuous-batching engine, OpenAI-compatible endpoints (oai-server.h) and the
 * operational ones (/health, /livez, /metrics, /tokenize, /detokenize). man/1b-serve.1
 * documents every endpoint and status.
 *
 * Threads: HTTP threads (libmicrohttpd's pool) read requests, answer the quick endpoints, cancel
 * the jobs of clients that went away and format answers; they never parse or tokenize a body, so
 * that /health and /livez answer at once whatever else comes in. Prep threads (as many as HTTP
 * threads) parse and tokenize bodies and submit engine jobs, the request's connection suspended
 * meanwhile. One driver thread, started by ob_serve_attach, steps the engine (ob_engine_step in a
 * loop, ob_engine_wait when idle; the engine's submit, cancel and stats are safe from any thread,
 * engine.h) and hands tokens and finishes to the HTTP threads under the server's lock, resuming the
 * suspended connection that waits for them. The driver also watches the sockets of waiting
 * connections, so that a client that goes away cancels its sequence and frees its slot, and cancels
 * requests that pass their time limit. A guard thread holds every connection to its deadlines: the
 * request's headers must arrive in full within header_timeout of the connection (or of the request
 * line, on a connection kept alive), its body within body_timeout of the headers; it shuts down
 * (shutdown(2)) the socket of a connection past its deadline, whatever the client's pace
 * (libmicrohttpd's own timeout is an idle timeout, which one byte a second keeps resetting).
 *
 * Memory: cJSON builds the whole tree of a body before it is read, about 80 bytes a value, so
 * a body may hold at most max_values(ctx) JSON values (see serve.c), counted by
 * ob_json_parse_max in its pass over the bytes before cJSON allocates anything: a 4 MiB body
 * of two million token ids is refused (413) having cost its own bytes, not hundreds of MiB.
 *
 * Life cycle: ob_serve_new listens at once (/health answers 503 "loading"); the caller loads
 * the model and builds the context and engine, then ob_serve_attach makes the server ready.
 * To stop: ob_serve_quiesce (no new connections, /health 503 "draining"), wait while
 * ob_serve_in_flight > 0 for as long as the grace period allows, ob_serve_cancel_all, then
 * ob_serve_free, which closes at once every connection that is not being answered (a client
 * still sending its request would only get 503). The library logs through params.log only
 * (one JSON object per call, no newline); it never prints.
 *
 * Ownership: the model, context and engine belong to the caller and must outlive the server
 * (free the server first). ob_serve_quiesce, ob_serve_in_flight and ob_serve_cancel_all may be
 * called from any thread; the rest from the thread that created the server.
 */
#ifndef OB_SERVE_H
#define OB_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "1b.h"
#include "engine.h"

struct ob_serve_params {
    const char *host;              /* address to listen on: "127.0.0.1", "::", "0.0.0.0" */
    int port;                      /* 0: any free port (ob_serve_port tells which) */
    int http_threads;              /* libmicrohttpd thread pool */
    int queue;                     /* requests that may wait for a slot beyond --parallel */
    size_t max_body;               /* bytes of a request body; more: 413 */
    int max_tokens_cap;            /* larger max_tokens: 400; also the chat default */
    int max_prompts;               /* prompts one completion request may carry; more: 400 */
    int max_request_tokens;        /* prompt tokens of one request, all prompts; more: 400;
                                    * 0: the larger of 65536 and the context length */
    double timeout;                /* seconds per generation request; 0: none */
    int idle_timeout;              /* seconds a connection may stay silent; 0: none */
    double header_timeout;         /* seconds for a request's headers to arrive in full; 0: none */
    double body_timeout;           /* seconds for its body, from the end of its headers; 0: none */
    int max_connections;           /* open connections in all; more wait in the listen backlog */
    int max_per_client;            /* open connections from one client address; 0: no limit */
    const char *api_key;           /* Bearer key for everything but /health and /livez */
    const char *alias;             /* the model id; NULL: the model file's name */
    float temperature;             /* for requests that set none */
    uint64_t seed;                 /* for requests that set none */
    void (*log)(void *user, const char *line);
    void *log_user;
};

struct ob_serve;
int ob_serve_new(const struct ob_serve_params *p, struct ob_serve **out);
int ob_serve_port(const struct ob_serve *s);
/* Serve this model with this engine (parallel: the engine's live sequences). */
int ob_serve_attach(struct ob_serve *s, struct ob_model *m, struct ob_ctx *ctx,
                    struct ob_engine *e, int parallel);
void ob_serve_quiesce(struct ob_serve *s);
/* generation requests admitted (their jobs submitted) and not yet answered in full */
int ob_serve_in_flight(struct ob_serve *s);
/* cancel every running generation: its client gets 503 (or an error event in a stream) */
void ob_serve_cancel_all(struct ob_serve *s);
/* Stop: closes the connections that are not being answered, waits up to `linger` seconds for
 * answers on their way out, closes every connection, stops the threads. */
void ob_serve_free(struct ob_serve *s, double linger);

#endif
