/*
 * jsonl.c — JSON-lines records on top of cJSON, and exact float formatting.
 *
 * Records are one compact JSON object per line, written with one fwrite and flushed, so a
 * consumer in a pipe sees whole records and a crash never leaves half of one. Float32 values
 * are printed by us (shortest decimal that strtof reads back to the same bits) and inserted as
 * raw JSON; non-finite values become the strings "NaN", "Infinity", "-Infinity".
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"

struct ob_jsonl {
    FILE *f;
    char *name;
    char *line;
    size_t cap;
    uint64_t lineno, recline;
    bool rest;                     /* the last line was refused part-way: skip what is left */
};

/* ---- reading lines ----------------------------------------------------------------------- */

static size_t max_line = OB_MAX_LINE_DEFAULT;

void ob_set_max_line(size_t bytes) { max_line = bytes ? bytes : OB_MAX_LINE_DEFAULT; }
size_t ob_max_line(void) { return max_line; }

/*
 * getline() cannot tell a failed allocation from the end of input (it returns -1 for both, and
 * only a failed read sets the stream's error flag), reads a NUL byte as any other and grows
 * its buffer without bound. This reader grows the buffer itself, to at most max bytes, and
 * stops at the first NUL byte it reads, so that a line of /dev/zero costs one byte.
 */
int ob_read_line(FILE *f, const char *name, uint64_t lineno, size_t max, char **buf,
                 size_t *cap, size_t *len)
{
    size_t n = 0;
    int c = EOF;
    *len = 0;
    if (!*buf) {                          /* a line, even an empty one, is a string */
        if (!(*buf = malloc(256)))
            return ob_seterr(OB_ENOMEM, "%s:%llu: out of memory", name, (unsigned long long)lineno);
        *cap = 256;
    }
    flockfile(f);
    for (;;) {
        errno = 0;
        c = getc_unlocked(f);
        if (c == EOF || c == '\n' || c == 0)
            break;
        if (n == max) {
            funlockfile(f);
            return ob_seterr(OB_ERANGE, "%s:%llu: a line longer than %zu bytes", name,
                             (unsigned long long)lineno, max);
        }
        if (n + 2 > *cap) {
            size_t want = *cap < 256 ? 256 : *cap > max / 2 ? max + 2 : *cap * 2;
            char *p = realloc(*buf, want);
            if (!p) {
                funlockfile(f);
                return ob_seterr(OB_ENOMEM, "%s:%llu: out of memory reading a line of more than "
                                 "%zu bytes", name, (unsigned long long)lineno, n);
            }
            *buf = p;
            *cap = want;
        }
        (*buf)[n++] = (char)c;
    }
    int en = errno;
    bool failed = c == EOF && ferror(f);
    funlockfile(f);
    if (c == 0)
        return ob_seterr(OB_EFORMAT, "%s:%llu: a NUL byte at byte %zu of the line", name,
                         (unsigned long long)lineno, n + 1);
    if (failed)
        return ob_seterr(OB_EIO, "%s:%llu: read: %s", name, (unsigned long long)lineno,
                         strerror(en ? en : EIO));
    if (c == EOF && n == 0)
        return 0;
    (*buf)[n] = 0;
    *len = n;
    return 1;
}

/* ---- JSON lines -------------------------------------------------------------------------- */

int ob_jsonl_open(FILE *f, const char *name, struct ob_jsonl **out)
{
    struct ob_jsonl *r = calloc(1, sizeof *r);
    if (!r || !(r->name = strdup(name ? name : "-"))) {
        free(r);
        return ob_seterr(OB_ENOMEM, "out of memory");
    }
    r->f = f;
    *out = r;
    return 0;
}

void ob_jsonl_close(struct ob_jsonl *r)
{
    if (!r)
        return;
    free(r->line);
    free(r->name);
    free(r);
}

uint64_t ob_jsonl_line(const struct ob_jsonl *r) { return r->recline; }
const char *ob_jsonl_name(const struct ob_jsonl *r) { return r->name; }

