/*
 * http.c — the HTTP client of the URL route: URLs taken apart and joined with libcurl's URL
 * API, and transfers on a curl multi handle, retrying connection errors only (see http.h).
 * What the transfers carry (OpenAI's wire format) is oai-client.c's.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "net/http.h"
#include "sb.h"

#define MAX_REPLY ((size_t)256 << 20)     /* a reply larger than this is refused */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int oom(void)
{
    return ob_seterr(OB_ENOMEM, "out of memory");
}

/* ---- URLs ------------------------------------------------------------------------------------ */

/* URLs are taken apart and put together by libcurl's URL API (curl_url), which is what
 * libcurl itself will read them with. */

/* url parsed into a new handle; OB_EUSAGE when libcurl refuses it (the message does not repeat
 * the URL: it may hold a password) */
static int url_parse(const char *url, CURLU **out)
{
    *out = curl_url();
    if (!*out)
        return oom();
    CURLUcode rc = curl_url_set(*out, CURLUPART_URL, url, 0);
    if (rc == CURLUE_OK)
        return 0;
    curl_url_cleanup(*out);
    *out = NULL;
    if (rc == CURLUE_OUT_OF_MEMORY)
        return oom();
    return ob_seterr(OB_EUSAGE, "not a valid URL (%s)", curl_url_strerror(rc));
}

/* the URL without its user name and password (see http.h) */
char *ob_http_shown(const char *url)
{
    CURLU *u;
    if (url_parse(url, &u))
        return strdup("(invalid URL)");
    char *user = NULL, *pass = NULL, *opts = NULL, *s = NULL;
    curl_url_get(u, CURLUPART_USER, &user, 0);
    curl_url_get(u, CURLUPART_PASSWORD, &pass, 0);
    curl_url_get(u, CURLUPART_OPTIONS, &opts, 0);
    if (!user && !pass && !opts) {
        s = strdup(url);
    } else if (curl_url_set(u, CURLUPART_USER, NULL, 0) == CURLUE_OK &&
               curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
               curl_url_set(u, CURLUPART_OPTIONS, NULL, 0) == CURLUE_OK) {
        char *c = NULL;
        if (curl_url_get(u, CURLUPART_URL, &c, 0) == CURLUE_OK)
            s = strdup(c);
        curl_free(c);
    }
    curl_free(user);
    curl_free(pass);
    curl_free(opts);
    curl_url_cleanup(u);
    return s;
}

int ob_http_base(const char *url, char **base, char **route)
{
    *base = NULL;
    if (route)
        *route = NULL;
    CURLU *u;
    int e = url_parse(url, &u);
    if (e)
        return e;
    char *scheme = NULL, *host = NULL, *path = NULL, *b = NULL;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
        e = ob_seterr(OB_EUSAGE, "not an http:// or https:// URL (%s://)", scheme ? scheme : "?");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
        e = ob_seterr(OB_EUSAGE, "the URL names no host");
        goto out;
    }
    /* the server's root: without trailing slashes and an OpenAI-style "/v1"; a fragment is
     * never sent, a query is kept for every request */
    if (curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        e = oom();
        goto out;
    }
    size_t n = strlen(path);
    while (n > 0 && path[n - 1] == '/')
        n--;
    if (n >= 3 && memcmp(path + n - 3, "/v1", 3) == 0)
        n -= 3;
    while (n > 0 && path[n - 1] == '/')
        n--;
    path[n] = 0;
    if (curl_url_set(u, CURLUPART_PATH, n ? path : "/", 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &b, 0) != CURLUE_OK || !(*base = strdup(b))) {
        e = oom();
        goto out;
    }
    if (route && !(*route = ob_http_shown(url))) {
        free(*base);
        *base = NULL;
        e = oom();
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(path);
    curl_free(b);
    curl_url_cleanup(u);
    return e;
}

