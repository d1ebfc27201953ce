/*
 * http.h — the HTTP client of the URL route (http.c), on libcurl. What it carries is the
 * OpenAI-compatible wire format, mapped to and from 1b's records by oai-client.h.
 *
 * Transport. A struct ob_http runs any number of transfers at once on one curl multi handle:
 * every transfer started before the next call to ob_http_next is on the wire together (this is
 * how 1b-batchrep releases N requests at the same moment and 1b-gen --parallel keeps N in
 * flight). Only connection errors are retried — the connection was refused, or closed or reset
 * before any byte of a reply — up to `retries` more times, pausing backoff_s, then twice that,
 * up to backoff_max_s; a reply of any HTTP status is a result, and so is a timeout.
 *
 * Ownership: results and strings returned belong to the caller (free functions below, free()).
 * Threads: one struct ob_http is used by one thread at a time; distinct clients may run on
 * distinct threads.
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
/* The URL as records and messages show it: the URL as given, or without its user name and
 * password when it has them (libcurl sends them as basic authentication; they must not be
 * copied into every record and message). malloc'd; NULL when out of memory; a URL that libcurl
 * does not parse (refused before any transfer by ob_http_base) shows as a placeholder. */
char *ob_http_shown(const char *url);

#endif
