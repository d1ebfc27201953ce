/*
 * serve.c — 1b-serve's HTTP layer: libmicrohttpd (MHD) in front of the continuous-batching
 * engine (see serve.h for the threads and the life cycle, oai-server.h for the wire shapes).
 *
 * One connection (struct sconn, MHD's socket context) lives from accept to close and carries
 * the deadline the guard thread enforces: its first request's headers within header_timeout
 * of the accept, a later request's within header_timeout of its request line (and within
 * idle_timeout + header_timeout of the answer before it), a body within body_timeout of its
 * headers; none while the request is being answered.
 *
 * One request (struct sreq) goes through:
 *   1. MHD's first call of the access handler (headers only): framing (Content-Length,
 *      Transfer-Encoding, Expect), route, method, API key, size, readiness and the queue are
 *      checked; a refusal is answered at once.
 *   2. body calls: the body is collected (at most max_body bytes).
 *   3. the last call: a body to parse is queued for a prep thread and the connection
 *      suspended. The prep thread parses it (ob_oai_srv_parse, with cJSON's allocations bounded),
 *      tokenizes it, checks it against the context, admits it (at most parallel + queue
 *      generation requests at a time) and submits its job to the engine, or makes the answer
 *      of /tokenize and /detokenize; then it resumes the connection. Resumed, the handler
 *      answers a refusal, or (non-streaming) suspends again until the job is done, or
 *      (streaming) queues a chunked response whose reader suspends whenever it has nothing to
 *      send.
 *   4. on the driver thread, the engine's callbacks append tokens (on_token) and the finish
 *      (on_finish) to the sreq under the server lock and resume its connection.
 *   5. resumed, MHD calls the handler (non-streaming: the whole body is formatted and sent)
 *      or the reader (streaming: the next chunks) again.
 *   6. MHD's request-completed callback logs the request and, if its job still runs (the
 *      client went away), cancels it.
 * An sreq is freed when MHD (step 6), the prep thread and the engine (the job's finish) are
 * all done with it.
 *
 * Echo with logprobs (/v1/completions) and prompt_logprobs: the prompt's tokens are scored
 * first by teacher forcing (a job whose prompt is the first token and whose forced tokens are
 * the rest), then the generation job runs on the whole prompt (which the prompt cache then
 * mostly holds).
 *
 * Locking: one server mutex (mu) guards every sreq field the driver or a prep thread touches,
 * the registry of open requests, the prep queue and the counters. The engine's own lock is
 * taken inside ob_engine_* calls, some of which are made with mu held; the engine never calls
 * back with its lock held, so the order is always mu, then the engine's. The connection table
 * has its own mutex (cmu), never held while taking another.
 *
 * The engine's submit, cancel, stats and wake are safe from any thread (engine.h): an HTTP
 * thread cancels the job of a request whose client went away, /metrics reads the engine's
 * counters, a prep thread submits. Only the driver steps the engine.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "1b.h"
#include "engine.h"
#include "net/oai-server.h"
#include "sample.h"
#include "net/serve.h"
#include "tok.h"

/* ---- endpoints ------------------------------------------------------------------------------- */

struct sreq;
static enum MHD_Result do_health(struct sreq *r, const char *arg);
static enum MHD_Result do_livez(struct sreq *r, const char *arg);
static enum MHD_Result do_metrics(struct sreq *r, const char *arg);
static enum MHD_Result do_models(struct sreq *r, const char *arg);
static enum MHD_Result do_model(struct sreq *r, const char *arg);
static enum MHD_Result do_tokenizer_info(struct sreq *r, const char *arg);
static enum MHD_Result prepared(struct sreq *r, const char *arg);
static void prep_generate(struct sreq *r);
static void prep_tokenize(struct sreq *r);
static void prep_detokenize(struct sreq *r);

/* What the server answers: each endpoint's paths, what it takes and needs, and its handler,
 * called once the whole request is in (with what stands for the {NAME} of its path). An
 * endpoint with a prep function has its body parsed (and a generation's jobs submitted) on a
 * prep thread first, and answers through prepared. The generation endpoints come first: their
 * index is that of their histograms. The last entry answers every other path (404). */
static const struct endpoint {
    const char *path, *alias;      /* the alias is the path without /v1, as llama-server has;
                                    * a path ending in {NAME} takes any rest after its prefix */
    bool post;                     /* POST, else GET (and HEAD) */
    bool open;                     /* no API key needed */
    bool model;                    /* needs the model loaded (else 503 while it loads) */
    bool gen;                      /* a generation: counted against the queue, refused while
                                    * draining, timed in the histograms */
    int kind;                      /* a generation's request kind (OB_OAI_SRV_*) */
    const char *id;                /* the prefix of its requests' ids (NULL: "req") */
    enum MHD_Result (*answer)(struct sreq *r, const char *arg);
    void (*prep)(struct sreq *r);
} eps[] = {
    {.path = "/v1/chat/completions", .alias = "/chat/completions", .post = true, .model = true,
     .gen = true, .kind = OB_OAI_SRV_CHAT, .id = "chatcmpl", .answer = prepared,
     .prep = prep_generate},
    {.path = "/v1/completions", .alias = "/completions", .post = true, .model = true,
     .gen = true, .kind = OB_OAI_SRV_COMPLETION, .id = "cmpl", .answer = prepared,
     .prep = prep_generate},
    {.path = "/v1/models", .alias = "/models", .model = true, .answer = do_models},
    {.path = "/v1/models/{model}", .alias = "/models/{model}", .model = true, .answer = do_model},
    {.path = "/health", .alias = "/v1/health", .open = true, .answer = do_health},
    {.path = "/livez", .open = true, .answer = do_livez},
    {.path = "/metrics", .answer = do_metrics},
    {.path = "/tokenize", .post = true, .model = true, .answer = prepared, .prep = prep_tokenize},
    {.path = "/detokenize", .post = true, .model = true, .answer = prepared,
     .prep = prep_detokenize},
    {.path = "/tokenizer_info", .model = true, .answer = do_tokenizer_info},
    {.path = "other"},
};
enum { EP_N = sizeof eps / sizeof *eps, EP_OTHER = EP_N - 1, EP_GEN = 2 };

/* does url match pattern (a path, or a prefix followed by {NAME})? *arg: the rest */
static bool path_is(const char *url, const char *pattern, const char **arg)
{
    if (!pattern)
        return false;
    const char *brace = strchr(pattern, '{');
    if (!brace)
        return !strcmp(url, pattern);
    if (strncmp(url, pattern, (size_t)(brace - pattern)))
        return false;
    *arg = url + (brace - pattern);
    return true;
}

/* The endpoint of a URL (as MHD gives it: percent-decoded, without the query); *arg: what
 * stands for the {NAME} of its path, if it has one. */
static int route(const char *url, const char **arg)
{
    const char *none;
    if (!arg)
        arg = &none;
    *arg = "";
    /* the absolute form a client may send (GET http://host/health): its path */
    if (!strncasecmp(url, "http://", 7) || !strncasecmp(url, "https://", 8)) {
        const char *p = strchr(strstr(url, "//") + 2, '/');
        url = p ? p : "/";
    }
    for (int i = 0; i < EP_OTHER; i++)
        if (path_is(url, eps[i].path, arg) || path_is(url, eps[i].alias, arg))
            return i;
    return EP_OTHER;
}

/* ---- state --------------------------------------------------------------------------------- */

enum phase { P_NONE, P_SCORE, P_GEN, P_DONE };
enum why { W_NONE, W_CLIENT, W_TIMEOUT, W_SHUTDOWN };
enum prep { PREP_NONE, PREP_QUEUED, PREP_DONE };

/* A connection's phase, for its deadline: waiting for a request (none yet, or between two),
 * reading a request's headers (its request line is in), reading its body, answering it. */
enum cphase { C_WAIT, C_HEAD, C_BODY, C_BUSY };
static const char *const cphase_name[] = {"wait", "headers", "body", "answer"};

/* one TCP connection (MHD's socket context); every field under cmu */
struct sconn {
    struct sconn *prev, *next;
    int fd;                        /* valid until MHD's CLOSED notification unlinks us */
    int phase;                     /* enum cphase */
    double t0;                     /* accepted (CLOCK_MONOTONIC seconds) */
    double deadline;               /* shut down after this; 0: no deadline */
    int cut;                       /* shut down: 1 + the phase past its deadline, or -1 when
                                    * the server stopped; 0: not */
    char remote[64];
};

/* latency histogram: fixed buckets in seconds */
static const double buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                                 120, 300};
#define NB (sizeof buckets / sizeof buckets[0])
struct hist {
    uint64_t n[NB + 1];
    double sum;
    uint64_t count;
};

/* One prompt of a generation request and its job chain: a completion request may carry
 * several prompts, each its own sequence in the engine and its own choice in the answer (chat
 * has one). Fields under the server's mu. */
struct spart {
    struct sreq *r;
    int index;                     /* the choice's index: the prompt's place in "prompt" */
    int32_t *ids;
    int n_ids;
    int phase;                     /* enum phase */
    bool job;                      /* a job of this part is in the engine */
    bool counted;                  /* holds one of the parallel + queue places */
    uint64_t handle;
    struct ob_token_info *ptoks, *toks;   /* prompt scores (echo), generated tokens */
    int n_ptoks, n_toks;
    size_t cap_ptoks, cap_toks;
    struct ob_sb text;             /* generated bytes */
    int fin_reason, n_cached, n_gen;
    size_t fin_text_len;
    /* streaming: this choice's chunks formatted so far */
    int n_sent;
    size_t tok_bytes;              /* text_offset of the next token (echoed prompt included) */
    size_t gen_bytes, text_sent;   /* generated bytes formatted so far, and streamed */
    bool sent_start, sent_end;
};

struct sreq {
    struct ob_serve *s;
    struct MHD_Connection *conn;
    struct sconn *sc;              /* its connection; NULL if untracked; MHD threads only */
    int fd;
    struct sreq *prev, *next;      /* the registry of open requests */
    int ep;
    char method[12], path[96], remote[64], id[48];
    double t0, t_first, t_done;
    /* body */
    struct ob_sb body;             /* its capacity is what body_res accounts for */
    size_t body_seen;
    size_t body_want;              /* its Content-Length */
    size_t body_res;               /* bytes of the server's body budget it holds (under mu) */
    bool too_large;
    bool too_busy;                 /* over the server's body budget: 503 once it is read */
    bool must_close;               /* the request's framing is bad: close after the answer */
    /* preparation on a prep thread (prep, perr_set under mu) */
    int prep;                      /* enum prep */
    struct sreq *prep_next;        /* the prep queue */
    bool perr_set;                 /* prepared: answer with perr */
    struct ob_oai_srv_err perr;
    struct ob_sb pout;             /* prepared: the answer of /tokenize, /detokenize */
    /* generation */
    bool gen;                      /* a generation endpoint */
    bool admitted;                 /* its jobs were submitted (counted by ob_serve_in_flight) */
    struct ob_oai_srv_req q;
    struct spart *parts;           /* one per prompt, in order */
    int n_parts;
    int n_live;                    /* parts whose job chain has not ended */
    int n_ids;                     /* prompt tokens of all parts */
    int32_t stop_ids[OB_CHAT_MAX_STOPS];
    int n_stop_ids;
    int phase;                     /* P_NONE, then P_GEN while a chain runs, then P_DONE */
    int why;                       /* why it was cancelled */
    double deadline;
    bool oom;
    int fin_reason;                /* of the whole: an error or cancellation of any part wins */
    char fin_error[256];
    bool suspended;                /* its MHD connection is suspended, waiting for us */
    bool gone;                     /* MHD has completed the request */
    int refs;
    /* streaming (read and written by the connection's MHD thread, under mu) */
    bool stream;
    struct ob_sb out;
    size_t out_off;
    bool sent_end;                 /* the stream's end (or its error) is formatted */
    /* the answer */
    int status;
    bool answered;
};

