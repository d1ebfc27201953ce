/*
 * sb.c — growing buffers: the byte string builder and array growth (see sb.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "sb.h"

/* the buffer at capacity cap exactly (cap > len) */
static bool resize(struct ob_sb *b, size_t cap)
{
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

bool ob_sb_reserve(struct ob_sb *b, size_t n)
{
    if (b->oom)
        return false;
    if (n > SIZE_MAX - 1 - b->len) {
        b->oom = true;
        return false;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap && b->p)    /* (p is NULL only while cap is 0; said for the analyzer) */
        return true;
    size_t cap = b->cap ? (b->cap <= SIZE_MAX / 2 ? 2 * b->cap : SIZE_MAX) : 256;
    return resize(b, cap > need ? cap : need);
}

bool ob_sb_grow_to(struct ob_sb *b, size_t cap)
{
    if (b->oom)
        return false;
    return cap <= b->cap || resize(b, cap);
}

void ob_sb_add(struct ob_sb *b, const void *s, size_t n)
{
    if (!ob_sb_reserve(b, n))
        return;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void ob_sb_str(struct ob_sb *b, const char *s)
{
    ob_sb_add(b, s, strlen(s));
}

void ob_sb_fmt(struct ob_sb *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        ob_sb_add(b, small, (size_t)n);
        return;
    }
    if (!ob_sb_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void ob_sb_json(struct ob_sb *b, const char *s, size_t n)
{
    /* worst case 6 bytes out per byte in (\u00XX) */
    if (n > (SIZE_MAX - 2) / 6 || !ob_sb_reserve(b, 6 * n + 2)) {
        b->oom = true;
        return;
    }
    char *q = b->p + b->len;
    *q++ = '"';
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        int k = ob_utf8_len((const char *)p, (const char *)end);
        if (!k) {
            memcpy(q, "\xef\xbf\xbd", 3);
            q += 3;
            p++;
            continue;
        }
        if (k > 1) {
            memcpy(q, p, (size_t)k);
            q += k;
            p += k;
            continue;
        }
        unsigned c = *p++;
        switch (c) {
        case '"': *q++ = '\\'; *q++ = '"'; break;
        case '\\': *q++ = '\\'; *q++ = '\\'; break;
        case '\n': *q++ = '\\'; *q++ = 'n'; break;
        case '\r': *q++ = '\\'; *q++ = 'r'; break;
        case '\t': *q++ = '\\'; *q++ = 't'; break;
        default:
            if (c < 0x20) {
                q += sprintf(q, "\\u%04x", c);
            } else {
                *q++ = (char)c;
            }
        }
    }
    *q++ = '"';
    b->len = (size_t)(q - b->p);
    b->p[b->len] = 0;
}

void ob_sb_lp(struct ob_sb *b, float lp)
{
    char s[OB_F32_BUFSZ];
    if (isfinite(lp))
        ob_sb_str(b, ob_f64_str((double)lp, s));
    else
        ob_sb_str(b, isnan(lp) ? "\"NaN\"" : lp < 0 ? "\"-Infinity\"" : "\"Infinity\"");
}

void ob_sb_reset(struct ob_sb *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = 0;
}

void ob_sb_free(struct ob_sb *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

char *ob_sb_take(struct ob_sb *b, size_t *len)
{
    if (!b->oom && !b->p)
        ob_sb_add(b, "", 0);
    if (b->oom) {
        ob_sb_free(b);
        return NULL;
    }
    char *p = b->p;
    if (len)
        *len = b->len;
    memset(b, 0, sizeof *b);
    return p;
}

bool ob_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return false;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        return false;
    void *p;
    memcpy(&p, pp, sizeof p);
    void *q = realloc(p, c * elem);
    if (!q)
        return false;
    memcpy(pp, &q, sizeof q);
    *cap = c;
    return true;
}