int ob_jsonl_next_line(struct ob_jsonl *r, char **line, size_t *len)
{
    if (r->rest) {
        /* a tool that goes on after a refused line: the rest of it, read and dropped */
        int c;
        errno = 0;
        while ((c = getc(r->f)) != EOF && c != '\n')
            errno = 0;
        if (c == EOF && ferror(r->f))
            return ob_seterr(OB_EIO, "%s:%llu: read: %s", r->name,
                             (unsigned long long)r->lineno, strerror(errno ? errno : EIO));
        r->rest = false;
    }
    size_t n;
    int got = ob_read_line(r->f, r->name, r->lineno + 1, max_line, &r->line, &r->cap, &n);
    if (got == 0 || got == OB_EIO)
        return got;
    r->recline = ++r->lineno;
    if (got < 0) {
        r->rest = true;
        if (got == OB_ERANGE)           /* the limit is the command's option */
            ob_seterr(got, "%s (the limit: --max-line)", ob_errmsg());
        return got;
    }
    while (n && r->line[n - 1] == '\r')
        r->line[--n] = 0;
    *line = r->line;
    *len = n;
    return 1;
}

/* the name in parentheses: the function itself, not 1b.h's macro for the analyzer */
int (ob_jsonl_next)(struct ob_jsonl *r, cJSON **out)
{
    *out = NULL;
    for (;;) {
        char *line;
        size_t len;
        int got = ob_jsonl_next_line(r, &line, &len);
        if (got <= 0)
            return got;
        size_t i = 0;
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i == len)
            continue;                     /* blank line */
        cJSON *j;
        int e = ob_json_parse(line, len, 0, &j);
        if (e)
            return ob_errprefix(e, "%s:%llu", r->name, (unsigned long long)r->lineno);
        if (!cJSON_IsObject(j)) {
            cJSON_Delete(j);
            return ob_seterr(OB_EFORMAT, "%s:%llu: a record must be a JSON object", r->name,
                             (unsigned long long)r->lineno);
        }
        *out = j;
        return 1;
    }
}

/*
 * cJSON prints a number with "%1.15g" whenever that reads back within a relative DBL_EPSILON
 * of it, which is not always the same double: 9007199254740992 (2^53) comes out as
 * 9.00719925474099e+15, which reads back as 9007199254740990. A non-finite number it prints
 * as null. Such numbers are printed here as the shortest decimal that reads back to the same
 * double (ob_f64_str), and non-finite ones as the strings "NaN", "Infinity", "-Infinity".
 */
static bool inexact(const cJSON *it)
{
    double d = it->valuedouble;
    if (!isfinite(d))
        return true;
    if (d == (double)it->valueint)
        return false;                  /* printed with %d */
    char b[32];
    snprintf(b, sizeof b, "%1.15g", d);
    return strtod(b, NULL) != d;
}

static bool any_inexact(const cJSON *j)
{
    for (; j; j = j->next)
        if ((cJSON_IsNumber(j) && inexact(j)) || any_inexact(j->child))
            return true;
    return false;
}

/* every inexact number under parent replaced by its exact text; false when out of memory */
static bool make_exact(cJSON *parent)
{
    for (cJSON *j = parent->child, *next; j; j = next) {
        next = j->next;
        if (cJSON_IsNumber(j) && inexact(j)) {
            cJSON *x = ob_json_f64(j->valuedouble);
            if (!x)
                return false;
            /* the member's name goes with it (cJSON_ReplaceItemViaPointer keeps none) */
            x->string = j->string;
            x->type |= j->type & cJSON_StringIsConst;
            j->string = NULL;
            if (!cJSON_ReplaceItemViaPointer(parent, j, x)) {
                cJSON_Delete(x);
                return false;
            }
        } else if (j->child && !make_exact(j)) {
            return false;
        }
    }
    return true;
}

