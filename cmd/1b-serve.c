/*
 * 1b-serve — an OpenAI-compatible HTTP server over the continuous-batching engine.
 *
 *   1b-serve -m MODEL [-d ROUTE] [--host ADDR] [--port N] [--parallel N] [options]
 *
 * It listens first (so that /health can say "loading"), then loads the model, builds the
 * context and the engine exactly as 1b-gen does, and serves until SIGTERM, SIGINT, SIGHUP or
 * SIGQUIT: then it stops accepting connections, lets running requests finish for --grace
 * seconds, cancels the rest and exits 0. SIGUSR1, SIGUSR2 and SIGALRM are logged and
 * ignored, SIGPIPE and SIGXFSZ ignored (a write fails instead), so that no signal an operator
 * or a library may send ends the server without its drain. Everything about HTTP is in
 * lib/net/serve.c; the numbers are the engine's, so an answer's bits do not depend on what else
 * the server is doing.
 *
 * Logs go to standard error, one JSON object per line: startup and shutdown events and one
 * line per request.
 *
 * Exit status (1b(7)): 0 stopped by a signal, 2 usage, 3 bad model, 4 route unavailable,
 * 5 other failure (the address is in use, ...).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "1b.h"
#include "local.h"
#include "net/serve.h"
#include "cli.h"

#define PROG "1b-serve"

enum {
    OPT_PARALLEL = 256, OPT_HOST, OPT_PORT, OPT_HTTP_THREADS,
    OPT_QUEUE, OPT_MAX_BODY, OPT_MAX_TOKENS_CAP, OPT_TIMEOUT, OPT_IDLE_TIMEOUT, OPT_GRACE,
    OPT_API_KEY, OPT_API_KEY_FILE, OPT_ALIAS, OPT_TEMPERATURE, OPT_SEED, OPT_HEADER_TIMEOUT,
    OPT_BODY_TIMEOUT, OPT_MAX_CONNECTIONS, OPT_MAX_PER_CLIENT, OPT_MAX_PROMPTS,
    OPT_MAX_REQUEST_TOKENS,
};

static const struct ob_option options[] = {
    {"model", 'm', "MODEL", "the model (GGUF, or an archive holding one)"},
    OB_OPT_ROWS_LOCAL,
    {"parallel", OPT_PARALLEL, "N", "requests decoded together: the slots (default 4)"},
    OB_OPT_ROW_CHUNK,
    OB_OPT_ROW_CTX,
    OB_OPT_ROW_CACHE_SLOTS,
    OB_OPT_ROWS_SPEC,
    {"host", OPT_HOST, "ADDR", "address to listen on (default 127.0.0.1)"},
    {"port", OPT_PORT, "N", "port to listen on; 0 = any free one (default 8080)"},
    {"http-threads", OPT_HTTP_THREADS, "N", "HTTP threads, and as many that parse bodies (default 4)"},
    {"queue", OPT_QUEUE, "N", "requests that may wait for a slot; more get 503 (default 64)"},
    {"max-body", OPT_MAX_BODY, "BYTES", "largest request body, K, M or G suffix (default 4M)"},
    {"max-prompts", OPT_MAX_PROMPTS, "N", "prompts one /v1/completions request may carry (default 64)"},
    {"max-request-tokens", OPT_MAX_REQUEST_TOKENS, "N", "prompt tokens of one request, all its prompts (default 65536, or --ctx if more)"},
    {"max-tokens-cap", OPT_MAX_TOKENS_CAP, "N", "largest max_tokens a request may ask (default 4096)"},
    {"timeout", OPT_TIMEOUT, "SECONDS", "time limit of a generation request; 0 = none (default 600)"},
    {"idle-timeout", OPT_IDLE_TIMEOUT, "SECONDS", "close connections silent this long (default 60)"},
    {"header-timeout", OPT_HEADER_TIMEOUT, "SECONDS", "time for a request's headers to arrive; 0 = none (default 10)"},
    {"body-timeout", OPT_BODY_TIMEOUT, "SECONDS", "time for a request's body to arrive; 0 = none (default 30)"},
    {"max-connections", OPT_MAX_CONNECTIONS, "N", "open connections in all (default 1024)"},
    {"max-connections-per-client", OPT_MAX_PER_CLIENT, "N", "open connections from one address; 0 = no limit (default 128)"},
    {"grace", OPT_GRACE, "SECONDS", "on SIGTERM or SIGHUP, time running requests get to finish (default 30)"},
    {"api-key", OPT_API_KEY, "KEY", "require 'Authorization: Bearer KEY' (not on /health, /livez)"},
    {"api-key-file", OPT_API_KEY_FILE, "FILE", "the same, the key read from the first line of FILE"},
    {"alias", OPT_ALIAS, "NAME", "the model id in answers and /v1/models (default: the file name)"},
    {"temperature", OPT_TEMPERATURE, "T", "temperature of requests that set none (default 1)"},
    {"seed", OPT_SEED, "N", "seed of requests that set none (default 0)"},
    OB_OPT_ROWS_SHARED,
    {0},
};

/* one line per call, written with one write(2) so that lines never interleave */
static void log_line(void *user, const char *line)
{
    size_t n = strlen(line);
    char *b = malloc(n + 1);
    if (!b)
        return;
    memcpy(b, line, n);
    b[n] = '\n';
    ssize_t w = write(2, b, n + 1);
    (void)w;
    free(b);
}