struct ob_serve {
    struct ob_serve_params p;
    struct MHD_Daemon *d;
    int port;
    MHD_socket listen_fd;
    bool quiesced;
    /* the model, once attached */
    struct ob_model *m;
    struct ob_ctx *ctx;
    struct ob_engine *e;
    const struct ob_tok *tok;
    const char *tmpl;
    int parallel, n_ctx;
    int max_request_tokens;        /* prompt tokens of one request, all its prompts together */
    char model_id[256], fingerprint[40];
    const char *sha256, *model_name, *route;
    struct ob_oai_srv_defaults defaults;
    /* the driver */
    pthread_t driver;
    bool driver_started, driver_stop;
    /* prep threads: their queue, stop flag and condition are under mu */
    pthread_t *prep_th;
    int n_prep;
    pthread_cond_t prep_cond;
    struct sreq *pq_head, *pq_tail;
    bool prep_stop;
    /* connections and the guard thread (under cmu) */
    pthread_mutex_t cmu;
    pthread_cond_t guard_cond;
    pthread_t guard;
    bool guard_started, guard_stop;
    struct sconn *conns;
    int n_conns;
    uint64_t cut[4];               /* connections shut down, by phase */
    /* everything below under mu */
    pthread_mutex_t mu;
    bool ready, draining;
    struct sreq *head;
    int n_open_gen;                /* generation requests not yet completed by MHD */
    int n_active;                  /* admitted generation requests whose jobs have not finished */
    uint64_t seq;
    char boot[12];
    uint64_t http[EP_N][600];      /* answers by endpoint and status */
    struct hist duration[EP_GEN], ttft[EP_GEN];   /* by generation endpoint */
    uint64_t rejected_queue, cancelled_client, timed_out;
    size_t body_mem;               /* bytes reserved for bodies being read or parsed */
    pthread_mutex_t lmu;           /* guards the two below: MHD may log with mu held */
    char mhd_msg[256];             /* MHD's last log message (for a failed start) */
    struct {                       /* MHD's recent messages, logged at most once a second */
        char msg[128];
        double t;
        uint64_t quiet;            /* times it came since it was last logged */
    } mhd_recent[8];
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void slog(struct ob_serve *s, struct ob_sb *b)
{
    if (s->p.log && b->p && !b->oom)
        s->p.log(s->p.log_user, b->p);
}

static void logf_event(struct ob_serve *s, const char *event, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct ob_sb b = {0};
    ob_sb_fmt(&b, "{\"event\":\"%s\",\"message\":", event);
    ob_sb_json(&b, msg, strlen(msg));
    ob_sb_str(&b, "}");
    slog(s, &b);
    ob_sb_free(&b);
}

/* Set by the MHD thread that closes the connection of a client that went away (answer,
 * reader: client_gone), just before it returns to MHD. MHD's message about that close (that
 * the application reported an error) is then no error of the server's and is not logged: the
 * request's own log line says client_abort. */
static _Thread_local bool quiet_close;

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    struct ob_serve *s = cls;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = 0;
    bool expected = quiet_close && (!strncmp(msg, "Application reported internal error", 35) ||
                                    strstr(msg, "(application error generating response)"));
    quiet_close = false;
    if (expected)
        return;
    /* the same message within a second of its last log line is only counted: a flood of
     * refused or broken connections must not become a flood of log lines */
    double t = now();
    uint64_t quiet = 0;
    pthread_mutex_lock(&s->lmu);
    memcpy(s->mhd_msg, msg, n + 1);
    int slot = 0;
    for (int i = 0; i < 8; i++) {
        if (!strncmp(s->mhd_recent[i].msg, msg, sizeof s->mhd_recent[i].msg - 1)) {
            slot = i;
            break;
        }
        if (s->mhd_recent[i].t < s->mhd_recent[slot].t)
            slot = i;              /* else the oldest one's place */
    }
    if (strncmp(s->mhd_recent[slot].msg, msg, sizeof s->mhd_recent[slot].msg - 1)) {
        snprintf(s->mhd_recent[slot].msg, sizeof s->mhd_recent[slot].msg, "%s", msg);
        s->mhd_recent[slot].t = 0;
        s->mhd_recent[slot].quiet = 0;
    } else if (t - s->mhd_recent[slot].t < 1) {
        s->mhd_recent[slot].quiet++;
        pthread_mutex_unlock(&s->lmu);
        return;
    }
    quiet = s->mhd_recent[slot].quiet;
    s->mhd_recent[slot].t = t;
    s->mhd_recent[slot].quiet = 0;
    pthread_mutex_unlock(&s->lmu);
    if (quiet)
        logf_event(s, "http", "%s (and %llu times more in the second before)", msg,
                   (unsigned long long)quiet);
    else
        logf_event(s, "http", "%s", msg);
}

static void hist_add(struct hist *h, double v)
{
    size_t i = 0;
    while (i < NB && v > buckets[i])
        i++;
    h->n[i]++;
    h->sum += v;
    h->count++;
}

/* the client's address as text ("" if unknown) */
static void client_address(struct MHD_Connection *c, char *buf, size_t n)
{
    buf[0] = 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)n);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)n);
}

/* ---- connections and their deadlines --------------------------------------------------------- */

/* MHD's connection notifications (the connection's MHD thread): track it from accept to
 * close. MHD calls CLOSED before it closes the socket, so the guard, which shuts sockets down
 * only under cmu, never touches a descriptor that may have been reused. */
static void notify_conn(void *cls, struct MHD_Connection *c, void **sctx,
                        enum MHD_ConnectionNotificationCode code)
{
    struct ob_serve *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct sconn *k = calloc(1, sizeof *k);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!k || !ci) {
            free(k);
            return;                /* untracked: MHD's idle timeout still applies */
        }
        k->fd = ci->connect_fd;
        client_address(c, k->remote, sizeof k->remote);
        k->t0 = now();
        k->phase = C_WAIT;
        k->deadline = s->p.header_timeout > 0 ? k->t0 + s->p.header_timeout : 0;
        pthread_mutex_lock(&s->cmu);
        k->next = s->conns;
        if (s->conns)
            s->conns->prev = k;
        s->conns = k;
        s->n_conns++;
        pthread_mutex_unlock(&s->cmu);
        *sctx = k;
        return;
    }
    struct sconn *k = *sctx;
    if (!k)
        return;
    pthread_mutex_lock(&s->cmu);
    if (k->prev)
        k->prev->next = k->next;
    else
        s->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    s->n_conns--;
    pthread_mutex_unlock(&s->cmu);
    free(k);
    *sctx = NULL;
}

/* A request line has arrived (MHD's URI log callback, before the headers): its headers are
 * due within header_timeout. Returns no request context (the handler makes its own). */
static void *request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct ob_serve *s = cls;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct sconn *k = ci ? ci->socket_context : NULL;
    if (!k)
        return NULL;
    pthread_mutex_lock(&s->cmu);
    k->phase = C_HEAD;
    if (s->p.header_timeout > 0) {
        double d = now() + s->p.header_timeout;
        if (!k->deadline || d < k->deadline)
            k->deadline = d;
    }
    pthread_mutex_unlock(&s->cmu);
    return NULL;
}

/* the connection enters a phase: a deadline `secs` from now (0: none) */
static void conn_phase(struct ob_serve *s, struct sconn *k, int phase, double secs)
{
    if (!k)
        return;
    pthread_mutex_lock(&s->cmu);
    k->phase = phase;
    k->deadline = secs > 0 ? now() + secs : 0;
    pthread_mutex_unlock(&s->cmu);
}

/* Shut down the sockets of connections past their deadline (every one not being answered,
 * with all), and log each. shutdown(2) wakes MHD's poll on the socket: it reads the end of
 * the stream and closes the connection as if the client had (its request, if MHD had begun
 * one, ends "header_timeout" or "body_timeout" in the log). */
static void guard_pass(struct ob_serve *s, bool all)
{
    enum { MAXL = 8 };            /* lines per pass; the rest are counted */
    struct {
        char remote[64];
        int phase;
        double age;
    } cut[MAXL];
    int nl = 0, more = 0;
    double t = now();
    pthread_mutex_lock(&s->cmu);
    for (struct sconn *k = s->conns; k; k = k->next) {
        if (k->cut || (all ? k->phase == C_BUSY : !k->deadline || t < k->deadline))
            continue;
        shutdown(k->fd, SHUT_RDWR);
        if (all) {
            k->cut = -1;           /* stopping: not a timeout */
            continue;
        }
        k->cut = k->phase + 1;
        s->cut[k->phase]++;
        if (nl < MAXL) {
            memcpy(cut[nl].remote, k->remote, sizeof k->remote);
            cut[nl].phase = k->phase;
            cut[nl++].age = t - k->t0;
        } else {
            more++;
        }
    }
    pthread_mutex_unlock(&s->cmu);
    for (int i = 0; i < nl; i++) {
        struct ob_sb b = {0};
        ob_sb_str(&b, "{\"event\":\"timeout\",\"remote\":");
        ob_sb_json(&b, cut[i].remote, strlen(cut[i].remote));
        ob_sb_fmt(&b, ",\"phase\":\"%s\",\"connection_s\":%.3f}", cphase_name[cut[i].phase],
                  cut[i].age);
        slog(s, &b);
        ob_sb_free(&b);
    }
    if (more)
        logf_event(s, "timeout", "%d more connections shut down past their deadlines", more);
}

static void *guard_main(void *arg)
{
    struct ob_serve *s = arg;
    pthread_mutex_lock(&s->cmu);
    while (!s->guard_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;       /* 0.1 s: how late a deadline may be kept */
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->guard_cond, &s->cmu, &ts);
        if (s->guard_stop)
            break;
        pthread_mutex_unlock(&s->cmu);
        guard_pass(s, false);
        pthread_mutex_lock(&s->cmu);
    }
    pthread_mutex_unlock(&s->cmu);
    return NULL;
}

/* ---- requests: life and death ---------------------------------------------------------------- */

/* bodies being read or parsed may hold this many bytes in all: the bodies of as many
 * requests as may be admitted (parallel + queue, at least 16), each of the largest size */
static size_t body_budget(const struct ob_serve *s)
{
    int n = s->parallel + s->p.queue > 16 ? s->parallel + s->p.queue : 16;
    return (size_t)n * (s->p.max_body + 1);
}