char *ob_json_print(const cJSON *j)
{
    if (!any_inexact(j))
        return cJSON_PrintUnformatted(j);
    /* a copy whose numbers are exact: the caller's tree stays as it is */
    cJSON *root = cJSON_CreateArray(), *c = cJSON_Duplicate(j, true);
    char *s = NULL;
    if (root && c) {
        cJSON_AddItemToArray(root, c);
        if (make_exact(root))
            s = cJSON_PrintUnformatted(root->child);
    } else {
        cJSON_Delete(c);
    }
    cJSON_Delete(root);
    return s;
}

int ob_jsonl_write(FILE *f, const cJSON *rec)
{
    char *s = ob_json_print(rec);
    if (!s)
        return ob_seterr(OB_ENOMEM, "out of memory formatting a record");
    size_t n = strlen(s);
    /* cJSON copies a string's bytes as they are: a string that holds ill-formed UTF-8 (text
     * from a server's reply that a writer did not clean) would make the line invalid JSON.
     * Such bytes occur only inside strings, so replacing them by U+FFFD keeps every string
     * where it is; the exact bytes of a token are in its "bytes" array. */
    if (!ob_utf8_valid(s, n)) {
        char *t = ob_utf8_sanitize(s, n);
        cJSON_free(s);
        if (!t)
            return ob_seterr(OB_ENOMEM, "out of memory formatting a record");
        n = strlen(t);
        s = cJSON_malloc(n + 1);
        if (s)
            memcpy(s, t, n + 1);
        free(t);
        if (!s)
            return ob_seterr(OB_ENOMEM, "out of memory formatting a record");
    }
    s[n] = '\n';                          /* replaces the NUL; we know the length */
    errno = 0;
    size_t w = fwrite(s, 1, n + 1, f);
    cJSON_free(s);
    if (w != n + 1 || fflush(f) != 0)
        return ob_seterr(OB_EIO, "write: %s", strerror(errno ? errno : EIO));
    return 0;
}

/* ---- reading JSON text ------------------------------------------------------------------- */

