/*
 * http.c — unit tests of the URL route's pieces that need no server (TAP):
 *  - ob_http_base: URLs parsed by libcurl's URL API up front (a usage error for one that does
 *    not parse, is not http(s) or names no host), the server's root for ob_http_join (a
 *    trailing /v1 dropped, a query kept for every request, a fragment dropped), and the route
 *    as records show it (as given, or without user:password);
 *  - ob_http_new refuses an API key with a control character (header injection);
 *  - ob_oai_cli_error_text: the message of an error reply, else the body's start when it is text,
 *    else what it is, always one line of valid UTF-8.
 */
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "net/oai-client.h"
#include "tap.h"

static void base(void)
{
    static const struct { const char *url, *path, *joined, *route; } c[] = {
        {"http://127.0.0.1:8080", "/health", "http://127.0.0.1:8080/health",
         "http://127.0.0.1:8080"},
        {"http://h:1/v1/", "/v1/models", "http://h:1/v1/models", "http://h:1/v1/"},
        {"https://h/api/v1?key=x#frag", "/v1/completions", "https://h/api/v1/completions?key=x",
         "https://h/api/v1?key=x#frag"},
        {"http://user:secret@h:1/", "/health", "http://user:secret@h:1/health", "http://h:1/"},
        {"http://user@[::1]:8/v1", "/health", "http://user@[::1]:8/health", "http://[::1]:8/v1"},
    };
    int good = 1;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *b = NULL, *r = NULL, *j = NULL;
        int e = ob_http_base(c[i].url, &b, &r);
        j = e ? NULL : ob_http_join(b, c[i].path);
        if (e || !j || strcmp(j, c[i].joined) || strcmp(r, c[i].route)) {
            printf("# %s: %s, joined %s, route %s\n", c[i].url, e ? ob_errmsg() : "ok",
                   j ? j : "-", r ? r : "-");
            good = 0;
        }
        free(b);
        free(r);
        free(j);
    }
    ok(good, "ob_http_base: the root (no /v1, query kept, fragment dropped) and the route "
       "without user:password");
    static const char *const bad[] = {"http://[::1", "ftp://h/", "http://", "localhost:8080",
                                      "http://h:99999/", "http://a b/", "http://h/\r\nX: y",
                                      ""};
    good = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *b = (char *)1, *r = (char *)1;
        int e = ob_http_base(bad[i], &b, &r);
        if (e != OB_EUSAGE || b || r || strstr(ob_errmsg(), "secret")) {
            printf("# '%s': %d %s\n", bad[i], e, ob_errmsg());
            good = 0;
        }
    }
    ok(good, "ob_http_base: URLs libcurl does not parse, other schemes, no host: OB_EUSAGE");
    char *b = NULL;
    int e = ob_http_base("http://u:secret@[::1", &b, NULL);
    ok(e == OB_EUSAGE && !strstr(ob_errmsg(), "secret"),
       "a URL that does not parse is not repeated in the message (%s)", ob_errmsg());
}

static void key(void)
{
    static const char *const bad[] = {"k\r\nX-Injected: 1", "k\n", "k\tx", "k\x7f"};
    int good = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ob_http_opts o = OB_HTTP_OPTS_DEFAULT;
        o.api_key = bad[i];
        struct ob_http *h = (struct ob_http *)1;
        int e = ob_http_new(&o, &h);
        good &= e == OB_EUSAGE && !h && strstr(ob_errmsg(), "OB_API_KEY holds a control") != NULL;
    }
    struct ob_http_opts o = OB_HTTP_OPTS_DEFAULT;
    o.api_key = "sk-good_key.123";
    struct ob_http *h = NULL;
    good &= ob_http_new(&o, &h) == 0 && h;
    ob_http_free(h);
    ok(good, "ob_http_new: an API key with CR, LF, tab or DEL is refused (OB_EUSAGE); a plain "
       "one is taken");
}

static void error_text(void)
{
    char t[64];
#define B(s) s, sizeof s - 1
    static const struct { const char *body; size_t len; const char *want; } c[] = {
        {B("{\"error\":{\"message\":\"slot crashed\"}}"), "slot crashed"},
        {B("{\"error\":\"plain\"}"), "plain"},
        {B("{\"message\":\"bad \\u001b[31m\\nred \xff\"}"), "bad  [31m red \xef\xbf\xbd"},
        {B(""), "(empty reply)"},
        {B("\0\1\xff\xfe\x89PNG"), "(a binary reply of 8 bytes)"},
        {B("Bad Gateway\r\n"), "Bad Gateway  "},
        {B("\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
           "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"
           "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"),
         NULL},
    };
    int good = 1;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ob_oai_cli_error_text(c[i].body, c[i].len, t, sizeof t);
        size_t n = strlen(t);
        bool clean = ob_utf8_valid(t, n);
        for (size_t k = 0; k < n; k++)
            clean &= (unsigned char)t[k] >= 0x20 && t[k] != 0x7f;
        /* the long one: whole characters, then "..." */
        bool want = c[i].want ? strcmp(t, c[i].want) == 0
                              : n > 3 && n < sizeof t && strcmp(t + n - 3, "...") == 0 &&
                                    (n - 3) % 3 == 0;
        if (!clean || !want) {
            printf("# case %zu: '%s'\n", i, t);
            good = 0;
        }
    }
    ok(good, "ob_oai_cli_error_text: the message, or the body's start, or what it is; one line of "
       "valid UTF-8, cut between characters");
}

int main(void)
{
    base();
    key();
    error_text();
    return tap_done();
}
