/*
 * err.c — the thread-local error message, OB_E* names, and the map from library errors to the
 * exit statuses every command shares (1b(7), EXIT STATUS).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "1b.h"

static _Thread_local char errbuf[1024];

int ob_seterr(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return err;
}

int ob_errprefix(int err, const char *fmt, ...)
{
    char old[sizeof errbuf], pre[512];
    va_list ap;
    memcpy(old, errbuf, sizeof old);
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(errbuf, sizeof errbuf, "%s: %s", pre, old);
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