int ob_utf8_len(const char *s, const char *end)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = *p;
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || end - s < n || (n == 1 && c == 0))
        return 0;
    if (n == 1)
        return 1;
    uint32_t cp = c & (0x7f >> n);
    for (int k = 1; k < n; k++) {
        if ((p[k] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[k] & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

bool ob_utf8_valid(const char *s, size_t n)
{
    const char *end = s + n;
    while (s < end) {
        if (!*s) {                       /* NUL is valid UTF-8 (JSON rejects it raw anyway) */
            s++;
            continue;
        }
        int k = ob_utf8_len(s, end);
        if (!k)
            return false;
        s += k;
    }
    return true;
}

/* the value of 4 hex digits at p (p + 4 <= end), or -1 */
static long hex4(const char *p, const char *end)
{
    if (end - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/*
 * What cJSON 1.7.15 does not refuse but cannot carry (see 1b.h): one pass over the bytes that
 * knows only whether it is inside a string. The JSON grammar itself is cJSON's to check; where
 * the text is not JSON this pass may name a problem that cJSON would have reported elsewhere,
 * and the text is refused either way. Offsets in messages count bytes from 1.
 *
 * The same pass counts the values, as cJSON will make one node of each: a string (unless a
 * colon follows it: a key, which cJSON keeps in its value's node), a number, a literal, an
 * array, an object. With max_values it stops at the first value beyond the bound.
 */
static int json_check(const char *text, size_t len, int flags, size_t max_values)
{
    const char *p = text, *end = text + len;
    bool in_str = false;
    bool str = false;              /* a string has ended: a value, unless a colon follows */
    size_t values = 0;
    int depth = 0;                 /* arrays and objects open */
#define VALUE()                                                                                 \
    do {                                                                                        \
        if (++values > max_values && max_values)                                                \
            return ob_seterr(OB_ERANGE, "more than %zu JSON values (at byte %zu)", max_values,  \
                             (size_t)(p - text) + 1);                                           \
    } while (0)
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        size_t at = (size_t)(p - text) + 1;
        if (c >= 0x80) {
            int k = ob_utf8_len(p, end);
            if (!k && !(in_str && (flags & OB_JSON_ANY_BYTES)))
                return ob_seterr(OB_EFORMAT, "invalid UTF-8 at byte %zu", at);
            p += k ? k : 1;
            continue;
        }
        if (c == 0)
            return ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: a NUL byte", at);
        if (!in_str) {
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
                return ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: control byte 0x%02x", at,
                                 c);
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                p++;
                continue;
            }
            if (str && c != ':')
                VALUE();           /* the string before was a value, not a key */
            str = false;
            if (c == '[' || c == '{') {
                VALUE();
                /* cJSON refuses deeper text as if it were not JSON: say why */
                if (++depth > CJSON_NESTING_LIMIT)
                    return ob_seterr(OB_EFORMAT, "JSON nested more than %d deep at byte %zu (the "
                                     "nesting limit)", CJSON_NESTING_LIMIT, at);
            } else if (c == ']' || c == '}') {
                depth--;
            } else if (c == 't' || c == 'f' || c == 'n') {
                VALUE();               /* true, false, null: cJSON checks the spelling */
                while (p < end && *p >= 'a' && *p <= 'z')
                    p++;
                continue;
            }
            if (c == '-' || (c >= '0' && c <= '9')) {
                VALUE();
                /* a number cJSON would read as infinity and write back as null: the whole of
                 * it (cJSON reads a number of any length), copied to end it with a NUL */
                size_t k = 0;
                while (p + k < end && p[k] && strchr("+-.eE0123456789", p[k]))
                    k++;
                char small[64], *num = k < sizeof small ? small : malloc(k + 1);
                if (!num)
                    return ob_seterr(OB_ENOMEM, "out of memory");
                memcpy(num, p, k);
                num[k] = 0;
                bool inf = isinf(strtod(num, NULL));
                if (inf)
                    ob_seterr(OB_EFORMAT, "a number out of range at byte %zu: %.40s", at, num);
                if (num != small)
                    free(num);
                if (inf)
                    return OB_EFORMAT;
                p += k;
                continue;
            }
            in_str = c == '"';
            p++;
            continue;
        }
        if (c < 0x20)
            return ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: raw control byte 0x%02x in a "
                             "string (JSON writes it as \\u%04x)", at, c, c);
        if (c == '"') {
            in_str = false;
            str = true;
            p++;
            continue;
        }
        if (c != '\\') {
            p++;
            continue;
        }
        if (end - p < 2)
            return ob_seterr(OB_EFORMAT, "invalid JSON: the text ends early");
        char e = p[1];
        if (e && strchr("\"\\/bfnrt", e)) {
            p += 2;
            continue;
        }
        if (e != 'u')
            return (unsigned char)e > 0x20 && (unsigned char)e < 0x7f
                   ? ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: \\%c is not an escape", at, e)
                   : ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: an invalid escape", at);
        long u = hex4(p + 2, end);
        if (u < 0)
            return ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: \\u without 4 hex digits", at);
        if (u == 0)
            return ob_seterr(OB_EFORMAT, "\\u0000 at byte %zu: text with a NUL character is "
                             "not supported (it would be cut there)", at);
        if (u >= 0xdc00 && u <= 0xdfff)
            return ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: unpaired surrogate \\u%04lx",
                             at, u);
        if (u >= 0xd800 && u <= 0xdbff) {
            long lo = end - p >= 12 && p[6] == '\\' && p[7] == 'u' ? hex4(p + 8, end) : -1;
            if (!(lo >= 0xdc00 && lo <= 0xdfff))
                return ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu: unpaired surrogate "
                                 "\\u%04lx", at, u);
            p += 12;
            continue;
        }
        p += 6;
    }
    if (str)
        VALUE();
#undef VALUE
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * A member name given twice in one object, anywhere in j: OB_EFORMAT naming it and where it is
 * (path: where j is, "" for the root). cJSON keeps both members and finds the first; Python,
 * JavaScript, Go and jq keep the last, so a proxy in front of 1b would read another request
 * than 1b runs. Names compare as cJSON holds them, escapes resolved ("a" is "\u0061").
 */