char *ob_http_join(const char *base, const char *path)
{
    CURLU *u;
    if (url_parse(base, &u))
        return NULL;
    char *bp = NULL, *p = NULL, *s = NULL, *out = NULL;
    if (curl_url_get(u, CURLUPART_PATH, &bp, 0) == CURLUE_OK) {
        size_t n = strlen(bp);
        while (n > 0 && bp[n - 1] == '/')
            n--;
        if (asprintf(&p, "%.*s%s", (int)n, bp, path) < 0)
            p = NULL;
    }
    if (p && curl_url_set(u, CURLUPART_PATH, p, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK)
        out = strdup(s);
    curl_free(bp);
    curl_free(s);
    free(p);
    curl_url_cleanup(u);
    return out;
}

/* ---- transport ------------------------------------------------------------------------------- */

struct xfer {
    CURL *easy;
    char *url, *body;
    char *shown;                   /* url without its credentials, for messages */
    void *user;
    struct ob_sb resp;             /* the reply's body so far */
    bool too_big;
    bool replied;                  /* a header line or a body byte has come */
    bool head_done;                /* the reply's (last) header block has ended */
    int attempts;
    bool active;                   /* in the multi handle */
    double retry_at;               /* waiting to be re-added */
    double t0;
    char errbuf[CURL_ERROR_SIZE];
    struct xfer *next;
};

struct ob_http {
    CURLM *multi;
    struct ob_http_opts o;
    struct curl_slist *hdr;
    struct xfer *xs;               /* pending, in start order */
    struct ob_http_result **done;  /* finished, not yet returned (FIFO) */
    size_t n_done, cap_done;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int ob_http_new(const struct ob_http_opts *o, struct ob_http **out)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return ob_seterr(OB_EDEVICE, "libcurl: %s", curl_easy_strerror(curl_init_rc));
    struct ob_http *h = calloc(1, sizeof *h);
    if (!h)
        return oom();
    h->o = *o;
    /* the key becomes a header line: CR or LF in it would add headers of its own */
    for (const char *p = o->api_key; p && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            free(h);
            return ob_seterr(OB_EUSAGE, "OB_API_KEY holds a control character (0x%02x at byte "
                             "%zu); it cannot be sent in a header", (unsigned char)*p,
                             (size_t)(p - o->api_key) + 1);
        }
    h->multi = curl_multi_init();
    h->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    /* no "Expect: 100-continue" round trip before a large body */
    h->hdr = h->hdr ? curl_slist_append(h->hdr, "Expect:") : NULL;
    if (h->hdr && o->api_key && *o->api_key) {
        char *a = NULL;
        if (asprintf(&a, "Authorization: Bearer %s", o->api_key) < 0)
            a = NULL;
        struct curl_slist *l = a ? curl_slist_append(h->hdr, a) : NULL;
        free(a);
        if (!l) {
            curl_slist_free_all(h->hdr);
            h->hdr = NULL;
        } else {
            h->hdr = l;
        }
    }
    if (!h->multi || !h->hdr) {
        ob_http_free(h);
        return oom();
    }
    *out = h;
    return 0;
}

static void xfer_free(struct ob_http *h, struct xfer *x)
{
    if (x->easy) {
        if (x->active)
            curl_multi_remove_handle(h->multi, x->easy);
        curl_easy_cleanup(x->easy);
    }
    free(x->url);
    free(x->shown);
    free(x->body);
    ob_sb_free(&x->resp);
    free(x);
}

void ob_http_result_free(struct ob_http_result *r)
{
    if (!r)
        return;
    free(r->body);
    free(r);
}

void ob_http_free(struct ob_http *h)
{
    if (!h)
        return;
    while (h->xs) {
        struct xfer *x = h->xs;
        h->xs = x->next;
        xfer_free(h, x);
    }
    for (size_t i = 0; i < h->n_done; i++)
        ob_http_result_free(h->done[i]);
    free(h->done);
    if (h->multi)
        curl_multi_cleanup(h->multi);
    curl_slist_free_all(h->hdr);
    free(h);
}

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
    struct xfer *x = user;
    size_t k = size * n;
    if (x->resp.len + k + 1 > MAX_REPLY) {
        x->too_big = true;
        return 0;                      /* aborts the transfer */
    }
    ob_sb_add(&x->resp, p, k);
    if (x->resp.oom)
        return 0;
    x->replied = true;
    return k;
}

/* One whole header line at a time, the empty line that ends a block included. A status line
 * starts a block (a 1xx reply has one of its own before the real one). libcurl takes a
 * connection closed in the middle of the headers as the end of a reply with no body; without
 * the empty line that reply is known to be cut. */
static size_t on_header(char *p, size_t size, size_t n, void *user)
{
    struct xfer *x = user;
    size_t k = size * n;
    x->replied = true;
    if (k >= 5 && memcmp(p, "HTTP/", 5) == 0)
        x->head_done = false;
    else if ((k == 2 && p[0] == '\r' && p[1] == '\n') || (k == 1 && p[0] == '\n'))
        x->head_done = true;
    return k;
}