/* Reserve n more bytes of the body budget for r; false: the budget is spent. */
static bool body_reserve(struct sreq *r, size_t n)
{
    struct ob_serve *s = r->s;
    pthread_mutex_lock(&s->mu);
    bool ok = s->body_mem + n <= body_budget(s);
    if (ok) {
        s->body_mem += n;
        r->body_res += n;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* give r's share of the body budget back (mu held) */
static void body_release(struct sreq *r)
{
    r->s->body_mem -= r->body_res;
    r->body_res = 0;
}

/* the parts' memory */
static void parts_free(struct sreq *r)
{
    for (int i = 0; i < r->n_parts; i++) {
        struct spart *p = &r->parts[i];
        free(p->ids);
        free(p->ptoks);
        free(p->toks);
        ob_sb_free(&p->text);
    }
    free(r->parts);
    r->parts = NULL;
    r->n_parts = 0;
}

static void sreq_free(struct sreq *r)
{
    body_release(r);
    ob_oai_srv_free(&r->q);
    ob_sb_free(&r->body);
    parts_free(r);
    ob_sb_free(&r->out);
    ob_sb_free(&r->pout);
    free(r);
}

/* drop one reference (mu held) */
static void sreq_unref(struct sreq *r)
{
    if (--r->refs == 0)
        sreq_free(r);
}

static struct sreq *sreq_new(struct ob_serve *s, struct MHD_Connection *c, const char *url,
                             const char *method)
{
    struct sreq *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->s = s;
    r->conn = c;
    r->t0 = now();
    r->ep = route(url, NULL);
    r->refs = 1;
    r->fd = -1;
    r->status = 0;
    snprintf(r->method, sizeof r->method, "%s", method);
    /* the path as the client wrote it, for the log; never more than a short prefix */
    char *p = ob_utf8_sanitize(url, strnlen(url, sizeof r->path - 1));
    snprintf(r->path, sizeof r->path, "%s", p ? p : "");
    free(p);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci)
        r->fd = ci->connect_fd;
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci)
        r->sc = ci->socket_context;
    client_address(c, r->remote, sizeof r->remote);
    pthread_mutex_lock(&s->mu);
    r->next = s->head;
    if (s->head)
        s->head->prev = r;
    s->head = r;
    uint64_t n = ++s->seq;
    pthread_mutex_unlock(&s->mu);
    snprintf(r->id, sizeof r->id, "%s-%s-%llu", eps[r->ep].id ? eps[r->ep].id : "req", s->boot,
             (unsigned long long)n);
    return r;
}

/* resume the connection if it waits for us (mu held) */
static void wake(struct sreq *r)
{
    if (r->suspended && !r->gone) {
        r->suspended = false;
        MHD_resume_connection(r->conn);
    }
}

static const char *finish_name(int reason)
{
    if (reason == OB_FINISH_STOP || reason == OB_FINISH_STOP_STRING)
        return "stop";
    return "length";
}

/* The request's log line (mu held). */
static void log_request(struct ob_serve *s, struct sreq *r, const char *end)
{
    struct ob_sb b = {0};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    ob_sb_fmt(&b, "{\"time\":\"%s.%03ldZ\",\"id\":\"%s\",\"remote\":", when, ts.tv_nsec / 1000000,
               r->id);
    ob_sb_json(&b, r->remote, strlen(r->remote));
    ob_sb_str(&b, ",\"method\":");
    ob_sb_json(&b, r->method, strlen(r->method));
    ob_sb_str(&b, ",\"path\":");
    ob_sb_json(&b, r->path, strlen(r->path));
    ob_sb_fmt(&b, ",\"status\":%d", r->status);
    double t = now();
    if (r->gen && r->n_ids) {
        int cached = 0, gen = 0;
        for (int i = 0; i < r->n_parts; i++) {
            cached += r->parts[i].n_cached;
            gen += r->parts[i].n_toks;
        }
        ob_sb_fmt(&b, ",\"stream\":%s,\"prompt_tokens\":%d,\"cached_tokens\":%d,"
                       "\"completion_tokens\":%d",
                   r->stream ? "true" : "false", r->n_ids, cached, gen);
        if (r->n_parts > 1)
            ob_sb_fmt(&b, ",\"prompts\":%d", r->n_parts);
        if (r->phase == P_DONE)
            ob_sb_fmt(&b, ",\"finish_reason\":\"%s\"",
                       r->fin_reason == OB_FINISH_CANCELLED ? "cancelled"
                       : r->fin_reason == OB_FINISH_ERROR   ? "error"
                                                            : finish_name(r->fin_reason));
        if (r->t_first > 0)
            ob_sb_fmt(&b, ",\"ttft_s\":%.6f", r->t_first - r->t0);
        if (r->t_done > 0)
            ob_sb_fmt(&b, ",\"gen_s\":%.6f", r->t_done - r->t0);
    }
    ob_sb_fmt(&b, ",\"total_s\":%.6f,\"end\":\"%s\"}", t - r->t0, end);
    slog(s, &b);
    ob_sb_free(&b);
}

/* ---- answers --------------------------------------------------------------------------------- */

static void count_answer(struct sreq *r, int status)
{
    struct ob_serve *s = r->s;
    conn_phase(s, r->sc, C_BUSY, 0);
    pthread_mutex_lock(&s->mu);
    r->status = status;
    r->answered = true;
    if (status >= 100 && status < 600)
        s->http[r->ep][status]++;
    pthread_mutex_unlock(&s->mu);
}

/* Queue a buffer as the answer (takes the buffer's memory). */
static enum MHD_Result reply(struct sreq *r, int status, const char *ctype, struct ob_sb *b,
                             const char *h1, const char *v1, bool close)
{
    if (b->oom) {
        ob_sb_free(b);
        ob_sb_str(b, "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                      "\"param\":null,\"code\":null}}");
        status = 500;
    }
    size_t len = b->len;
    char *p = b->p ? b->p : strdup("");
    b->p = NULL;
    ob_sb_free(b);
    if (!p)
        return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, p, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(p);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", ctype);
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    if (h1)
        MHD_add_response_header(resp, h1, v1);
    if (close)
        MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    count_answer(r, status);
    return ret;
}

static enum MHD_Result reply_json(struct sreq *r, int status, struct ob_sb *b)
{
    return reply(r, status, "application/json", b, NULL, NULL, false);
}

static enum MHD_Result reply_error(struct sreq *r, const struct ob_oai_srv_err *e)
{
    struct ob_sb b = {0};
    ob_oai_srv_error_body(&b, e);
    const char *h = NULL, *v = NULL;
    if (e->status == 401) {
        h = "WWW-Authenticate";
        v = "Bearer";
    } else if (e->status == 503 || e->status == 429) {
        h = "Retry-After";
        v = "1";
    } else if (e->status == 405) {
        h = "Allow";
        v = eps[r->ep].post ? "POST" : "GET, HEAD";
    }
    pthread_mutex_lock(&r->s->mu);
    bool close = r->must_close || (e->status == 503 && r->s->draining);
    pthread_mutex_unlock(&r->s->mu);
    return reply(r, e->status, "application/json", &b, h, v, close);
}