static void event(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(const char *name, const char *fmt, ...)
{
    char body[1024], line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "{\"event\":\"%s\"%s%s}", name, *body ? "," : "", body);
    log_line(NULL, line);
}

/* a string as a JSON literal, for the few events that carry one */
static const char *jstr(const char *s, char *buf, size_t cap)
{
    char *t = ob_utf8_sanitize(s, strlen(s));
    cJSON *j = cJSON_CreateString(t ? t : "");
    free(t);
    char *p = j ? cJSON_PrintUnformatted(j) : NULL;
    snprintf(buf, cap, "%s", p ? p : "\"\"");
    free(p);
    cJSON_Delete(j);
    return buf;
}

static int usage_error(const char *msg)
{
    fprintf(stderr, PROG ": %s\nusage: " PROG " -m MODEL [options]  (see " PROG " --help)\n", msg);
    return OB_EXIT_USAGE;
}

static int seconds_opt(const char *name, const char *arg, double *out)
{
    if (ob_parse_f64(arg, out) || !(*out >= 0 && *out <= 1e7)) {
        ob_seterr(OB_EUSAGE, "--%s: '%s' is not a number of seconds", name, arg);
        return 1;
    }
    return 0;
}

static int read_key_file(const char *path, char **out)
{
    if (strcmp(path, "-") == 0)                  /* a file name here, not standard input */
        path = "./-";
    FILE *f;
    int e = ob_open_input(path, &f);
    if (e)
        return e;
    char *line = NULL;
    size_t cap = 0, n;
    int got = ob_read_line(f, path, 1, 4096, &line, &cap, &n);    /* a key is one short line */
    fclose(f);
    if (got <= 0) {
        free(line);
        return got < 0 ? got : ob_seterr(OB_EFORMAT, "%s: empty", path);
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
                     line[n - 1] == '\t'))
        line[--n] = 0;
    if (n == 0) {
        free(line);
        return ob_seterr(OB_EFORMAT, "%s: the first line is empty", path);
    }
    *out = line;
    return 0;
}

/* What a signal does: drain and exit 0 (as SIGTERM), or be logged and ignored. SIGHUP drains,
 * since a hangup of the terminal would otherwise end the server at once, unless it was
 * ignored when we started (nohup): then it stays ignored. */
static const int drain_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
static const int note_signals[] = {SIGUSR1, SIGUSR2, SIGALRM};

static bool drains(int sig)
{
    for (size_t i = 0; i < sizeof drain_signals / sizeof *drain_signals; i++)
        if (sig == drain_signals[i])
            return true;
    return false;
}

static const char *sig_name(int sig)
{
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGALRM: return "SIGALRM";
    }
    return "signal";
}