static int json_dup(const cJSON *j, char *path, size_t at, size_t cap)
{
    if (cJSON_IsObject(j)) {
        size_t n = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            n++;
        const char *small[16], **names = n <= 16 ? small : malloc(n * sizeof *names);
        if (!names)
            return ob_seterr(OB_ENOMEM, "out of memory");
        n = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            names[n++] = c->string ? c->string : "";
        qsort(names, n, sizeof *names, name_cmp);
        const char *twice = NULL;
        for (size_t i = 1; i < n && !twice; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                twice = names[i];
        int e = 0;
        if (twice)
            e = ob_seterr(OB_EFORMAT, "the key \"%.80s\" appears twice in %s%s (refused: JSON "
                          "readers differ on which value counts)", twice,
                          at ? "the object at " : "the same object", path);
        if (names != small)
            free(names);
        if (e)
            return e;
    }
    size_t i = 0;
    for (const cJSON *c = j->child; c; c = c->next, i++) {
        if (!c->child)
            continue;
        int k = cJSON_IsObject(j) ? snprintf(path + at, cap - at, "%s%.40s", at ? "." : "",
                                             c->string ? c->string : "")
                                  : snprintf(path + at, cap - at, "[%zu]", i);
        size_t next = k < 0 || (size_t)k >= cap - at ? cap - 1 : at + (size_t)k;
        int e = json_dup(c, path, next, cap);
        path[at] = 0;
        if (e)
            return e;
    }
    return 0;
}

int ob_json_parse(const char *text, size_t len, int flags, cJSON **out)
{
    return ob_json_parse_max(text, len, flags, 0, out);
}

int ob_json_parse_max(const char *text, size_t len, int flags, size_t max_values, cJSON **out)
{
    *out = NULL;
    int e = json_check(text, len, flags, max_values);
    if (e)
        return e;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!j) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        if (at >= len)
            return ob_seterr(OB_EFORMAT, "invalid JSON: the text ends early");
        return ob_seterr(OB_EFORMAT, "invalid JSON at byte %zu", at + 1);
    }
    /* nothing but blanks may follow the value */
    size_t k = end ? (size_t)(end - text) : len;
    while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r'))
        k++;
    if (k < len) {
        cJSON_Delete(j);
        return ob_seterr(OB_EFORMAT, "extra data after the JSON value at byte %zu", k + 1);
    }
    char path[256] = "";
    if ((e = json_dup(j, path, 0, sizeof path))) {
        cJSON_Delete(j);
        return e;
    }
    *out = j;
    return 0;
}

/* ---- exact floats ------------------------------------------------------------------------ */

/* gcc cannot bound "%.*g" and warns that 32 bytes might not hold it; at most 17 significant
 * digits, a sign, a point and a 4-digit exponent always fit. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* The fewest %g digits that read back to the same value. More digits never lose the round
 * trip, so the property is monotonic in the precision and a binary search finds the least. */
static bool f32_back(float v, int prec, char *buf)
{
    snprintf(buf, OB_F32_BUFSZ, "%.*g", prec, (double)v);
    float back = strtof(buf, NULL);
    return memcmp(&back, &v, 4) == 0;
}

static bool f64_back(double v, int prec, char *buf)
{
    snprintf(buf, OB_F32_BUFSZ, "%.*g", prec, v);
    double back = strtod(buf, NULL);
    return memcmp(&back, &v, 8) == 0;
}

#pragma GCC diagnostic pop

const char *ob_f32_str(float v, char buf[OB_F32_BUFSZ])
{
    if (isnan(v))
        return strcpy(buf, "NaN");
    if (isinf(v))
        return strcpy(buf, v < 0 ? "-Infinity" : "Infinity");
    /* integers below 2^24 print as integers ("10000", not "1e+04"); every one of their
     * digits but trailing zeros is needed, so this is still the shortest form */
    if (v > -16777216.0f && v < 16777216.0f && v == (float)(int32_t)v) {
        snprintf(buf, OB_F32_BUFSZ, "%lld", (long long)v);
        if (v == 0.0f && 1.0f / v < 0.0f)
            strcpy(buf, "-0");
        return buf;
    }
    int lo = 1, hi = 9;                   /* 9 significant digits always round-trip */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (f32_back(v, mid, buf))
            hi = mid;
        else
            lo = mid + 1;
    }
    f32_back(v, lo, buf);
    return buf;
}

