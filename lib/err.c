/*
 * err.c — the thread-local error message, OB_E* names, and the map from library errors to the
 * exit statuses every command shares (1b(7), EXIT STATUS).
 *
 * A message is one line of text whatever it quotes (a file name, a model's metadata, a
 * request's field): control bytes and bytes that are not well-formed UTF-8 are written as
 * \xNN, so that a hostile value can neither break the line nor reach a terminal raw.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "1b.h"

static _Thread_local char errbuf[1024];

/* the length of the well-formed UTF-8 sequence at p (at most n bytes), 0 if there is none */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!k || k > n)
        return 0;
    uint32_t cp = k == 1 ? c : c & (0x7fu >> k);
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k;
}

/* src into errbuf: printable text as it is, anything else as \xNN (cut to fit) */
static void set_escaped(const char *src)
{
    const unsigned char *p = (const unsigned char *)src;
    size_t n = strlen(src), o = 0;
    while (n) {
        size_t k = utf8_len(p, n);
        bool raw = k > 1 || (k == 1 && p[0] >= 0x20 && p[0] != 0x7f);
        size_t need = raw ? k : 4;
        if (o + need >= sizeof errbuf)
            break;
        if (raw)
            memcpy(errbuf + o, p, k);
        else
            snprintf(errbuf + o, 5, "\\x%02x", p[0]);
        o += need;
        p += raw ? k : 1;
        n -= raw ? k : 1;
    }
    errbuf[o] = 0;
}

/* the names in parentheses: the functions themselves, not 1b.h's macros for the analyzer */
int (ob_seterr)(int err, const char *fmt, ...)
{
    char msg[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_escaped(msg);
    return err;
}

int (ob_errprefix)(int err, const char *fmt, ...)
{
    char old[sizeof errbuf], pre[512], msg[sizeof errbuf + sizeof pre];
    va_list ap;
    memcpy(old, errbuf, sizeof old);
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s: %s", pre, old);   /* old is escaped already */
    set_escaped(msg);
    return err;
}

const char *ob_errmsg(void)
{
    return errbuf[0] ? errbuf : "no error";
}

const char *ob_strerror(int err)
{
    switch (err) {
    case OB_OK: return "ok";
    case OB_EUSAGE: return "invalid argument";
    case OB_EFORMAT: return "malformed input";
    case OB_EIO: return "i/o error";
    case OB_ENOMEM: return "out of memory";
    case OB_EUNSUPP: return "unsupported";
    case OB_EDEVICE: return "device unavailable";
    case OB_ERANGE: return "out of range";
    case OB_ENOTFOUND: return "not found";
    case OB_EINTERNAL: return "internal error";
    }
    return "unknown error";
}

int ob_exit_status(int err)
{
    switch (err) {
    case OB_OK: return OB_EXIT_OK;
    case OB_EUSAGE: return OB_EXIT_USAGE;
    case OB_EFORMAT:
    case OB_EUNSUPP:
    case OB_ERANGE:
    case OB_ENOTFOUND: return OB_EXIT_DATA;
    case OB_EDEVICE: return OB_EXIT_DEVICE;
    }
    return OB_EXIT_FAILURE;
}