static int xfer_add(struct ob_http *h, struct xfer *x)
{
    ob_sb_reset(&x->resp);
    x->resp.oom = false;               /* a new attempt: its reply comes whole again */
    x->too_big = false;
    x->replied = false;
    x->head_done = false;
    x->errbuf[0] = 0;
    x->attempts++;
    x->t0 = now_s();
    x->retry_at = 0;
    if (curl_multi_add_handle(h->multi, x->easy) != CURLM_OK)
        return ob_seterr(OB_EINTERNAL, "curl_multi_add_handle failed");
    x->active = true;
    return 0;
}

int ob_http_start(struct ob_http *h, const char *url, const char *body, void *user)
{
    struct xfer *x = calloc(1, sizeof *x);
    if (!x)
        return oom();
    x->user = user;
    x->url = strdup(url);
    x->shown = ob_http_shown(url);
    x->body = body ? strdup(body) : NULL;
    x->easy = curl_easy_init();
    if (!x->url || !x->shown || (body && !x->body) || !x->easy) {
        xfer_free(h, x);
        return oom();
    }
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, x->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->hdr);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    /* a measuring client talks to the server it names: a proxy from the environment must not
     * take loopback traffic, unless the user set no_proxy themselves */
    if (!getenv("no_proxy") && !getenv("NO_PROXY"))
        curl_easy_setopt(e, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
    /* whole milliseconds, rounded up: 0 would mean no limit to libcurl */
    if (h->o.timeout_s > 0)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)ceil(h->o.timeout_s * 1000));
    if (h->o.connect_timeout_s > 0)
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)ceil(h->o.connect_timeout_s * 1000));
    if (body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
    }
    int err = xfer_add(h, x);
    if (err) {
        xfer_free(h, x);
        return err;
    }
    struct xfer **pp = &h->xs;
    while (*pp)
        pp = &(*pp)->next;
    *pp = x;
    return 0;
}

int ob_http_pending(const struct ob_http *h)
{
    int n = (int)h->n_done;
    for (const struct xfer *x = h->xs; x; x = x->next)
        n++;
    return n;
}

static bool retryable(CURLcode rc, const struct xfer *x)
{
    if (rc == CURLE_COULDNT_CONNECT)
        return true;
    /* closed or reset before any byte of a reply: the server went away, not the request */
    return (rc == CURLE_GOT_NOTHING || rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR) &&
           !x->replied;
}

static int push_done(struct ob_http *h, struct xfer *x, CURLcode rc)
{
    struct ob_http_result *r = calloc(1, sizeof *r);
    if (!r)
        return oom();
    r->user = x->user;
    r->attempts = x->attempts;
    r->seconds = now_s() - x->t0;
    r->body = ob_sb_take(&x->resp, &r->len);
    if (!r->body) {
        free(r);
        return oom();
    }
    /* A reply cut short is one failure wherever the cut falls (OB_EIO, as a timeout): in its
     * headers (libcurl reports success, see on_header) or in its body. */
    if (rc == CURLE_OK && x->head_done) {
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &r->status);
    } else if (rc == CURLE_OK) {
        r->err = OB_EIO;
        snprintf(r->msg, sizeof r->msg, "%.200s: the reply was cut short (in its headers)",
                 x->shown);
    } else {
        const char *why = x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc);
        if (x->too_big) {
            r->err = OB_EIO;
            snprintf(r->msg, sizeof r->msg, "%.200s: the reply is larger than %zu MiB", x->shown,
                     MAX_REPLY >> 20);
        } else if (retryable(rc, x) || rc == CURLE_COULDNT_RESOLVE_HOST) {
            r->err = OB_EDEVICE;
            snprintf(r->msg, sizeof r->msg, "%.200s: unreachable: %.200s (%d attempt%s)",
                     x->shown, why, x->attempts, x->attempts == 1 ? "" : "s");
        } else if (x->replied && rc != CURLE_OPERATION_TIMEDOUT) {
            r->err = OB_EIO;
            snprintf(r->msg, sizeof r->msg, "%.200s: the reply was cut short (%s: %.200s)",
                     x->shown, x->head_done ? "in its body" : "in its headers", why);
        } else {
            r->err = OB_EIO;
            snprintf(r->msg, sizeof r->msg, "%.200s: %.200s", x->shown, why);
        }
    }
    if (!OB_GROW(h->done, h->cap_done, h->n_done + 1)) {
        ob_http_result_free(r);
        return oom();
    }
    h->done[h->n_done++] = r;
    return 0;
}