const char *ob_f64_str(double v, char buf[OB_F32_BUFSZ])
{
    if (isnan(v))
        return strcpy(buf, "NaN");
    if (isinf(v))
        return strcpy(buf, v < 0 ? "-Infinity" : "Infinity");
    /* whole numbers up to 2^53 as integers too (a seed: "9007199254740992", not 9.007e+15) */
    if (v >= -9007199254740992.0 && v <= 9007199254740992.0 && v == (double)(int64_t)v) {
        snprintf(buf, OB_F32_BUFSZ, "%lld", (long long)v);
        if (v == 0.0 && 1.0 / v < 0.0)
            strcpy(buf, "-0");
        return buf;
    }
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (f64_back(v, mid, buf))
            hi = mid;
        else
            lo = mid + 1;
    }
    f64_back(v, lo, buf);
    return buf;
}

const char *ob_f32_hex(float v, char buf[OB_F32_BUFSZ])
{
    uint32_t u;
    memcpy(&u, &v, 4);
    snprintf(buf, OB_F32_BUFSZ, "%08x", u);
    return buf;
}

int ob_f32_from_hex(const char *s, float *out)
{
    uint32_t u = 0;
    int i;
    for (i = 0; i < 8; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return ob_seterr(OB_EFORMAT, "'%s' is not 8 hex digits", s);
        u = u << 4 | (uint32_t)d;
    }
    if (s[i])
        return ob_seterr(OB_EFORMAT, "'%s' is not 8 hex digits", s);
    memcpy(out, &u, 4);
    return 0;
}

static cJSON *json_float(double v, const char *txt)
{
    if (isfinite(v))
        return cJSON_CreateRaw(txt);
    return cJSON_CreateString(txt);
}

cJSON *ob_json_f32(float v)
{
    char b[OB_F32_BUFSZ];
    return json_float(v, ob_f32_str(v, b));
}

cJSON *ob_json_f64(double v)
{
    char b[OB_F32_BUFSZ];
    return json_float(v, ob_f64_str(v, b));
}

void ob_json_add_int(cJSON *o, const char *key, int64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    cJSON_AddItemToObject(o, key, cJSON_CreateRaw(b));
}

void ob_json_add_u64(cJSON *o, const char *key, uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    cJSON_AddItemToObject(o, key, cJSON_CreateRaw(b));
}

cJSON *ob_json_bytes(const void *b, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        char s[8];
        snprintf(s, sizeof s, "%u", ((const unsigned char *)b)[i]);
        cJSON_AddItemToArray(a, cJSON_CreateRaw(s));
    }
    return a;
}

cJSON *ob_json_ids(const int32_t *ids, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        char s[16];
        snprintf(s, sizeof s, "%d", (int)ids[i]);
        cJSON_AddItemToArray(a, cJSON_CreateRaw(s));
    }
    return a;
}

int ob_json_get_f32(const cJSON *it, float *out, bool *exact)
{
    bool ex = true;
    if (cJSON_IsString(it)) {
        const char *s = it->valuestring;
        if (strcmp(s, "NaN") == 0)
            *out = NAN;
        else if (strcmp(s, "Infinity") == 0)
            *out = INFINITY;
        else if (strcmp(s, "-Infinity") == 0)
            *out = -INFINITY;
        else
            return ob_seterr(OB_EFORMAT, "'%s' is not a number", s);
    } else if (cJSON_IsNumber(it)) {
        double d = it->valuedouble;
        float f = (float)d;
        ex = (double)f == d;
        *out = f;
    } else {
        return ob_seterr(OB_EFORMAT, "expected a number");
    }
    if (exact)
        *exact = ex;
    return 0;
}