static enum MHD_Result fail(struct sreq *r, int status, const char *type, const char *code,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static enum MHD_Result fail(struct sreq *r, int status, const char *type, const char *code,
                            const char *fmt, ...)
{
    struct ob_oai_srv_err e = {.status = status, .type = type, .code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    return reply_error(r, &e);
}

/* The same on a prep thread: the error is kept for the connection's MHD thread to answer. */
static void refuse(struct sreq *r, int status, const char *type, const char *code,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void refuse(struct sreq *r, int status, const char *type, const char *code,
                   const char *fmt, ...)
{
    r->perr = (struct ob_oai_srv_err){.status = status, .type = type, .code = code};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->perr.message, sizeof r->perr.message, fmt, ap);
    va_end(ap);
    r->perr_set = true;
}

/* ---- engine callbacks (driver thread) -------------------------------------------------------- */

static bool push_tok(struct ob_token_info **a, int *n, size_t *cap, const struct ob_token_info *t)
{
    if (!OB_GROW(*a, *cap, (size_t)*n + 1))
        return false;
    (*a)[(*n)++] = *t;
    return true;
}

static void on_token(void *user, uint64_t h, const struct ob_token_info *t)
{
    struct spart *p = user;
    struct sreq *r = p->r;
    struct ob_serve *s = r->s;
    pthread_mutex_lock(&s->mu);
    if (p->phase == P_SCORE) {
        r->oom |= !push_tok(&p->ptoks, &p->n_ptoks, &p->cap_ptoks, t);
    } else {
        if (r->t_first == 0)
            r->t_first = now();
        r->oom |= !push_tok(&p->toks, &p->n_toks, &p->cap_toks, t);
        const char *b;
        size_t n;
        if (ob_tok_piece(s->tok, t->id, &b, &n) == 0) {
            ob_sb_add(&p->text, b, n);
            r->oom |= p->text.oom;
        }
        if (r->stream)
            wake(r);
    }
    pthread_mutex_unlock(&s->mu);
}

static void on_finish(void *user, uint64_t h, const struct ob_finish *f);

/* submit a part's next job (mu held); fills the request's error on failure */
static int submit(struct spart *p, bool scoring)
{
    struct sreq *r = p->r;
    struct ob_serve *s = r->s;
    const struct ob_oai_srv_req *q = &r->q;
    struct ob_request j = {
        .prompt = p->ids, .n_prompt = p->n_ids, .sampling = q->s, .max_tokens = q->max_tokens,
        .top_logprobs = q->logprobs ? q->top_logprobs : 0, .cache_prompt = q->cache_prompt,
        .stop = (char **)q->stop, .n_stop = q->n_stop, .stop_ids = r->stop_ids,
        .n_stop_ids = r->n_stop_ids, .forced = q->forced, .n_forced = q->n_forced,
        .spec = q->spec,
        .on_token = on_token, .on_finish = on_finish, .user = p,
    };
    if (scoring) {
        /* teacher forcing over the prompt: the first token is the prompt, the rest forced,
         * with the alternatives of echo's logprobs or of prompt_logprobs, whichever are more */
        j.top_logprobs = q->logprobs && q->echo ? q->top_logprobs : 0;
        if (q->prompt_logprobs > j.top_logprobs)
            j.top_logprobs = q->prompt_logprobs;
        j.n_prompt = 1;
        j.forced = p->ids + 1;
        j.n_forced = p->n_ids - 1;
        j.stop = NULL;
        j.n_stop = 0;
    }
    p->phase = scoring ? P_SCORE : P_GEN;
    int err = ob_engine_submit(s->e, &j, &p->handle);
    if (err) {
        snprintf(r->fin_error, sizeof r->fin_error, "%s", ob_errmsg());
        return err;
    }
    p->job = true;
    return 0;
}

/* does the request generate after scoring its prompt? */
static bool wants_gen(const struct sreq *r)
{
    return r->q.max_tokens > 0 || r->q.n_forced > 0;
}

/* Cancel every job of the request (mu held; the order is mu, then the engine's lock): its
 * parts' chains end with OB_FINISH_CANCELLED. A handle whose job has just finished is
 * ignored by the engine. */
static void cancel_parts(struct sreq *r)
{
    for (int i = 0; i < r->n_parts; i++)
        if (r->parts[i].job)
            ob_engine_cancel(r->s->e, r->parts[i].handle);
}

/* A part's job chain is over (mu held). A part that failed fails the whole request: the
 * others are cancelled. When the last chain ends, so does the request. */
static void part_done(struct spart *p, int reason)
{
    struct sreq *r = p->r;
    struct ob_serve *s = r->s;
    p->phase = P_DONE;
    p->job = false;
    p->fin_reason = reason;
    if (p->counted) {
        p->counted = false;
        s->n_active--;
    }
    if (reason == OB_FINISH_ERROR && r->fin_reason != OB_FINISH_ERROR) {
        r->fin_reason = OB_FINISH_ERROR;
        cancel_parts(r);
    } else if (reason == OB_FINISH_CANCELLED && r->fin_reason != OB_FINISH_ERROR) {
        r->fin_reason = OB_FINISH_CANCELLED;
    }
    wake(r);                       /* a stream sends this choice's end */
    if (--r->n_live > 0)
        return;
    r->phase = P_DONE;
    r->t_done = now();
    if (r->fin_reason != OB_FINISH_ERROR && r->fin_reason != OB_FINISH_CANCELLED)
        r->fin_reason = r->parts[0].fin_reason;
    int k = r->ep;                 /* a generation endpoint: < EP_GEN */
    if (r->fin_reason != OB_FINISH_ERROR && r->fin_reason != OB_FINISH_CANCELLED) {
        hist_add(&s->duration[k], r->t_done - r->t0);
        if (r->t_first > 0)
            hist_add(&s->ttft[k], r->t_first - r->t0);
    }
    if (r->why == W_TIMEOUT)
        s->timed_out++;
    else if (r->why == W_CLIENT)
        s->cancelled_client++;
    wake(r);
    sreq_unref(r);                 /* the job chains' reference */
}

static void on_finish(void *user, uint64_t h, const struct ob_finish *f)
{
    struct spart *p = user;
    struct sreq *r = p->r;
    struct ob_serve *s = r->s;
    pthread_mutex_lock(&s->mu);
    p->job = false;
    if (f->reason == OB_FINISH_ERROR && !r->fin_error[0])
        snprintf(r->fin_error, sizeof r->fin_error, "%s", f->error ? f->error : "engine failure");
    if (p->phase == P_SCORE) {
        p->n_cached = f->n_cached;
        if (f->reason == OB_FINISH_LENGTH && wants_gen(r) && r->why == W_NONE &&
            r->fin_reason != OB_FINISH_ERROR) {
            if (submit(p, false) == 0) {
                pthread_mutex_unlock(&s->mu);
                return;
            }
            part_done(p, OB_FINISH_ERROR);
            pthread_mutex_unlock(&s->mu);
            return;
        }
    } else {
        p->n_cached = f->n_cached;
        p->n_gen = f->n_gen;
        p->fin_text_len = f->text_len <= p->text.len ? f->text_len : p->text.len;
    }
    part_done(p, f->reason);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the driver thread ----------------------------------------------------------------------- */

/* Cancel the jobs of clients that went away and of requests past their time limit. Only
 * suspended connections are polled: MHD neither reads them nor closes them until we resume
 * them, and only this thread resumes a connection whose job runs. */
static void watch(struct ob_serve *s)
{
    enum { MAXW = 512 };
    struct pollfd pf[MAXW];
    struct sreq *who[MAXW];
    int np = 0;
    double t = now();
    /* cancelled under mu (mu, then the engine's lock): a request's parts are all there */
    pthread_mutex_lock(&s->mu);
    for (struct sreq *r = s->head; r; r = r->next) {
        if (!r->n_live || r->why != W_NONE)
            continue;
        if (r->deadline > 0 && t > r->deadline) {
            r->why = W_TIMEOUT;
            cancel_parts(r);
            continue;
        }
        if (r->suspended && r->fd >= 0 && np < MAXW) {
            pf[np] = (struct pollfd){.fd = r->fd, .events = POLLRDHUP};
            who[np++] = r;
        }
    }
    if (np && poll(pf, (nfds_t)np, 0) > 0)
        for (int i = 0; i < np; i++)
            if (pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
                who[i]->why = W_CLIENT;
                cancel_parts(who[i]);
            }
    pthread_mutex_unlock(&s->mu);
}

static void *driver(void *arg)
{
    struct ob_serve *s = arg;
    double last = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool stop = s->driver_stop;
        pthread_mutex_unlock(&s->mu);
        /* stopping: every job was cancelled; step until their finishes are delivered */
        if (stop && ob_engine_idle(s->e))
            break;
        /* A submission or a cancellation from another thread ends the wait. The step after it
         * takes the engine's list of cancellations even when nothing is live (it computes no
         * rows then): a handle whose job had already finished would otherwise keep ending
         * every wait at once. */
        if (ob_engine_idle(s->e))
            ob_engine_wait(s->e, 0.025);
        if (ob_engine_step(s->e) < 0)
            logf_event(s, "engine", "%s", ob_errmsg());
        double t = now();
        if (t - last >= 0.02) {
            watch(s);
            last = t;
        }
    }
    return NULL;
}

/* ---- simple endpoints ----------------------------------------------------------------------- */

static enum MHD_Result do_health(struct sreq *r, const char *arg)
{
    struct ob_serve *s = r->s;
    pthread_mutex_lock(&s->mu);
    const char *st = s->draining ? "draining" : s->ready ? "ok" : "loading";
    pthread_mutex_unlock(&s->mu);
    struct ob_sb b = {0};
    ob_sb_fmt(&b, "{\"status\":\"%s\"}", st);
    if (strcmp(st, "ok"))           /* every 503 says when to come back */
        return reply(r, 503, "application/json", &b, "Retry-After", "1", false);
    return reply_json(r, 200, &b);
}

/* the model object of /v1/models and /v1/models/{model} */
static void model_object(struct ob_sb *b, const struct ob_serve *s)
{
    ob_sb_str(b, "{\"id\":");
    ob_sb_json(b, s->model_id, strlen(s->model_id));
    ob_sb_str(b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"1b\",\"name\":");
    ob_sb_json(b, s->model_name, strlen(s->model_name));
    ob_sb_str(b, ",\"sha256\":");
    ob_sb_json(b, s->sha256, strlen(s->sha256));
    const struct ob_hparams *hp = ob_model_hparams(s->m);
    ob_sb_fmt(b, ",\"route\":\"%s\",\"n_ctx\":%d,\"n_vocab\":%u,\"parallel\":%d}", s->route,
               s->n_ctx, hp->n_vocab, s->parallel);
}

static enum MHD_Result do_livez(struct sreq *r, const char *arg)
{
    struct ob_sb b = {0};
    ob_sb_str(&b, "{\"status\":\"alive\"}");
    return reply_json(r, 200, &b);
}

static enum MHD_Result do_models(struct sreq *r, const char *arg)
{
    struct ob_sb b = {0};
    ob_sb_str(&b, "{\"object\":\"list\",\"data\":[");
    model_object(&b, r->s);
    ob_sb_str(&b, "]}");
    return reply_json(r, 200, &b);
}

/* a special token's text as a JSON string, or null when the model has none */
static void token_or_null(struct ob_sb *b, const struct ob_tok *tok, int32_t id)
{
    const char *p;
    size_t n;
    if (id < 0 || ob_tok_piece(tok, id, &p, &n)) {
        ob_sb_str(b, "null");
        return;
    }
    ob_sb_json(b, p, n);
}

/* GET /tokenizer_info (vLLM's): what a client needs to tokenize as the server does through
 * /tokenize and /detokenize, with no tokenizer files of its own (lm-eval's remote tokenizer
 * reads eos_token, bos_token, pad_token and chat_template) */
static enum MHD_Result do_tokenizer_info(struct sreq *r, const char *arg)
{
    const struct ob_serve *s = r->s;
    struct ob_sb b = {0};
    ob_sb_str(&b, "{\"tokenizer_class\":\"1b\",\"bos_token\":");
    token_or_null(&b, s->tok, ob_tok_bos(s->tok));
    ob_sb_str(&b, ",\"eos_token\":");
    token_or_null(&b, s->tok, ob_tok_eos(s->tok));
    ob_sb_str(&b, ",\"pad_token\":");
    token_or_null(&b, s->tok, ob_tok_pad(s->tok));
    ob_sb_str(&b, ",\"unk_token\":");
    token_or_null(&b, s->tok, ob_tok_unk(s->tok));
    ob_sb_fmt(&b, ",\"add_bos_token\":%s,\"model_max_length\":%d,\"max_model_len\":%d,"
              "\"vocab_size\":%u,\"chat_template\":",
              ob_tok_add_bos(s->tok) && ob_tok_bos(s->tok) >= 0 ? "true" : "false", s->n_ctx,
              s->n_ctx, ob_tok_n_vocab(s->tok));
    if (s->tmpl)
        ob_sb_json(&b, s->tmpl, strlen(s->tmpl));
    else
        ob_sb_str(&b, "null");
    ob_sb_str(&b, "}");
    return reply_json(r, 200, &b);
}

/* Is name one of the names of the model served: its id (--alias, else the file's name), the
 * file's name, general.name or the sha256? An absent or empty name in a request is. */
static bool model_matches(const struct ob_serve *s, const char *name)
{
    if (!name || !*name)
        return true;
    if (!strcmp(name, s->model_id) || !strcmp(name, s->model_name) || !strcmp(name, s->sha256))
        return true;
    const char *path = ob_model_path(s->m), *base = strrchr(path, '/');
    return !strcmp(name, base ? base + 1 : path);
}

/* GET /v1/models/{model} (OpenAI's models.retrieve): the object of the list, under any name a
 * request's "model" may give it; 404 model_not_found for any other (or none) */
static enum MHD_Result do_model(struct sreq *r, const char *name)
{
    struct ob_serve *s = r->s;
    if (!*name || !model_matches(s, name)) {
        /* the name came percent-decoded from the URL: any bytes, any length */
        char *shown = ob_utf8_sanitize(name, strnlen(name, 200));
        enum MHD_Result ret = fail(r, 404, "invalid_request_error", "model_not_found",
                                   "the model '%s' does not exist here; this server has '%s' "
                                   "(GET /v1/models)", shown ? shown : "", s->model_id);
        free(shown);
        return ret;
    }
    struct ob_sb b = {0};
    model_object(&b, s);
    return reply_json(r, 200, &b);
}

static void metric(struct ob_sb *b, const char *name, const char *type, const char *help)
{
    ob_sb_fmt(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void hist_print(struct ob_sb *b, const char *name, const struct hist *h, const char *ep)
{
    uint64_t cum = 0;
    for (size_t i = 0; i <= NB; i++) {
        cum += h->n[i];
        if (i < NB)
            ob_sb_fmt(b, "%s_bucket{endpoint=\"%s\",le=\"%g\"} %llu\n", name, ep, buckets[i],
                       (unsigned long long)cum);
        else
            ob_sb_fmt(b, "%s_bucket{endpoint=\"%s\",le=\"+Inf\"} %llu\n", name, ep,
                       (unsigned long long)cum);
    }
    ob_sb_fmt(b, "%s_sum{endpoint=\"%s\"} %.6f\n%s_count{endpoint=\"%s\"} %llu\n", name, ep,
               h->sum, name, ep, (unsigned long long)h->count);
}

static enum MHD_Result do_metrics(struct sreq *r, const char *arg)
{
    struct ob_serve *s = r->s;
    struct ob_sb b = {0};
    /* the engine is there once the server is ready (attach sets it before ready, under mu) */
    pthread_mutex_lock(&s->mu);
    struct ob_engine *e = s->ready ? s->e : NULL;
    pthread_mutex_unlock(&s->mu);
    struct ob_engine_stats es = {0};
    if (e)
        ob_engine_stats(e, &es);
    pthread_mutex_lock(&s->mu);
    metric(&b, "ob_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
    for (int e = 0; e < EP_N; e++)
        for (int st = 100; st < 600; st++)
            if (s->http[e][st])
                ob_sb_fmt(&b, "ob_requests_total{endpoint=\"%s\",status=\"%d\"} %llu\n",
                           eps[e].path, st, (unsigned long long)s->http[e][st]);
    metric(&b, "ob_requests_rejected_queue_full_total", "counter",
           "Generation requests refused with 503 because the queue was full.");
    ob_sb_fmt(&b, "ob_requests_rejected_queue_full_total %llu\n",
               (unsigned long long)s->rejected_queue);
    metric(&b, "ob_requests_cancelled_total", "counter",
           "Generation requests cancelled, by reason.");
    ob_sb_fmt(&b, "ob_requests_cancelled_total{reason=\"client\"} %llu\n"
                   "ob_requests_cancelled_total{reason=\"timeout\"} %llu\n",
               (unsigned long long)s->cancelled_client, (unsigned long long)s->timed_out);
    metric(&b, "ob_requests_in_flight", "gauge", "Generation requests accepted and not yet answered.");
    ob_sb_fmt(&b, "ob_requests_in_flight %d\n", s->n_open_gen);
    metric(&b, "ob_request_body_bytes", "gauge",
           "Bytes held for request bodies being read or parsed.");
    ob_sb_fmt(&b, "ob_request_body_bytes %zu\n", s->body_mem);
    metric(&b, "ob_ready", "gauge", "1 when the server can serve (what /health says).");
    ob_sb_fmt(&b, "ob_ready %d\n", s->ready && !s->draining);
    for (int k = 0; k < EP_GEN; k++) {
        if (!k)
            metric(&b, "ob_request_duration_seconds", "histogram",
                   "Time from the request to its last token, generation endpoints.");
        hist_print(&b, "ob_request_duration_seconds", &s->duration[k], eps[k].path);
    }
    for (int k = 0; k < EP_GEN; k++) {
        if (!k)
            metric(&b, "ob_time_to_first_token_seconds", "histogram",
                   "Time from the request to its first generated token.");
        hist_print(&b, "ob_time_to_first_token_seconds", &s->ttft[k], eps[k].path);
    }
    pthread_mutex_unlock(&s->mu);
    metric(&b, "ob_tokens_generated_total", "counter",
           "Tokens computed after the prompt (generated, or scored by teacher forcing).");
    ob_sb_fmt(&b, "ob_tokens_generated_total %llu\n", (unsigned long long)es.tokens_generated);
    metric(&b, "ob_tokens_prompt_total", "counter", "Prompt tokens prefilled (not from the cache).");
    ob_sb_fmt(&b, "ob_tokens_prompt_total %llu\n", (unsigned long long)es.tokens_prompt);
    metric(&b, "ob_tokens_cached_total", "counter", "Prompt tokens reused from the prompt cache.");
    ob_sb_fmt(&b, "ob_tokens_cached_total %llu\n", (unsigned long long)es.tokens_cached);
    metric(&b, "ob_spec_steps_total", "counter",
           "Speculative decoding: steps that verified drafted tokens of a sequence.");
    ob_sb_fmt(&b, "ob_spec_steps_total %llu\n", (unsigned long long)es.spec_steps);
    metric(&b, "ob_spec_drafted_total", "counter", "Speculative decoding: tokens drafted.");
    ob_sb_fmt(&b, "ob_spec_drafted_total %llu\n", (unsigned long long)es.spec_drafted);
    metric(&b, "ob_spec_accepted_total", "counter",
           "Speculative decoding: drafted tokens accepted (decode steps saved).");
    ob_sb_fmt(&b, "ob_spec_accepted_total %llu\n", (unsigned long long)es.spec_accepted);
    metric(&b, "ob_engine_steps_total", "counter", "Engine steps (forward passes).");
    ob_sb_fmt(&b, "ob_engine_steps_total %llu\n", (unsigned long long)es.steps);
    metric(&b, "ob_engine_rows_total", "counter", "Token rows computed by the engine.");
    ob_sb_fmt(&b, "ob_engine_rows_total %llu\n", (unsigned long long)es.rows);
    metric(&b, "ob_queue_depth", "gauge", "Requests waiting for a slot.");
    ob_sb_fmt(&b, "ob_queue_depth %d\n", es.queued);
    metric(&b, "ob_slots_busy", "gauge", "Slots with a live sequence.");
    ob_sb_fmt(&b, "ob_slots_busy %d\n", es.live);
    metric(&b, "ob_slots", "gauge", "Slots (--parallel).");
    ob_sb_fmt(&b, "ob_slots %d\n", s->parallel);
    pthread_mutex_lock(&s->cmu);
    int open = s->n_conns;
    uint64_t cut[4];
    memcpy(cut, s->cut, sizeof cut);
    pthread_mutex_unlock(&s->cmu);
    metric(&b, "ob_connections_open", "gauge", "Open HTTP connections.");
    ob_sb_fmt(&b, "ob_connections_open %d\n", open);
    metric(&b, "ob_connections_timed_out_total", "counter",
           "Connections closed because a request did not arrive in full by its deadline.");
    ob_sb_fmt(&b, "ob_connections_timed_out_total{phase=\"headers\"} %llu\n"
                  "ob_connections_timed_out_total{phase=\"body\"} %llu\n",
              (unsigned long long)(cut[C_WAIT] + cut[C_HEAD]), (unsigned long long)cut[C_BODY]);
    return reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", &b, NULL, NULL, false);
}

/* ---- the memory a body's parse may take ------------------------------------------------------ */

/* JSON values a body may hold: a prompt and forced tokens of a whole context each, and room
 * for messages and fields. cJSON takes one node (sizeof(cJSON), 64 bytes) per value, plus the
 * bytes of its strings, which are at most the body's; a body with more values is refused
 * (413) by ob_json_parse_max before cJSON allocates anything. */
static size_t max_values(const struct ob_serve *s)
{
    return 4 * (size_t)s->n_ctx + 4096;
}

/* a generation request's body may also hold the token ids of all its prompts
 * (--max-request-tokens, one value each, and one per prompt array) */
static size_t gen_max_values(const struct ob_serve *s)
{
    return max_values(s) + (size_t)s->max_request_tokens + (size_t)s->p.max_prompts;
}

/* the body is parsed (or refused): its bytes are not needed any more */
static void drop_body(struct sreq *r)
{
    ob_sb_free(&r->body);
    pthread_mutex_lock(&r->s->mu);
    body_release(r);
    pthread_mutex_unlock(&r->s->mu);
}

/* ---- /tokenize and /detokenize (prep threads) ------------------------------------------------ */

static void prep_tokenize(struct sreq *r)
{
    struct ob_serve *s = r->s;
    struct ob_oai_srv_tokenize t;
    const char *body = r->body.p ? r->body.p : "";
    int err = ob_oai_srv_parse_tokenize(body, r->body.len, max_values(s), &t, &r->perr);
    drop_body(r);
    if (err) {
        r->perr_set = true;
        return;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int32_t bos = ob_tok_add_bos(s->tok) ? ob_tok_bos(s->tok) : -1;
    if (t.text) {
        err = ob_tok_encode(s->tok, t.text, strlen(t.text), t.parse_special, &ids, &n);
    } else {
        /* rendered and tokenized as /v1/chat/completions does (that BOS is the template's) */
        struct ob_chat_opts o = OB_CHAT_OPTS_DEFAULT;
        o.add_generation_prompt = t.add_generation_prompt;
        o.enable_thinking = t.thinking;
        err = ob_chat_tokenize(s->tok, s->tmpl, t.msgs.v, t.msgs.n, &o, &ids, &n);
        if (!err && n && ids[0] == bos)
            bos = -1;
    }
    bool add = t.add_special && bos >= 0, pieces = t.with_pieces, chat = !t.text;
    ob_oai_srv_tokenize_free(&t);
    if (err) {
        if (err == OB_ENOMEM) {
            refuse(r, 500, "server_error", NULL, "%s", ob_errmsg());
        } else {
            refuse(r, 400, "invalid_request_error", "invalid_value", "%s", ob_errmsg());
            snprintf(r->perr.param, sizeof r->perr.param, "%s", chat ? "messages" : "prompt");
        }
        return;
    }
    struct ob_sb *b = &r->pout;
    ob_sb_str(b, "{\"tokens\":[");
    for (size_t i = 0; i < n + add; i++) {
        int32_t id = add ? (i ? ids[i - 1] : bos) : ids[i];
        if (i)
            ob_sb_add(b, ",", 1);
        if (pieces) {
            const char *p = "";
            size_t pl = 0;
            ob_tok_piece(s->tok, id, &p, &pl);
            ob_sb_fmt(b, "{\"id\":%d,\"piece\":", id);
            ob_sb_json(b, p, pl);
            ob_sb_add(b, "}", 1);
        } else {
            ob_sb_fmt(b, "%d", id);
        }
    }
    ob_sb_fmt(b, "],\"count\":%zu,\"max_model_len\":%d}", n + add, s->n_ctx);
    free(ids);
}

static void prep_detokenize(struct sreq *r)
{
    struct ob_serve *s = r->s;
    int32_t *ids = NULL;
    int n;
    const char *body = r->body.p ? r->body.p : "";
    int err = ob_oai_srv_parse_detokenize(body, r->body.len, max_values(s),
                                          ob_tok_n_vocab(s->tok), &ids, &n, &r->perr);
    drop_body(r);
    if (err) {
        r->perr_set = true;
        return;
    }
    char *text;
    size_t len;
    err = ob_tok_decode(s->tok, ids, (size_t)n, &text, &len);
    free(ids);
    if (err) {
        refuse(r, 500, "server_error", NULL, "%s", ob_errmsg());
        return;
    }
    /* llama-server's name and vLLM's */
    ob_sb_str(&r->pout, "{\"content\":");
    ob_sb_json(&r->pout, text, len);
    ob_sb_str(&r->pout, ",\"prompt\":");
    ob_sb_json(&r->pout, text, len);
    ob_sb_str(&r->pout, "}");
    free(text);
}

/* ---- generation ---------------------------------------------------------------------------- */

/* the choice of one part */
static void result_of(const struct sreq *r, const struct spart *p, struct ob_oai_srv_result *o)
{
    const struct ob_serve *s = r->s;
    *o = (struct ob_oai_srv_result){
        .kind = r->q.kind, .index = p->index, .id = r->id, .model = s->model_id,
        .fingerprint = s->fingerprint, .created = (long long)time(NULL), .tok = s->tok,
        .echo = r->q.echo, .prompt = p->ids, .n_prompt = p->n_ids, .ptoks = p->ptoks,
        .n_ptoks = p->n_ptoks, .toks = p->toks, .n_toks = p->n_toks,
        .text = p->text.p ? p->text.p : "",
        .text_len = p->phase == P_DONE ? p->fin_text_len : p->text.len,
        .finish_reason = finish_name(p->fin_reason), .logprobs = r->q.logprobs,
        .top_logprobs = r->q.top_logprobs, .prompt_logprobs = r->q.prompt_logprobs,
        .prompt_tokens = p->n_ids, .completion_tokens = p->n_toks, .cached_tokens = p->n_cached,
        .timed_out = r->why == W_TIMEOUT,
    };
}

/* the choices of all parts (malloc'd; NULL: out of memory) */
static struct ob_oai_srv_result *results_of(const struct sreq *r)
{
    struct ob_oai_srv_result *o = calloc((size_t)(r->n_parts ? r->n_parts : 1), sizeof *o);
    for (int i = 0; o && i < r->n_parts; i++)
        result_of(r, &r->parts[i], &o[i]);
    return o;
}

/* the error a finished request answers with, if it does not answer with its tokens */
static bool finish_error(const struct sreq *r, struct ob_oai_srv_err *e)
{
    memset(e, 0, sizeof *e);
    if (r->oom) {
        ob_oai_srv_fail(e, OB_ENOMEM, 500, "server_error", NULL, NULL, "out of memory");
        return true;
    }
    if (r->fin_reason == OB_FINISH_ERROR) {
        ob_oai_srv_fail(e, OB_EINTERNAL, 500, "server_error", "engine_error", NULL, "%s",
                        r->fin_error[0] ? r->fin_error : "the engine failed");
        return true;
    }
    if (r->fin_reason == OB_FINISH_CANCELLED && r->why != W_TIMEOUT) {
        if (r->why == W_SHUTDOWN)
            ob_oai_srv_fail(e, OB_EIO, 503, "server_error", "shutting_down", NULL,
                            "the server is shutting down; send the request again");
        else
            ob_oai_srv_fail(e, OB_EIO, 499, "invalid_request_error", "cancelled", NULL,
                            "the request was cancelled");
        return true;
    }
    return false;
}

/* A request cancelled because its client went away (closed, reset or half-closed its
 * connection) is answered with nothing: a client that half-closed may still be reading, and
 * a 499 is nginx's word for the log, not a status to send. The log line and /metrics say 499;
 * the connection is closed. */
static bool client_gone(const struct ob_oai_srv_err *e)
{
    return e->status == 499;
}

/* a resumed non-streaming request: its answer */
static enum MHD_Result answer(struct sreq *r)
{
    struct ob_serve *s = r->s;
    struct ob_oai_srv_err e;
    pthread_mutex_lock(&s->mu);
    bool err = finish_error(r, &e);
    pthread_mutex_unlock(&s->mu);
    if (err && client_gone(&e)) {
        count_answer(r, e.status);
        quiet_close = true;
        return MHD_NO;
    }
    if (err)
        return reply_error(r, &e);
    pthread_mutex_lock(&s->mu);
    struct ob_oai_srv_result *o = results_of(r);
    struct ob_sb b = {0};
    if (o)
        ob_oai_srv_body_n(&b, o, r->n_parts);
    else
        b.oom = true;
    pthread_mutex_unlock(&s->mu);
    free(o);
    return reply_json(r, 200, &b);
}

/* Did this part fail (an error, or a cancellation that is not the time limit's)? The request
 * then answers with its error, not with this choice. (mu held) */
static bool part_failed(const struct sreq *r, const struct spart *p)
{
    return p->fin_reason == OB_FINISH_ERROR ||
           (p->fin_reason == OB_FINISH_CANCELLED && r->why != W_TIMEOUT);
}

/* Format the next chunk of one part's choice into r->out, if it has one (mu held). */
static bool stream_part(struct sreq *r, struct spart *p)
{
    struct ob_serve *s = r->s;
    struct ob_oai_srv_result o;
    if (p->sent_end)
        return false;
    result_of(r, p, &o);
    if (!p->sent_start) {
        if (p->phase == P_NONE || p->phase == P_SCORE)
            return false;          /* echo: the prompt's scores come first */
        ob_oai_srv_chunk_start(&r->out, &o);
        p->sent_start = true;
        if (r->q.echo)
            for (int i = 0; i < p->n_ids; i++) {
                const char *pc;
                size_t n;
                if (!ob_tok_piece(s->tok, p->ids[i], &pc, &n))
                    p->tok_bytes += n;
            }
        return true;
    }
    if (p->n_sent < p->n_toks) {
        const struct ob_token_info *t = &p->toks[p->n_sent];
        const char *pc;
        size_t n = 0;
        ob_tok_piece(s->tok, t->id, &pc, &n);
        /* the text through this token, whatever came after it since */
        size_t end = p->gen_bytes + n;
        if (end > p->text.len)
            end = p->text.len;
        /* forced tokens ignore stop strings, but not UTF-8 */
        size_t safe = ob_oai_srv_stream_safe(o.text, p->text_sent, end, r->q.stop,
                                             r->q.n_forced ? 0 : r->q.n_stop);
        ob_oai_srv_chunk_token(&r->out, &o, t, o.text + p->text_sent, safe - p->text_sent,
                               p->tok_bytes);
        p->text_sent = safe;
        p->tok_bytes += n;
        p->gen_bytes += n;
        p->n_sent++;
        return true;
    }
    if (p->phase == P_DONE && !part_failed(r, p)) {
        size_t end = p->fin_text_len > p->text_sent ? p->fin_text_len : p->text_sent;
        ob_oai_srv_chunk_finish(&r->out, &o, o.text + p->text_sent, end - p->text_sent);
        p->sent_end = true;
        return true;
    }
    return false;
}

/* The streaming body: called by MHD for more bytes; suspends the connection when there is
 * nothing to send yet (the driver resumes it). The chunks of several choices (a completion
 * with several prompts) interleave, each naming its index; the usage (summed) and [DONE]
 * come once, after the last choice's end. A request that failed sends an error event (after
 * the chunks already sent) and [DONE]. */
static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct sreq *r = cls;
    struct ob_serve *s = r->s;
    quiet_close = false;
    pthread_mutex_lock(&s->mu);
    while (r->out_off >= r->out.len) {
        if (r->why == W_CLIENT) {  /* gone: no more tokens, no error event (client_gone) */
            pthread_mutex_unlock(&s->mu);
            quiet_close = true;
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        ob_sb_reset(&r->out);
        r->out_off = 0;
        if (r->sent_end) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        struct ob_oai_srv_err e;
        if (r->phase == P_DONE && finish_error(r, &e)) {
            if (client_gone(&e)) {
                pthread_mutex_unlock(&s->mu);
                quiet_close = true;
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            ob_oai_srv_chunk_error(&r->out, &e);
            r->sent_end = true;
            continue;
        }
        bool more = false;
        for (int i = 0; i < r->n_parts; i++)
            more |= stream_part(r, &r->parts[i]);
        if (more)
            continue;
        if (r->phase == P_DONE) {
            struct ob_oai_srv_result *o = results_of(r);
            if (!o)
                r->out.oom = true;
            else
                ob_oai_srv_chunk_done(&r->out, o, r->n_parts, r->q.include_usage);
            free(o);
            r->sent_end = true;
            continue;
        }
        if (r->gone) {
            pthread_mutex_unlock(&s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        r->suspended = true;
        MHD_suspend_connection(r->conn);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (r->out.oom) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = r->out.len - r->out_off;
    if (n > max)
        n = max;
    memcpy(buf, r->out.p + r->out_off, n);
    r->out_off += n;
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)n;
}

/* Parse, tokenize and admit a generation request, and submit its job (a prep thread); or
 * leave the refusal in r->perr. */
static void prep_generate(struct sreq *r)
{
    struct ob_serve *s = r->s;
    int kind = eps[r->ep].kind;
    const char *body = r->body.p ? r->body.p : "";
    int err = ob_oai_srv_parse(body, r->body.len, kind, &s->defaults, &r->q, &r->perr);
    drop_body(r);
    if (err) {
        r->perr_set = true;
        return;
    }
    if (!model_matches(s, r->q.model)) {
        refuse(r, 404, "invalid_request_error", "model_not_found",
               "the model '%s' does not exist here; this server has '%s' (GET /v1/models)",
               r->q.model, s->model_id);
        return;
    }
    /* the parts: one per prompt (chat: one), each tokenized and checked against the context */
    int k = kind == OB_OAI_SRV_CHAT ? 1 : r->q.n_prompts;
    r->parts = calloc((size_t)k, sizeof *r->parts);
    if (!r->parts) {
        refuse(r, 500, "server_error", NULL, "out of memory");
        return;
    }
    r->n_parts = k;
    int64_t total = 0;
    for (int i = 0; i < k; i++) {
        struct spart *p = &r->parts[i];
        p->r = r;
        p->index = i;
        if (ob_oai_srv_tokens_at(&r->q, i, s->tok, s->tmpl, &p->ids, &p->n_ids, r->stop_ids,
                                 &r->n_stop_ids, &r->perr)) {
            r->perr_set = true;
            return;
        }
        total += p->n_ids;
        r->n_ids = total < INT32_MAX ? (int)total : INT32_MAX;     /* for the log */
        /* which prompt, where there are several (also the error's param) */
        char which[40] = "", param[32] = "";
        if (r->q.prompt_batch) {
            snprintf(which, sizeof which, " ('prompt[%d]')", i);
            snprintf(param, sizeof param, "prompt[%d]", i);
        }
        /* as the engine counts (ob_engine_submit): a prompt that is only scored (max_tokens 0)
         * may fill the context; one that generates needs a position more */
        bool gen = r->q.n_forced == 0 && r->q.max_tokens > 0;
        if (p->n_ids > s->n_ctx || (gen && p->n_ids == s->n_ctx)) {
            refuse(r, 400, "invalid_request_error", "context_length_exceeded",
                   "the prompt%s has %d tokens; the context holds %d%s", which, p->n_ids,
                   s->n_ctx, gen ? " (one more is needed to generate)" : "");
            memcpy(r->perr.param, param, sizeof param);
            return;
        }
        if (r->q.n_forced > 0 && (int64_t)p->n_ids + r->q.n_forced > s->n_ctx) {
            refuse(r, 400, "invalid_request_error", "context_length_exceeded",
                   "the prompt%s (%d tokens) and forced_tokens (%d) do not fit in the context "
                   "of %d", which, p->n_ids, r->q.n_forced, s->n_ctx);
            memcpy(r->perr.param, param, sizeof param);
            return;
        }
        if (total > s->max_request_tokens) {
            refuse(r, 400, "invalid_request_error", "too_many_tokens",
                   "the prompts of this request hold more than %d tokens in all (%lld through "
                   "'prompt[%d]'); send fewer prompts per request (--max-request-tokens)",
                   s->max_request_tokens, (long long)total, i);
            snprintf(r->perr.param, sizeof r->perr.param, "prompt");
            return;
        }
    }
    if (k > s->parallel + s->p.queue) {
        /* it could never be admitted: refused rather than left waiting */
        refuse(r, 400, "invalid_request_error", "too_many_prompts",
               "'prompt' holds %d prompts; this server runs or queues at most %d sequences "
               "(--parallel %d + --queue %d): send at most that many per request", k,
               s->parallel + s->p.queue, s->parallel, s->p.queue);
        snprintf(r->perr.param, sizeof r->perr.param, "prompt");
        return;
    }

    pthread_mutex_lock(&s->mu);
    r->stream = r->q.stream;
    if (s->draining) {
        pthread_mutex_unlock(&s->mu);
        refuse(r, 503, "server_error", "shutting_down", "the server is shutting down");
        return;
    }
    /* each prompt takes one of the parallel + queue places, all of them at once */
    if (s->n_active + k > s->parallel + s->p.queue) {
        s->rejected_queue++;
        pthread_mutex_unlock(&s->mu);
        if (k > 1)
            refuse(r, 503, "server_error", "overloaded",
                   "the server is busy (%d of %d sequences running or queued; this request "
                   "needs %d); retry later", s->n_active, s->parallel + s->p.queue, k);
        else
            refuse(r, 503, "server_error", "overloaded",
                   "the server is busy (%d requests running or queued); retry later",
                   s->parallel + s->p.queue);
        return;
    }
    r->refs++;                     /* the job chains' reference */
    if (s->p.timeout > 0)
        r->deadline = r->t0 + s->p.timeout;
    r->phase = P_GEN;
    for (int i = 0; i < k; i++) {
        struct spart *p = &r->parts[i];
        bool scoring = ((r->q.echo && r->q.logprobs) || r->q.prompt_logprobs >= 0) &&
                       p->n_ids > 1;
        err = submit(p, scoring);
        if (err && i == 0) {
            /* nothing is in the engine: a refusal */
            r->refs--;
            r->phase = P_NONE;
            p->phase = P_NONE;
            char msg[256];
            snprintf(msg, sizeof msg, "%s", r->fin_error);
            pthread_mutex_unlock(&s->mu);
            refuse(r, err == OB_ENOMEM ? 500 : 400,
                   err == OB_ENOMEM ? "server_error" : "invalid_request_error", NULL, "%s", msg);
            return;
        }
        if (err) {
            /* the prompts before it are in the engine: the request fails as a whole (those
             * are cancelled), and the parts not submitted end at once */
            r->n_live += k - i;
            for (int j = i; j < k; j++)
                part_done(&r->parts[j], OB_FINISH_ERROR);
            break;
        }
        s->n_active++;
        p->counted = true;
        r->n_live++;
    }
    r->admitted = true;
    s->n_open_gen++;
    pthread_mutex_unlock(&s->mu);
}

/* an admitted streaming request: its chunked response */
static enum MHD_Result queue_stream(struct sreq *r)
{
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader,
                                                                  r, NULL);
    if (!resp)
        return MHD_NO;             /* the job is cancelled when MHD completes the request */
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");   /* nginx: pass chunks at once */
    MHD_add_response_header(resp, "X-Request-Id", r->id);
    enum MHD_Result ret = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    count_answer(r, 200);
    return ret;
}

/* ---- prep threads ---------------------------------------------------------------------------- */

/* a body this large is followed by malloc_trim: what parsing and tokenizing it took goes back
 * to the system instead of staying in the prep thread's malloc arena */
#define TRIM_AFTER ((size_t)1 << 20)

static void *prep_main(void *arg)
{
    struct ob_serve *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->pq_head && !s->prep_stop)
            pthread_cond_wait(&s->prep_cond, &s->mu);
        struct sreq *r = s->pq_head;
        if (!r)
            break;                 /* stopping, and nothing left */
        s->pq_head = r->prep_next;
        if (!s->pq_head)
            s->pq_tail = NULL;
        pthread_mutex_unlock(&s->mu);
        size_t seen = r->body_seen;
        eps[r->ep].prep(r);
        if (r->perr_set) {
            /* refused: nothing of it is needed but the error (and the count, for the log) */
            ob_oai_srv_free(&r->q);
            parts_free(r);
        }
        if (seen >= TRIM_AFTER)
            malloc_trim(0);
        pthread_mutex_lock(&s->mu);
        r->prep = PREP_DONE;
        wake(r);
        sreq_unref(r);             /* the prep thread's reference */
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Queue the request for a prep thread and suspend its connection (mu held). */
static void prep_queue(struct sreq *r)
{
    struct ob_serve *s = r->s;
    r->prep = PREP_QUEUED;
    r->refs++;                     /* the prep thread's reference */
    r->prep_next = NULL;
    if (s->pq_tail)
        s->pq_tail->prep_next = r;
    else
        s->pq_head = r;
    s->pq_tail = r;
    pthread_cond_signal(&s->prep_cond);
    r->suspended = true;
    MHD_suspend_connection(r->conn);
}

/* The last call for a request whose body a prep thread handles: queue it, or wait for it (or
 * for its job), or answer. */
static enum MHD_Result prepared(struct sreq *r, const char *arg)
{
    struct ob_serve *s = r->s;
    pthread_mutex_lock(&s->mu);
    if (r->prep == PREP_NONE) {
        prep_queue(r);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    bool waiting = r->prep == PREP_QUEUED ||
                   (!r->perr_set && r->admitted && !r->stream && r->phase != P_DONE);
    if (waiting) {
        /* resumed before there is anything to answer: wait again */
        r->suspended = true;
        MHD_suspend_connection(r->conn);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    pthread_mutex_unlock(&s->mu);
    if (r->perr_set)
        return reply_error(r, &r->perr);
    if (!eps[r->ep].gen)
        return reply_json(r, 200, &r->pout);
    if (r->stream)
        return queue_stream(r);
    return answer(r);
}

/* ---- MHD callbacks --------------------------------------------------------------------------- */

/* Is the Authorization header "Bearer KEY"? The comparison takes the same time whatever the
 * header holds (for a given key length). */
static bool auth_ok(const struct ob_serve *s, struct MHD_Connection *c)
{
    const char *want = s->p.api_key;
    if (!want)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7))
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t hl = strlen(h), wl = strlen(want);
    while (hl && (h[hl - 1] == ' ' || h[hl - 1] == '\t'))
        hl--;
    volatile unsigned char d = hl != wl;
    for (size_t i = 0; i < wl; i++)
        d |= (unsigned char)want[i] ^ (unsigned char)(i < hl ? h[i] : 0);
    return d == 0;
}

/* the framing headers of a request, all of them (MHD keeps the first of each) */
struct framing {
    int n_cl, n_te, n_expect;
    const char *te, *expect;
    const char *bad_name;          /* a header name with white space in it */
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    struct framing *f = cls;
    if (!f->bad_name && strpbrk(key, " \t"))
        f->bad_name = key;         /* "Content-Length : 5" is not a Content-Length to MHD */
    if (!strcasecmp(key, "Content-Length")) {
        f->n_cl++;
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        f->n_te++;
        f->te = value ? value : "";
    } else if (!strcasecmp(key, "Expect")) {
        f->n_expect++;
        f->expect = value ? value : "";
    }
    return MHD_YES;
}

/* Checks on the headers alone: a refusal is queued at once. MHD itself refuses a
 * Content-Length that is not all digits (400) or too large for 64 bits (413) and closes, before
 * the handler is called (libmicrohttpd 0.9.75 sends its status line and headers twice then,
 * before its HTML body, a bug of its state machine that 1.0 fixed). It reads a body of unknown
 * length until the connection closes when Transfer-Encoding is anything but chunked, and
 * keeps the first of repeated headers, so those cases are refused here, before the body: a
 * request whose length is ambiguous is one a proxy in front may read differently (request
 * smuggling). Such refusals close the connection. */
static enum MHD_Result first_call(struct sreq *r, const char *version)
{
    struct ob_serve *s = r->s;
    struct MHD_Connection *c = r->conn;
    struct framing f = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    r->must_close = true;          /* for the refusals of bad framing below */
    if (f.bad_name)
        return fail(r, 400, "invalid_request_error", "invalid_framing",
                    "white space in a header name ('%.64s')", f.bad_name);
    if (f.n_te > 1 || (f.n_te && strcasecmp(f.te, "chunked")))
        return fail(r, 501, "invalid_request_error", "unsupported_transfer_encoding",
                    "Transfer-Encoding '%.64s'%s is not supported: send the body with "
                    "Content-Length, or chunked", f.te,
                    f.n_te > 1 ? " (more than one header)" : "");
    if (f.n_te && f.n_cl)
        return fail(r, 400, "invalid_request_error", "invalid_framing",
                    "a request may not have both Transfer-Encoding and Content-Length");
    if (f.n_te && version && !strcmp(version, "HTTP/1.0"))
        return fail(r, 400, "invalid_request_error", "invalid_framing",
                    "Transfer-Encoding is not HTTP/1.0");
    if (f.n_cl > 1)
        return fail(r, 400, "invalid_request_error", "invalid_framing",
                    "more than one Content-Length header");
    if (f.n_expect > 1 || (f.n_expect && strcasecmp(f.expect, "100-continue")))
        return fail(r, 417, "invalid_request_error", "expectation_failed",
                    "the only expectation this server meets is Expect: 100-continue");
    r->must_close = false;
    if (r->ep == EP_OTHER)
        return fail(r, 404, "invalid_request_error", "not_found", "no such endpoint: %s %s",
                    r->method, r->path);
    bool get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
    if (eps[r->ep].post ? strcmp(r->method, "POST") : !get)
        return fail(r, 405, "invalid_request_error", "method_not_allowed",
                    "%s takes %s, not %s", eps[r->ep].path, eps[r->ep].post ? "POST" : "GET",
                    r->method);
    if (!eps[r->ep].open && !auth_ok(s, c))
        return fail(r, 401, "invalid_request_error", "invalid_api_key",
                    "a valid API key is needed: send the header 'Authorization: Bearer KEY'");
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (eps[r->ep].post && !cl && !f.n_te)
        return fail(r, 411, "invalid_request_error", "length_required",
                    "the request body needs a Content-Length (or Transfer-Encoding: chunked)");
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(cl, &end, 10);
        if (errno || end == cl || v > s->p.max_body)
            return fail(r, 413, "invalid_request_error", "request_too_large",
                        "the request body is larger than %zu bytes", s->p.max_body);
        r->body_want = (size_t)v;
    }
    pthread_mutex_lock(&s->mu);
    bool ready = s->ready, draining = s->draining;
    bool busy = s->n_active >= s->parallel + s->p.queue;
    if (eps[r->ep].gen && ready && !draining && busy)
        s->rejected_queue++;
    pthread_mutex_unlock(&s->mu);
    if (eps[r->ep].model && !ready)
        return fail(r, 503, "server_error", "loading", "the model is loading; retry later");
    if (eps[r->ep].gen) {
        if (draining)
            return fail(r, 503, "server_error", "shutting_down", "the server is shutting down");
        if (busy)
            return fail(r, 503, "server_error", "overloaded",
                        "the server is busy (%d requests running or queued); retry later",
                        s->parallel + s->p.queue);
        r->gen = true;
    }
    if (r->body_want && !body_reserve(r, r->body_want + 1)) {
        r->must_close = true;      /* its body is not read */
        return fail(r, 503, "server_error", "overloaded",
                    "the server is reading too many large bodies (%zu bytes); retry later",
                    body_budget(s));
    }
    return MHD_YES;
}

/* Append a body piece (body.len + n <= max_body): 0, or 1 when the server's body budget is
 * spent, -1 when memory is. An announced body gets its buffer in one piece (reserved by
 * first_call); a chunked one grows by doubling, up to max_body + 1. */
static int body_add(struct sreq *r, const char *data, size_t n)
{
    size_t need = r->body.len + n + 1;
    if (need > r->body.cap) {
        size_t cap = r->body_want + 1 >= need ? r->body_want + 1
                     : r->body.cap ? 2 * r->body.cap : 4096;
        while (cap < need)
            cap *= 2;
        if (cap > r->s->p.max_body + 1)
            cap = r->s->p.max_body + 1;
        if (cap > r->body_res && !body_reserve(r, cap - r->body_res))
            return 1;
        if (!ob_sb_grow_to(&r->body, cap))
            return -1;
    }
    ob_sb_add(&r->body, data, n);
    return 0;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **ctx)
{
    struct ob_serve *s = cls;
    struct sreq *r = *ctx;
    quiet_close = false;
    if (!r) {
        if (!(r = sreq_new(s, c, url, method)))
            return MHD_NO;
        *ctx = r;
        /* the headers are in: now the body has its deadline */
        conn_phase(s, r->sc, C_BODY, s->p.body_timeout);
        return first_call(r, version);
    }
    if (*size) {
        /* a body larger than announced (or sent in chunks), or over the server's budget:
         * keep reading, answer 413 (503) at the end; a client that goes on much longer is
         * disconnected */
        r->body_seen += *size;
        if (r->body.len + *size > s->p.max_body) {
            r->too_large = true;
            drop_body(r);
            if (r->body_seen > 16 * s->p.max_body)
                return MHD_NO;
        }
        if (!r->too_large && !r->too_busy) {
            int e = body_add(r, data, *size);
            if (e < 0)
                return MHD_NO;
            if (e > 0) {
                r->too_busy = true;
                drop_body(r);
            }
        }
        *size = 0;
        return MHD_YES;
    }
    /* the whole request is in */
    conn_phase(s, r->sc, C_BUSY, 0);
    if (r->answered)
        return MHD_YES;
    if (r->too_large)
        return fail(r, 413, "invalid_request_error", "request_too_large",
                    "the request body is larger than %zu bytes", s->p.max_body);
    if (r->too_busy)
        return fail(r, 503, "server_error", "overloaded",
                    "the server is reading too many large bodies (%zu bytes); retry later",
                    body_budget(s));
    const char *arg;
    route(url, &arg);
    if (!eps[r->ep].answer)
        return fail(r, 404, "invalid_request_error", "not_found", "no such endpoint");
    return eps[r->ep].answer(r, arg);
}

static void completed(void *cls, struct MHD_Connection *c, void **ctx,
                      enum MHD_RequestTerminationCode toe)
{
    struct ob_serve *s = cls;
    struct sreq *r = *ctx;
    /* the connection waits for its next request: the client may stay silent for
     * idle_timeout (MHD closes it then), and its headers are due header_timeout later */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct sconn *k = ci ? ci->socket_context : NULL;
    int cut = 0;
    if (k) {
        pthread_mutex_lock(&s->cmu);
        cut = k->cut;
        k->phase = C_WAIT;
        k->deadline = s->p.header_timeout > 0 && s->p.idle_timeout > 0
                          ? now() + s->p.idle_timeout + s->p.header_timeout : 0;
        pthread_mutex_unlock(&s->cmu);
    }
    if (!r)
        return;
    *ctx = NULL;
    static const char *const why[] = {
        [MHD_REQUEST_TERMINATED_COMPLETED_OK] = "ok",
        [MHD_REQUEST_TERMINATED_WITH_ERROR] = "error",
        [MHD_REQUEST_TERMINATED_TIMEOUT_REACHED] = "idle_timeout",
        [MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN] = "shutdown",
        [MHD_REQUEST_TERMINATED_READ_ERROR] = "read_error",
        [MHD_REQUEST_TERMINATED_CLIENT_ABORT] = "client_abort",
    };
    const char *end = (unsigned)toe < sizeof why / sizeof why[0] && why[toe] ? why[toe] : "error";
    pthread_mutex_lock(&s->mu);
    r->gone = true;
    r->suspended = false;
    if (r->prev)
        r->prev->next = r->next;
    else
        s->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    if (r->admitted)
        s->n_open_gen--;
    if (r->n_live) {
        /* its client went away: every job of it is cancelled (a handle whose job has
         * finished meanwhile is ignored by the engine) */
        if (r->why == W_NONE)
            r->why = W_CLIENT;
        cancel_parts(r);
    }
    if (!r->answered)
        r->status = 0;
    if (r->why == W_TIMEOUT && !strcmp(end, "ok"))
        end = "timeout";
    else if (r->why == W_SHUTDOWN)
        end = "shutdown";
    else if (r->why == W_CLIENT || (r->stream && !r->sent_end && !strcmp(end, "ok")))
        end = "client_abort";
    if (cut > 0 && !r->answered)
        end = cut - 1 == C_BODY ? "body_timeout" : "header_timeout";
    else if (cut < 0 && !r->answered)
        end = "shutdown";
    log_request(s, r, end);
    sreq_unref(r);                 /* MHD's reference */
    pthread_mutex_unlock(&s->mu);
}

/* ---- life cycle ------------------------------------------------------------------------------ */

/* the server's own memory, once every thread is stopped */
static void serve_destroy(struct ob_serve *s)
{
    pthread_cond_destroy(&s->guard_cond);
    pthread_cond_destroy(&s->prep_cond);
    pthread_mutex_destroy(&s->cmu);
    pthread_mutex_destroy(&s->lmu);
    pthread_mutex_destroy(&s->mu);
    free(s->prep_th);
    free(s);
}

int ob_serve_new(const struct ob_serve_params *p, struct ob_serve **out)
{
    struct ob_serve *s = calloc(1, sizeof *s);
    if (!s)
        return ob_seterr(OB_ENOMEM, "out of memory");
    s->p = *p;
    s->listen_fd = MHD_INVALID_SOCKET;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->cmu, NULL);
    pthread_mutex_init(&s->lmu, NULL);
    pthread_cond_init(&s->prep_cond, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->guard_cond, &ca);
    pthread_condattr_destroy(&ca);
    uint32_t boot = 0;
    if (getrandom(&boot, sizeof boot, 0) != sizeof boot)
        boot = (uint32_t)time(NULL) ^ (uint32_t)getpid();
    snprintf(s->boot, sizeof s->boot, "%08x", boot);

    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV | AI_PASSIVE, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    int gai = getaddrinfo(p->host, port, &hints, &ai);
    if (gai || !ai) {
        serve_destroy(s);
        return ob_seterr(OB_EUSAGE, "cannot resolve host '%s': %s", p->host, gai_strerror(gai));
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr},
        {MHD_OPTION_THREAD_POOL_SIZE, p->http_threads > 1 ? p->http_threads : 2, NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, p->idle_timeout > 0 ? p->idle_timeout : 0, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, s},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_conn, s},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)request_line, s},
        /* shared out among the pool's threads; at the limit, new connections wait in the
         * listen backlog */
        {MHD_OPTION_CONNECTION_LIMIT, p->max_connections > 0 ? p->max_connections : 1024, NULL},
        /* more from one address are closed at once */
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, p->max_per_client > 0 ? p->max_per_client : 0, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 256, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    /* the logger first, so that MHD never prints a message itself */
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, s, MHD_OPTION_EXTERNAL_LOGGER,
                            mhd_logger, s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        /* MHD's message ends with the system's reason ("...: Address already in use") */
        const char *why = strrchr(s->mhd_msg, ':');
        int err = ob_seterr(OB_EIO, "cannot listen on %s port %d%s%s", p->host, p->port,
                            why ? ":" : "", why ? why + 1 : "");
        serve_destroy(s);
        return err;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
    int n = p->http_threads > 1 ? p->http_threads : 2;
    s->prep_th = calloc((size_t)n, sizeof *s->prep_th);
    bool ok = s->prep_th != NULL;
    while (ok && s->n_prep < n) {
        ok = !pthread_create(&s->prep_th[s->n_prep], NULL, prep_main, s);
        s->n_prep += ok;
    }
    if (ok)
        ok = s->guard_started = !pthread_create(&s->guard, NULL, guard_main, s);
    if (!ok) {
        ob_serve_free(s, 0);
        return ob_seterr(OB_EIO, "cannot start the server's threads");
    }
    *out = s;
    return 0;
}

int ob_serve_port(const struct ob_serve *s)
{
    return s->port;
}

int ob_serve_attach(struct ob_serve *s, struct ob_model *m, struct ob_ctx *ctx,
                    struct ob_engine *e, int parallel)
{
    s->m = m;
    s->ctx = ctx;
    s->e = e;
    s->tok = ob_model_tok(m);
    s->tmpl = ob_model_chat_template(m);
    s->parallel = parallel;
    s->n_ctx = ob_ctx_params(ctx)->n_ctx;
    /* by default a request may carry 65536 prompt tokens in all, or one whole context */
    s->max_request_tokens = s->p.max_request_tokens > 0 ? s->p.max_request_tokens
                            : s->n_ctx > 65536 ? s->n_ctx : 65536;
    s->route = ob_ctx_route(ctx);
    s->model_name = ob_model_name(m);
    int err = ob_model_sha256(m, &s->sha256);
    if (err)
        return err;
    if (s->p.alias) {
        snprintf(s->model_id, sizeof s->model_id, "%s", s->p.alias);
    } else {
        const char *path = ob_model_path(m), *base = strrchr(path, '/');
        snprintf(s->model_id, sizeof s->model_id, "%s", base ? base + 1 : path);
    }
    snprintf(s->fingerprint, sizeof s->fingerprint, "1b-%.16s", s->sha256);
    s->defaults = (struct ob_oai_srv_defaults){
        .max_tokens_chat = s->p.max_tokens_cap,
        .max_tokens_completion = 16 < s->p.max_tokens_cap ? 16 : s->p.max_tokens_cap,
        .max_tokens_cap = s->p.max_tokens_cap,
        .temperature = s->p.temperature,
        .seed = s->p.seed,
        .max_values = gen_max_values(s),
        .max_prompts = s->p.max_prompts,
    };
    if (pthread_create(&s->driver, NULL, driver, s))
        return ob_seterr(OB_EIO, "cannot start the engine thread");
    s->driver_started = true;
    pthread_mutex_lock(&s->mu);
    s->ready = true;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void ob_serve_quiesce(struct ob_serve *s)
{
    pthread_mutex_lock(&s->mu);
    bool was = s->quiesced;
    s->quiesced = true;
    s->draining = true;
    pthread_mutex_unlock(&s->mu);
    if (was || !s->d)
        return;
    /* no new connections: MHD stops watching the listening socket, and closing it makes
     * new connections fail at once (a load balancer then tries another replica) */
    s->listen_fd = MHD_quiesce_daemon(s->d);
    if (s->listen_fd != MHD_INVALID_SOCKET) {
        close(s->listen_fd);
        s->listen_fd = MHD_INVALID_SOCKET;
    }
}

int ob_serve_in_flight(struct ob_serve *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n_open_gen;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void ob_serve_cancel_all(struct ob_serve *s)
{
    /* under mu: a job of the registry is not finalized meanwhile (the order is mu, then the
     * engine's lock) */
    pthread_mutex_lock(&s->mu);
    for (struct sreq *r = s->head; r; r = r->next)
        if (r->n_live && r->why == W_NONE) {
            r->why = W_SHUTDOWN;
            cancel_parts(r);
        }
    pthread_mutex_unlock(&s->mu);
}

void ob_serve_free(struct ob_serve *s, double linger)
{
    if (!s)
        return;
    if (s->d) {
        ob_serve_quiesce(s);
        if (s->e)
            ob_serve_cancel_all(s);
        /* close the connections that are not being answered: a request still on its way in
         * would only get 503, so a client slow to send one does not hold the stop up */
        guard_pass(s, true);
        /* let the answers go out: every job finishes (the driver resumes its connection)
         * and MHD completes every request */
        double until = now() + linger;
        for (;;) {
            pthread_mutex_lock(&s->mu);
            bool busy = s->head != NULL;
            for (struct sreq *r = s->head; r; r = r->next)
                busy |= r->n_live > 0;
            pthread_mutex_unlock(&s->mu);
            if (!busy || now() > until)
                break;
            usleep(10000);
        }
        /* MHD refuses to stop with suspended connections (it aborts): wait until the driver
         * has finished every cancelled job, which resumes its connection */
        bool suspended = true;
        for (int k = 0; suspended && k < 6000; k++) {
            if (s->e)
                ob_serve_cancel_all(s);
            suspended = false;
            pthread_mutex_lock(&s->mu);
            for (struct sreq *r = s->head; r; r = r->next)
                suspended |= r->suspended;
            pthread_mutex_unlock(&s->mu);
            if (suspended)
                usleep(10000);
        }
        if (!suspended)
            MHD_stop_daemon(s->d);     /* else leave it to the process's exit */
        s->d = NULL;
    }
    if (s->guard_started) {
        pthread_mutex_lock(&s->cmu);
        s->guard_stop = true;
        pthread_cond_signal(&s->guard_cond);
        pthread_mutex_unlock(&s->cmu);
        pthread_join(s->guard, NULL);
    }
    /* prep threads finish what is queued (MHD is stopped: nothing more comes) */
    pthread_mutex_lock(&s->mu);
    s->prep_stop = true;
    pthread_cond_broadcast(&s->prep_cond);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_prep; i++)
        pthread_join(s->prep_th[i], NULL);
    if (s->driver_started) {
        pthread_mutex_lock(&s->mu);
        s->driver_stop = true;
        pthread_mutex_unlock(&s->mu);
        ob_engine_wake(s->e);
        pthread_join(s->driver, NULL);
    }
    /* requests MHD completed while their jobs ran are freed when the jobs finish; the
     * engine is freed by the caller after us, so drop what is left here */
    serve_destroy(s);
}