static void unlink_xfer(struct ob_http *h, struct xfer *x)
{
    for (struct xfer **pp = &h->xs; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            return;
        }
}

/* one turn: re-add due retries, perform, collect finished transfers */
static int turn(struct ob_http *h)
{
    double t = now_s();
    for (struct xfer *x = h->xs; x; x = x->next)
        if (!x->active && x->retry_at > 0 && x->retry_at <= t) {
            int e = xfer_add(h, x);
            if (e)
                return e;
        }
    int still;
    if (curl_multi_perform(h->multi, &still) != CURLM_OK)
        return ob_seterr(OB_EINTERNAL, "curl_multi_perform failed");
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(h->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct xfer *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode rc = m->data.result;
        curl_multi_remove_handle(h->multi, x->easy);
        x->active = false;
        if (rc != CURLE_OK && !x->too_big && retryable(rc, x) &&
            x->attempts <= h->o.retries) {
            double pause = h->o.backoff_s;
            for (int i = 1; i < x->attempts && pause < h->o.backoff_max_s; i++)
                pause *= 2;
            if (pause > h->o.backoff_max_s)
                pause = h->o.backoff_max_s;
            x->retry_at = now_s() + (pause > 0 ? pause : 1e-3);
            continue;
        }
        int e = push_done(h, x, rc);
        unlink_xfer(h, x);
        xfer_free(h, x);
        if (e)
            return e;
    }
    return 0;
}

int ob_http_next(struct ob_http *h, double wait_s, struct ob_http_result **out)
{
    *out = NULL;
    double deadline = wait_s < 0 ? INFINITY : now_s() + wait_s;
    for (;;) {
        int e = turn(h);
        if (e)
            return e;
        if (h->n_done > 0) {
            *out = h->done[0];
            memmove(h->done, h->done + 1, (h->n_done - 1) * sizeof *h->done);
            h->n_done--;
            return 1;
        }
        if (!h->xs)
            return 0;
        double t = now_s();
        if (t >= deadline)
            return 0;
        /* sleep until a socket is ready, the next retry is due, or the deadline */
        double until = deadline;
        bool active = false;
        for (struct xfer *x = h->xs; x; x = x->next) {
            active |= x->active;
            if (!x->active && x->retry_at > 0 && x->retry_at < until)
                until = x->retry_at;
        }
        double ms = (until - t) * 1000;
        if (ms > 1000)
            ms = 1000;                 /* wake now and then whatever curl says */
        if (ms < 1)
            ms = 1;
        if (active) {
            if (curl_multi_poll(h->multi, NULL, 0, (int)ms, NULL) != CURLM_OK)
                return ob_seterr(OB_EINTERNAL, "curl_multi_poll failed");
        } else {
            struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                                  .tv_nsec = (long)fmod(ms * 1e6, 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}

int ob_http_fetch(struct ob_http *h, const char *url, const char *body,
                  struct ob_http_result **out)
{
    /* a marker only this call uses, so that other transfers' results stay queued */
    static char mine;
    *out = NULL;
    int e = ob_http_start(h, url, body, &mine);
    if (e)
        return e;
    struct ob_http_result **kept = NULL;
    size_t nk = 0, cap_kept = 0;
    for (;;) {
        struct ob_http_result *r;
        int k = ob_http_next(h, -1, &r);
        if (k < 0) {
            e = k;
            break;
        }
        if (!r) {                      /* k == 0: ob_http_next sets r when it returns 1 */
            e = ob_seterr(OB_EINTERNAL, "transfer lost");
            break;
        }
        if (r->user == &mine) {
            *out = r;
            break;
        }
        if (!OB_GROW(kept, cap_kept, nk + 1)) {
            ob_http_result_free(r);
            e = oom();
            break;
        }
        kept[nk++] = r;
    }
    /* put the others back, in order, ahead of anything queued since */
    for (size_t i = nk; i-- > 0;) {
        if (!OB_GROW(h->done, h->cap_done, h->n_done + 1)) {
            ob_http_result_free(kept[i]);
            continue;
        }
        memmove(h->done + 1, h->done, h->n_done * sizeof *h->done);
        h->done[0] = kept[i];
        h->n_done++;
    }
    free(kept);
    return e;
}