/* Enough file descriptors for --max-connections, the model, the listening socket and the
 * threads' own: raise the soft limit if it is too low (up to the hard one); if even that is
 * too low, serve fewer connections and say so. */
static int fd_room(int *max_conn)
{
    enum { SPARE = 64 };
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    rlim_t need = (rlim_t)*max_conn + SPARE;
    if (rl.rlim_cur >= need)
        return 0;
    rlim_t had = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl))
        rl.rlim_cur = had;
    if (rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_cur <= SPARE + 16) {
        fprintf(stderr, PROG ": only %llu file descriptors may be open (ulimit -n): too few\n",
                (unsigned long long)rl.rlim_cur);
        return OB_EXIT_FAILURE;
    }
    *max_conn = (int)(rl.rlim_cur - SPARE);
    event("warning", "\"message\":\"--max-connections lowered to %d: only %llu file descriptors "
                     "may be open (ulimit -n)\"", *max_conn, (unsigned long long)rl.rlim_cur);
    return 0;
}

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t w = write(sig_pipe[1], &c, 1);    /* async-signal-safe */
    (void)w;
    errno = saved;
}

/* the next signal caught, or 0 after ms milliseconds (-1: no limit) */
static int wait_signal(int ms)
{
    struct pollfd p = {.fd = sig_pipe[0], .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    unsigned char c;
    return read(sig_pipe[0], &c, 1) == 1 ? c : 0;
}

static double mono(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The model, its context and its engine are made on a thread of their own, so that a signal
 * during a long load (a large file's checksum, an archive's extraction) is answered at once.
 * The loader says it is done with this byte on the signal pipe. */
#define LOADED 255

struct load {
    struct ob_local_params lp;
    struct ob_local *L;
    int err;
    char msg[1024];                /* ob_errmsg() of the loader's thread */
    double secs;
};

static void *load_main(void *arg)
{
    struct load *L = arg;
    double t0 = mono();
    int e = ob_local_open(&L->lp, &L->L);
    const char *sha;
    if (!e)
        e = ob_model_sha256(L->L->m, &sha);  /* computed once, here rather than in main */
    if (e)
        snprintf(L->msg, sizeof L->msg, "%s", ob_errmsg());
    L->err = e;
    L->secs = mono() - t0;
    unsigned char c = LOADED;
    ssize_t w = write(sig_pipe[1], &c, 1);
    (void)w;
    return NULL;
}

int main(int argc, char **argv)
{
    ob_blas_env(argc, argv);               /* before getopt permutes argv: may re-exec */
    const char *key_file = NULL;
    struct ob_route_opts ro = OB_ROUTE_OPTS_DEFAULT;
    struct ob_local_params *lp = &ro.lp;
    lp->parallel = 4;
    double grace = 30, temperature;
    struct ob_serve_params sp = {
        .host = "127.0.0.1", .port = 8080, .http_threads = 4, .queue = 64, .max_prompts = 64,
        .max_body = 4 << 20, .max_tokens_cap = 4096, .timeout = 600, .idle_timeout = 60,
        .header_timeout = 10, .body_timeout = 30, .max_connections = 1024, .max_per_client = 128,
        .temperature = 1.0f, .seed = 0, .log = log_line,
    };
    struct ob_cmdline cl = {PROG, PROG " -m MODEL [options]",
                            "Serve a model over HTTP with an OpenAI-compatible API.",
                            options};
    int c;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        switch (c) {
        case 'm': lp->model = optarg; break;
        case OPT_PARALLEL: cl.bad = !ob_opt_int("parallel", optarg, 1, 256, &lp->parallel); break;
        case OPT_HOST: sp.host = optarg; break;
        case OPT_PORT: cl.bad = !ob_opt_int("port", optarg, 0, 65535, &sp.port); break;
        case OPT_HTTP_THREADS: cl.bad = !ob_opt_int("http-threads", optarg, 2, 256, &sp.http_threads); break;
        case OPT_QUEUE: cl.bad = !ob_opt_int("queue", optarg, 0, 1 << 20, &sp.queue); break;
        case OPT_MAX_PROMPTS:
            cl.bad = !ob_opt_int("max-prompts", optarg, 1, 1 << 16, &sp.max_prompts);
            break;
        case OPT_MAX_REQUEST_TOKENS:
            cl.bad = !ob_opt_int("max-request-tokens", optarg, 1, 1 << 30,
                                 &sp.max_request_tokens);
            break;
        case OPT_MAX_BODY: {
            uint64_t v;
            cl.bad = !ob_opt_size("max-body", optarg, 1, (uint64_t)1 << 34, &v);
            sp.max_body = (size_t)v;
            break;
        }
        case OPT_MAX_TOKENS_CAP:
            cl.bad = !ob_opt_int("max-tokens-cap", optarg, 1, 1 << 24, &sp.max_tokens_cap);
            break;
        case OPT_TIMEOUT: cl.bad = seconds_opt("timeout", optarg, &sp.timeout); break;
        case OPT_IDLE_TIMEOUT: cl.bad = !ob_opt_int("idle-timeout", optarg, 0, 1 << 24, &sp.idle_timeout); break;
        case OPT_GRACE: cl.bad = seconds_opt("grace", optarg, &grace); break;
        case OPT_HEADER_TIMEOUT: cl.bad = seconds_opt("header-timeout", optarg, &sp.header_timeout); break;
        case OPT_BODY_TIMEOUT: cl.bad = seconds_opt("body-timeout", optarg, &sp.body_timeout); break;
        case OPT_MAX_CONNECTIONS:
            cl.bad = !ob_opt_int("max-connections", optarg, 16, 1 << 20, &sp.max_connections);
            break;
        case OPT_MAX_PER_CLIENT:
            cl.bad = !ob_opt_int("max-connections-per-client", optarg, 0, 1 << 20,
                                 &sp.max_per_client);
            break;
        case OPT_API_KEY: sp.api_key = optarg; break;
        case OPT_API_KEY_FILE: key_file = optarg; break;
        case OPT_ALIAS: sp.alias = optarg; break;
        case OPT_TEMPERATURE:
            if (!(cl.bad = !ob_opt_num("temperature", optarg, 0, 100, &temperature)))
                sp.temperature = (float)temperature;
            break;
        case OPT_SEED: cl.bad = !ob_opt_u64("seed", optarg, 0, OB_SEED_MAX, &sp.seed); break;
        default: cl.bad = ob_opt_route(c, optarg, &ro) < 0; break;
        }
    }
    if (cl.stop)
        return cli_answer(&cl);
    if (cl.bad)
        return usage_error(cli_reason(&cl));
    if (optind < argc)
        return usage_error("unexpected argument (the model goes with -m)");
    if (!lp->model)
        return usage_error("no model (-m MODEL)");
    if (ro.url)
        return usage_error("-d: a server URL is not a route 1b-serve can run (-d cpu, hrx, ...)");
    if (sp.api_key && key_file)
        return usage_error("--api-key and --api-key-file exclude each other");
    if (sp.api_key && !*sp.api_key)
        return usage_error("--api-key: the key is empty");
    char *file_key = NULL;
    if (key_file) {
        int e = read_key_file(key_file, &file_key);
        if (e) {
            fprintf(stderr, PROG ": --api-key-file: %s\n", ob_errmsg());
            return OB_EXIT_DATA;
        }
        sp.api_key = file_key;
    }

    if (fd_room(&sp.max_connections)) {
        free(file_key);
        return OB_EXIT_FAILURE;
    }

    /* Signals: a handler that writes the signal's number to a pipe, read by this thread
     * below. Whichever thread the kernel picks (libraries may start threads of their own
     * before main, with the signals unblocked), the signal ends up here. Writes to a closed
     * socket give EPIPE, and writes past a file size limit EFBIG, not a signal. */
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK)) {
        perror(PROG ": pipe");
        free(file_key);
        return OB_EXIT_FAILURE;
    }
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART}, old;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof drain_signals / sizeof *drain_signals; i++) {
        int sig = drain_signals[i];
        if (sig == SIGHUP && !sigaction(SIGHUP, NULL, &old) && old.sa_handler == SIG_IGN)
            continue;              /* nohup */
        sigaction(sig, &sa, NULL);
    }
    for (size_t i = 0; i < sizeof note_signals / sizeof *note_signals; i++)
        sigaction(note_signals[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);

    struct ob_serve *srv = NULL;
    int e = ob_serve_new(&sp, &srv);
    if (e) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        free(file_key);
        return e == OB_EUSAGE ? OB_EXIT_USAGE : OB_EXIT_FAILURE;
    }
    char js[600], jm[600];
    event("listening", "\"host\":%s,\"port\":%d,\"pid\":%d", jstr(sp.host, js, sizeof js),
          ob_serve_port(srv), (int)getpid());
    event("loading", "\"model\":%s", jstr(lp->model, jm, sizeof jm));

    struct load L = {.lp = *lp};
    pthread_t loader;
    if (pthread_create(&loader, NULL, load_main, &L)) {
        fprintf(stderr, PROG ": cannot start a thread\n");
        ob_serve_free(srv, 0);
        free(file_key);
        return OB_EXIT_FAILURE;
    }
    int sig;
    while ((sig = wait_signal(-1)) != LOADED) {
        if (drains(sig)) {
            /* stop without waiting for the load: nothing is being served yet; _exit, since
             * the loader's thread is still running (as if killed, but with a log line) */
            event("stopped", "\"cancelled\":0,\"signal\":\"%s\",\"while\":\"loading\"",
                  sig_name(sig));
            ob_serve_free(srv, 0);
            _exit(OB_EXIT_OK);
        }
        if (sig)
            event("signal", "\"signal\":\"%s\",\"action\":\"ignored\"", sig_name(sig));
    }
    pthread_join(loader, NULL);
    struct ob_local *loc = L.L;
    e = L.err;
    if (e)
        fprintf(stderr, PROG ": %s\n", L.msg);
    else if ((e = ob_serve_attach(srv, loc->m, loc->ctx, loc->eng, lp->parallel)))
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
    if (e) {
        ob_serve_free(srv, 0);
        ob_local_free(loc);
        free(file_key);
        return ob_exit_status(e);
    }
    const char *sha = NULL;
    ob_model_sha256(loc->m, &sha);
    const struct ob_ctx_params *cp = ob_ctx_params(loc->ctx);
    event("ready", "\"model\":%s,\"name\":%s,\"sha256\":\"%s\",\"route\":\"%s\",\"device\":\"%s\","
                   "\"parallel\":%d,\"ctx\":%d,\"threads\":%d,\"load_s\":%.3f",
          jstr(lp->model, jm, sizeof jm), jstr(ob_model_name(loc->m), js, sizeof js),
          sha ? sha : "", ob_ctx_route(loc->ctx), ob_ctx_device(loc->ctx),
          lp->parallel, cp->n_ctx, cp->n_threads, L.secs);

    /* serve until a signal that drains; then drain */
    while (!drains(sig = wait_signal(-1)))
        if (sig)
            event("signal", "\"signal\":\"%s\",\"action\":\"ignored\"", sig_name(sig));
    event("draining", "\"signal\":\"%s\",\"in_flight\":%d,\"grace_s\":%g", sig_name(sig),
          ob_serve_in_flight(srv), grace);
    ob_serve_quiesce(srv);
    double until = mono() + grace;
    bool again = false;
    while (ob_serve_in_flight(srv) > 0 && mono() < until) {
        if (drains(sig = wait_signal(20))) {
            again = true;              /* a second signal: do not wait any longer */
            break;
        }
        if (sig)
            event("signal", "\"signal\":\"%s\",\"action\":\"ignored\"", sig_name(sig));
    }
    int left = ob_serve_in_flight(srv);
    if (left)
        event("cancelling", "\"in_flight\":%d,\"reason\":\"%s\"", left,
              again ? "second signal" : "grace period over");
    ob_serve_cancel_all(srv);
    ob_serve_free(srv, 5);
    ob_local_free(loc);
    free(file_key);
    event("stopped", "\"cancelled\":%d", left);
    return OB_EXIT_OK;
}
