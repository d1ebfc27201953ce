/*
 * jsonl.c — unit tests of records and exact floats (TAP).
 *
 *  - float32 -> shortest decimal -> strtof gives the same bits, for millions of random bit
 *    patterns, every subnormal edge, signed zeros, extremes; non-finite values become strings;
 *  - the same decimal read back through cJSON (as a double, then rounded to float32) gives the
 *    same bits too, so records stay exact even for readers that ignore the hex field;
 *  - float64 shortest round trip;
 *  - the line reader: blank lines, CRLF, invalid JSON, non-objects, trailing garbage, NUL bytes,
 *    a 4 MiB line, with line numbers in every error, and the reader usable after each error;
 *  - its bound (ob_set_max_line): a line of exactly the limit is read, one byte more is
 *    OB_ERANGE after reading the limit and one byte, a NUL byte stops the read where it is,
 *    the rest of either line is skipped by the next call; a failed read (a directory) is
 *    OB_EIO, never the end of input;
 *  - ob_json_parse, the one JSON reader: every text that cJSON 1.7 would cut short or carry
 *    into invalid output (\u0000, \uZZZZ, unpaired surrogates, raw control bytes, ill-formed
 *    UTF-8) is refused with its byte offset, what it accepts is carried whole (strings
 *    compared byte for byte), OB_JSON_ANY_BYTES keeps a partial character's bytes;
 *  - the writer emits valid UTF-8 whatever bytes a string holds;
 *  - ob_json_parse_max counts exactly the nodes cJSON will make (keys are not values) and
 *    refuses a text with more before cJSON allocates anything;
 *  - ob_json_print writes every number so that it reads back to the same double (cJSON's own
 *    printer rounds 2^53 to 9.00719925474099e+15), names and order kept, non-finite numbers
 *    as strings, and leaves the caller's tree as it was.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "tap.h"



static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* one float: text round trip, and (when via_json) the cJSON round trip; 0 on success */
static int f32_case(uint32_t u, char *why, size_t whylen, bool via_json)
{
    float v = from_bits(u), back;
    char buf[OB_F32_BUFSZ];
    ob_f32_str(v, buf);
    if (isnan(v)) {
        if (strcmp(buf, "NaN") != 0)
            return snprintf(why, whylen, "%08x printed as %s", u, buf), 1;
        return 0;
    }
    if (isinf(v))
        return strcmp(buf, v < 0 ? "-Infinity" : "Infinity") != 0;
    back = strtof(buf, NULL);
    if (memcmp(&back, &v, 4) != 0)
        return snprintf(why, whylen, "%08x -> %s -> strtof differs", u, buf), 1;
    /* shortest: one digit fewer must not round-trip */
    int digits = 0;
    for (const char *c = buf; *c && *c != 'e'; c++)
        digits += *c >= '0' && *c <= '9';
    for (const char *c = buf; *c == '-' || *c == '0' || *c == '.'; c++)
        digits -= *c == '0';                  /* leading zeros are not significant */
    if (!strpbrk(buf, ".e"))                  /* nor the trailing zeros of an integer */
        for (const char *c = buf + strlen(buf) - 1; c > buf && *c == '0'; c--)
            digits--;
    if (digits > 1) {
        char shorter[512];
        snprintf(shorter, sizeof shorter, "%.*g", digits - 1, (double)v);
        float s2 = strtof(shorter, NULL);
        if (memcmp(&s2, &v, 4) == 0)
            return snprintf(why, whylen, "%08x -> %s is not the shortest (%.40s)", u, buf, shorter), 1;
    }
    if (!via_json)
        return 0;
    /* through a JSON document, parsed by cJSON as a double */
    cJSON *j = ob_json_f32(v);
    char *s = cJSON_PrintUnformatted(j);
    cJSON *p = cJSON_Parse(s);
    bool exact;
    int e = ob_json_get_f32(p, &back, &exact);
    int bad = e != 0 || memcmp(&back, &v, 4) != 0;
    if (bad)
        snprintf(why, whylen, "%08x -> %s -> cJSON -> differs", u, s);
    cJSON_free(s);
    cJSON_Delete(j);
    cJSON_Delete(p);
    return bad;
}

static void floats(void)
{
    char why[128] = "";
    long bad = 0, n = 0;
    const long N = 2000000;
    for (long i = 0; i < N; i++, n++)
        bad += f32_case((uint32_t)tap_rand(), why, sizeof why, i % 8 == 0);
    /* edges: zeros, subnormals, smallest/largest normals, around powers of ten */
    static const uint32_t edges[] = {0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff,
                                     0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0x3f7fffff,
                                     0x3f800001, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
                                     0x7f800001, 0x4b7fffff, 0x4b800000, 0x2edbe6ff};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++, n++)
        bad += f32_case(edges[i], why, sizeof why, true);
    for (uint32_t u = 0; u < 0x00800000; u += 97, n++)      /* subnormals, both signs */
        bad += f32_case(u, why, sizeof why, true) + f32_case(u | 0x80000000u, why, sizeof why, true);
    ok(bad == 0, "%ld float32 values: shortest decimal round-trips (1 in 8 also through cJSON)%s%s", n,
       bad ? ": " : "", why);

    char buf[OB_F32_BUFSZ];
    ok(strcmp(ob_f32_str(0.1f, buf), "0.1") == 0 && strcmp(ob_f32_str(-0.031780876f, buf),
       "-0.031780876") == 0 && strcmp(ob_f32_str(1e-45f, buf), "1e-45") == 0,
       "shortest decimals: 0.1, -0.031780876, 1e-45");
    ok(strcmp(ob_f32_hex(1.0f, buf), "3f800000") == 0, "hex of 1.0 is 3f800000");
    float f;
    ok(ob_f32_from_hex("bd022caa", &f) == 0 && strcmp(ob_f32_str(f, buf), "-0.031780876") == 0 &&
       ob_f32_from_hex("bd022ca", &f) == OB_EFORMAT && ob_f32_from_hex("bd022caag", &f) ==
       OB_EFORMAT, "hex parsing, and its errors");

    cJSON *j = ob_json_f32(NAN);
    char *s = cJSON_PrintUnformatted(j);
    ok(strcmp(s, "\"NaN\"") == 0, "NaN is written as the string \"NaN\", not null");
    cJSON_free(s);
    cJSON_Delete(j);
    j = ob_json_f32(-INFINITY);
    s = cJSON_PrintUnformatted(j);
    cJSON *p = cJSON_Parse(s);
    ok(strcmp(s, "\"-Infinity\"") == 0 && ob_json_get_f32(p, &f, NULL) == 0 && isinf(f) && f < 0,
       "-Infinity round-trips as a string");
    cJSON_free(s);
    cJSON_Delete(j);
    cJSON_Delete(p);

    /* a wire value that is not a float32 (a float64 log-probability) is flagged */
    p = cJSON_Parse("-0.1");
    bool exact = true;
    ob_json_get_f32(p, &f, &exact);
    ok(!exact && f == -0.1f, "-0.1 as a double is not exactly a float32: flagged, rounded");
    cJSON_Delete(p);
    p = cJSON_Parse("-0.031780876219272614");        /* (double)(float) of the value above */
    ob_json_get_f32(p, &f, &exact);
    ok(exact && strcmp(ob_f32_hex(f, buf), "bd022caa") == 0, "a float32 widened to double is exact");
    cJSON_Delete(p);

    long bad64 = 0;
    for (long i = 0; i < 1000000; i++) {
        uint64_t u = tap_rand();
        double d, back;
        memcpy(&d, &u, 8);
        if (isnan(d) || isinf(d))
            continue;
        char b64[OB_F32_BUFSZ];
        ob_f64_str(d, b64);
        back = strtod(b64, NULL);
        bad64 += memcmp(&back, &d, 8) != 0;
    }
    ok(bad64 == 0, "1000000 float64 values round-trip through their shortest decimal");
}

/* what one ob_jsonl_next gives: rc, the line, the record's id or a needle of the message, and
 * where the stream stands after it (-1: anywhere) */
struct step {
    int rc;
    uint64_t line;
    const char *id, *needle;
    long at;
};

/* the reader through the steps in turn; 1 when each came as said */
static int steps(struct ob_jsonl *r, FILE *f, const struct step *want, size_t n)
{
    int good = 1;
    for (size_t i = 0; i < n; i++) {
        cJSON *rec;
        int rc = ob_jsonl_next(r, &rec);
        const cJSON *id = rec ? cJSON_GetObjectItemCaseSensitive(rec, "id") : NULL;
        int g = rc == want[i].rc && ob_jsonl_line(r) == want[i].line;
        if (want[i].id)
            g = g && cJSON_IsString(id) && strcmp(id->valuestring, want[i].id) == 0;
        if (want[i].needle)
            g = g && strstr(ob_errmsg(), want[i].needle) != NULL;
        if (want[i].at >= 0)
            g = g && ftell(f) == want[i].at;
        if (!g) {
            printf("# step %zu: rc %d line %llu at %ld msg %s\n", i, rc,
                   (unsigned long long)ob_jsonl_line(r), ftell(f), rc < 0 ? ob_errmsg() : "");
            good = 0;
        }
        cJSON_Delete(rec);
    }
    return good;
}

static void reader(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/in.jsonl", dir);
    FILE *f = fopen(path, "wb");
    fputs("{\"id\":\"a\"}\n", f);                         /* 1 */
    fputs("\n   \n", f);                                  /* 2, 3 blank */
    fputs("{\"id\":\"b\",\"x\":[1,2]}\r\n", f);           /* 4 CRLF */
    fputs("{\"id\":\n", f);                               /* 5 truncated JSON */
    fputs("[1,2,3]\n", f);                                /* 6 not an object */
    fputs("{\"id\":\"c\"} junk\n", f);                    /* 7 trailing garbage */
    fputs("{\"id\":\"d\"}   \n", f);                      /* 8 trailing blanks are fine */
    fwrite("{\"id\":\"e\0\"}\n", 1, 12, f);               /* 9 NUL byte */
    fputs("{\"id\":\"big\",\"s\":\"", f);                 /* 10: a 4 MiB line */
    for (int i = 0; i < (4 << 20); i++)
        fputc('a' + i % 26, f);
    fputs("\"}\n", f);
    fputs("{\"id\":\"last\"}", f);                        /* 11, no final newline */
    fclose(f);

    f = fopen(path, "rb");
    struct ob_jsonl *r;
    ob_jsonl_open(f, "in.jsonl", &r);
    cJSON *rec;
    static const struct step want[] = {
        {1, 1, "a", NULL, -1}, {1, 4, "b", NULL, -1},
        {OB_EFORMAT, 5, NULL, "in.jsonl:5: invalid JSON", -1},
        {OB_EFORMAT, 6, NULL, "in.jsonl:6: a record must be a JSON object", -1},
        {OB_EFORMAT, 7, NULL, "in.jsonl:7: extra data", -1}, {1, 8, "d", NULL, -1},
        {OB_EFORMAT, 9, NULL, "in.jsonl:9: a NUL byte at byte 9 of the line", -1},
        {1, 10, "big", NULL, -1}, {1, 11, "last", NULL, -1}, {0, 11, NULL, NULL, -1},
    };
    int good = steps(r, f, want, sizeof want / sizeof want[0]);
    ok(good, "reader: records, blank lines, CRLF, errors with line numbers, 4 MiB line, no final newline");
    ob_jsonl_close(r);
    fclose(f);

    /* writer: one line per record, unknown fields and raw numbers kept as given */
    snprintf(path, sizeof path, "%s/out.jsonl", dir);
    f = fopen(path, "wb");
    rec = cJSON_Parse("{\"id\":\"x\",\"keep\":{\"nested\":[true,null]}}");
    cJSON_AddItemToObject(rec, "lp", ob_json_f32(-0.031780876f));
    int e = ob_jsonl_write(f, rec);
    cJSON_Delete(rec);
    fclose(f);
    f = fopen(path, "rb");
    char line[256] = "";
    fgets(line, sizeof line, f);
    fclose(f);
    ok(e == 0 && strcmp(line, "{\"id\":\"x\",\"keep\":{\"nested\":[true,null]},\"lp\":-0.031780876}\n") == 0,
       "writer: compact line, newline, fields kept");
    f = fopen("/dev/full", "wb");
    if (f) {
        rec = cJSON_Parse("{\"id\":\"x\"}");
        ok(ob_jsonl_write(f, rec) == OB_EIO, "a full disk is reported (OB_EIO)");
        cJSON_Delete(rec);
        fclose(f);
    } else {
        printf("ok %d - # SKIP no /dev/full\n", ++n_test);
    }
}

/* ---- ob_json_parse ------------------------------------------------------------------------ */

#define TXT(s) s, sizeof s - 1

static void bounded(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/bounded.jsonl", dir);
    FILE *f = fopen(path, "wb");
    fputs("{\"id\":\"a\"}\n", f);                          /* 1: 10 bytes */
    fputs("{\"id\":\"sixteen\"}\n", f);                    /* 2: 16 bytes, the limit */
    fputs("{\"id\":\"seventeen\"} x\n", f);                /* 3: past it */
    fputs("{\"id\":\"b\"}\n", f);                          /* 4 */
    static const char nul[] = "{\"id\0xxxxxxxxxxxxxxxxxxxxxxxxxxxx\n";
    fwrite(nul, 1, sizeof nul - 1, f);                        /* 5: NUL at 5, then past it */
    fputs("{\"id\":\"c\"}", f);                             /* 6, no final newline */
    fclose(f);
    f = fopen(path, "rb");
    struct ob_jsonl *r;
    ob_jsonl_open(f, "b.jsonl", &r);
    ob_set_max_line(16);
    /* at: no more read than the limit and one byte, or than the NUL */
    static const struct step want[] = {
        {1, 1, "a", NULL, -1}, {1, 2, "sixteen", NULL, -1},
        {OB_ERANGE, 3, NULL, "b.jsonl:3: a line longer than 16 bytes", 11 + 17 + 17},
        {1, 4, "b", NULL, -1},
        {OB_EFORMAT, 5, NULL, "b.jsonl:5: a NUL byte at byte 5 of the line", 11 + 17 + 21 + 11 + 5},
        {1, 6, "c", NULL, -1}, {0, 6, NULL, NULL, -1},
    };
    int good = steps(r, f, want, sizeof want / sizeof want[0]);
    ob_set_max_line(0);
    ok(good && ob_max_line() == OB_MAX_LINE_DEFAULT, "a line of the limit is read, one past it "
       "is OB_ERANGE having read the limit, a NUL stops the read at it, the reader goes on "
       "after both with the right line numbers");
    ob_jsonl_close(r);
    fclose(f);

    /* a stream whose read fails: an error, not the end of input */
    f = fopen(dir, "r");
    if (f && ob_jsonl_open(f, "dir", &r) == 0) {
        cJSON *rec;
        int rc = ob_jsonl_next(r, &rec);
        ok(rc == OB_EIO && strstr(ob_errmsg(), "dir:1: read: Is a directory"),
           "a failed read is OB_EIO naming the input and line ('%s')", ob_errmsg());
        ob_jsonl_close(r);
    } else {
        printf("ok %d - # SKIP a directory cannot be opened as a stream here\n", ++n_test);
    }
    if (f)
        fclose(f);
}

static void json_refusals(void)
{
    /* text, flags, the message's needle; cJSON 1.7.15 alone accepts the first nine and cuts
     * or corrupts a string in each */
    static const struct { const char *t; size_t n; int flags; const char *needle; } bad[] = {
        {TXT("{\"p\":\"ab\\u0000cd\"}"), 0, "\\u0000 at byte 9: text with a NUL character"},
        {TXT("{\"p\":\"ab\\uZZZZcd\"}"), 0, "invalid JSON at byte 9: \\u without 4 hex digits"},
        {TXT("{\"p\":\"ab\\u00e\"}"), 0, "at byte 9: \\u without 4 hex digits"},
        {TXT("{\"a\\u0000b\":1}"), 0, "\\u0000 at byte 4"},
        {TXT("{\"p\":\"a\x01" "b\"}"), 0, "at byte 8: raw control byte 0x01 in a string"},
        {TXT("{\"p\":\"a\tb\"}"), 0, "at byte 8: raw control byte 0x09 in a string"},
        {TXT("\x01{\"p\":1}"), 0, "invalid JSON at byte 1: control byte 0x01"},
        {TXT("{\"p\":\"a\xff" "b\"}"), 0, "invalid UTF-8 at byte 8"},
        {TXT("{\"p\":\"a\xe2\x82\"}"), 0, "invalid UTF-8 at byte 8"},
        {TXT("{\"p\":\"\xc0\xaf\"}"), 0, "invalid UTF-8 at byte 7"},         /* overlong '/' */
        {TXT("{\"p\":\"\xed\xa0\x80\"}"), 0, "invalid UTF-8 at byte 7"},     /* a surrogate */
        {TXT("{\"p\":\"\xf4\x90\x80\x80\"}"), 0, "invalid UTF-8 at byte 7"}, /* > U+10FFFF */
        {TXT("{\"p\":\"a\\ud800b\"}"), 0, "at byte 8: unpaired surrogate \\ud800"},
        {TXT("{\"p\":\"a\\ud800\\u0041\"}"), 0, "at byte 8: unpaired surrogate \\ud800"},
        {TXT("{\"p\":\"a\\udc00\"}"), 0, "at byte 8: unpaired surrogate \\udc00"},
        {TXT("{\"p\":\"a\\qb\"}"), 0, "at byte 8: \\q is not an escape"},
        {TXT("{\"p\":\"a\\"), 0, "the text ends early"},
        {TXT("{\"p\":\"a\0b\"}"), 0, "at byte 8: a NUL byte"},
        {TXT("{\"p\":1} x"), 0, "extra data after the JSON value at byte 9"},
        {TXT("{\"p\":}"), 0, "invalid JSON at byte 6"},
        {TXT(""), 0, "invalid JSON"},
        {TXT("{\"x\":1e400}"), 0, "a number out of range at byte 6: 1e400"},    /* cJSON: null */
        {TXT("[-2E+999]"), 0, "a number out of range at byte 2"},
        /* past 63 characters too: cJSON reads a number of any length */
        {TXT("[1000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "0000000000000000000000000000000000000000000000000000000000000000000000000000000]"),
         0, "a number out of range at byte 2: 1000000000"},
        /* what OB_JSON_ANY_BYTES still refuses: anything but ill-formed UTF-8 in a string */
        {TXT("{\"p\":\"ab\\u0000cd\"}"), OB_JSON_ANY_BYTES, "\\u0000 at byte 9"},
        {TXT("{\"p\":\"a\x01\"}"), OB_JSON_ANY_BYTES, "raw control byte 0x01"},
        {TXT("{\"p\xff\":1}"), OB_JSON_ANY_BYTES, NULL},                        /* a key: cJSON */
        {TXT("{\"p\":1,\xff}"), OB_JSON_ANY_BYTES, "invalid UTF-8 at byte 8"},  /* outside */
        /* a member name twice in one object, wherever it is: readers disagree on which counts */
        {TXT("{\"max_tokens\":2,\"max_tokens\":4096}"), 0,
         "the key \"max_tokens\" appears twice in the same object"},
        {TXT("{\"a\":1,\"\\u0061\":2}"), 0, "the key \"a\" appears twice"},     /* escaped */
        {TXT("{\"m\":[{\"role\":\"user\",\"content\":\"x\",\"role\":\"system\"}]}"), 0,
         "the key \"role\" appears twice in the object at m[0]"},
        {TXT("[1,{\"x\":{\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,"
             "\"k9\":9,\"k10\":10,\"k11\":11,\"k12\":12,\"k13\":13,\"k14\":14,\"k15\":15,"
             "\"k16\":16,\"k17\":17,\"k3\":3}}]"), 0,              /* past 16 members: sorted */
         "the key \"k3\" appears twice in the object at [1].x"},
        {TXT("{\"\":1,\"\":2}"), 0, "the key \"\" appears twice"},
    };
    int good = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *j = (cJSON *)1;
        int e = ob_json_parse(bad[i].t, bad[i].n, bad[i].flags, &j);
        /* the key case is refused by nobody: ill-formed bytes in a key are a string's */
        if (!bad[i].needle && e == 0 && j) {
            cJSON_Delete(j);
            continue;
        }
        if (e != OB_EFORMAT || j || (bad[i].needle && !strstr(ob_errmsg(), bad[i].needle))) {
            printf("# case %zu: rc %d, '%s'\n", i, e, ob_errmsg());
            good = 0;
        }
        if (e == 0)
            cJSON_Delete(j);
    }
    ok(good, "ob_json_parse refuses \\u0000, bad escapes, unpaired surrogates, raw control "
       "bytes, ill-formed UTF-8, NUL, trailing data, each with its byte offset; a duplicate "
       "key anywhere, named with where it is");

    /* the same names in different objects, and the same value twice, are not duplicates */
    cJSON *j = NULL;
    const char *fine = "{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":1}],\"A\":2,\"c\":\"a\"}";
    ok(ob_json_parse(fine, strlen(fine), 0, &j) == 0 && j, "one name in several objects is fine");
    cJSON_Delete(j);

    /* cJSON's nesting limit (1000) is named, not reported as invalid JSON */
    char deep[2 * 1001 + 1];
    for (int depth = 1000; depth <= 1001; depth++) {
        memset(deep, '[', (size_t)depth);
        memset(deep + depth, ']', (size_t)depth);
        int e = ob_json_parse(deep, 2 * (size_t)depth, 0, &j);
        if (depth == 1000)
            ok(e == 0 && j, "1000 nested arrays are read");
        else
            ok(e == OB_EFORMAT && !j && strstr(ob_errmsg(), "nested more than 1000 deep at byte "
               "1001 (the nesting limit)"), "1001 nested arrays: the nesting limit is named "
               "('%s')", ob_errmsg());
        cJSON_Delete(j);
    }
}

static void json_accepts(void)
{
    /* every escape, a surrogate pair, U+10FFFF, DEL, blanks around: carried whole */
    const char *t = " {\"a\":\"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0001\\u00e9\\ud83d\\ude00\xf4\x8f\xbf\xbf\x7f" "z\","
                    "\"k\\u00e9\":[1,\"\xe2\x82\xac\"]}\r\n";
    cJSON *j = NULL;
    int e = ob_json_parse(t, strlen(t), 0, &j);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "a");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "k\xc3\xa9");
    const char want[] = "x\"\\/\b\f\n\r\t\x01\xc3\xa9\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\x7f" "z";
    ok(e == 0 && cJSON_IsString(a) && strlen(a->valuestring) == sizeof want - 1 &&
       memcmp(a->valuestring, want, sizeof want) == 0 && cJSON_IsArray(k) &&
       strcmp(cJSON_GetArrayItem(k, 1)->valuestring, "\xe2\x82\xac") == 0,
       "ob_json_parse carries every escape, pairs, U+10FFFF and keys whole (%s)",
       e ? ob_errmsg() : "ok");
    cJSON_Delete(j);
    /* the length is the text's: no NUL needed, nothing read past len */
    char buf[] = "{\"a\":1}{\"b\":2}";
    e = ob_json_parse(buf, 7, 0, &j);
    ok(e == 0 && cJSON_GetObjectItemCaseSensitive(j, "a") && !cJSON_GetObjectItemCaseSensitive(j, "b"),
       "ob_json_parse reads exactly len bytes");
    cJSON_Delete(j);
    e = ob_json_parse(TXT("[1.7976931348623157e308,-1e-400,0]"), 0, &j);
    ok(e == 0 && cJSON_GetArrayItem(j, 0)->valuedouble == 1.7976931348623157e308,
       "the largest double is a number, not out of range");
    cJSON_Delete(j);
    /* a server's partial character: kept as bytes with OB_JSON_ANY_BYTES, refused without */
    const char r[] = "{\"token\":\"\xe2\x82\",\"x\":\"\xff\"}";
    e = ob_json_parse(r, sizeof r - 1, OB_JSON_ANY_BYTES, &j);
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(j, "token");
    ok(e == 0 && cJSON_IsString(tk) && strcmp(tk->valuestring, "\xe2\x82") == 0 &&
       ob_json_parse(r, sizeof r - 1, 0, &(cJSON *){NULL}) == OB_EFORMAT,
       "OB_JSON_ANY_BYTES keeps a partial UTF-8 character's bytes; strict reading refuses them");
    /* the writer: the same record is written as valid UTF-8, U+FFFD for each bad byte */
    char *line = NULL;
    size_t cap = 0;
    FILE *f = open_memstream(&line, &cap);
    e = ob_jsonl_write(f, j);
    fclose(f);
    ok(e == 0 && strcmp(line, "{\"token\":\"\xef\xbf\xbd\xef\xbf\xbd\",\"x\":\"\xef\xbf\xbd\"}\n") == 0 &&
       ob_json_parse(line, strlen(line), 0, &(cJSON *){NULL}) == 0,
       "ob_jsonl_write writes ill-formed UTF-8 as U+FFFD: the line is valid JSON (%s)", line);
    free(line);
    cJSON_Delete(j);
}

static void utf8(void)
{
    static const struct { const char *s; int n; } c[] = {
        {"a", 1}, {"\x7f", 1}, {"\xc3\xa9", 2}, {"\xe2\x82\xac", 3}, {"\xf0\x9f\x98\x80", 4},
        {"\xf4\x8f\xbf\xbf", 4}, {"\xc0\x80", 0}, {"\xe0\x80\x80", 0}, {"\xed\xbf\xbf", 0},
        {"\xf4\x90\x80\x80", 0}, {"\x80", 0}, {"\xe2\x82", 0}, {"\xf8\x88\x80\x80\x80", 0},
    };
    int good = 1;
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        good &= ob_utf8_len(c[i].s, c[i].s + strlen(c[i].s)) == c[i].n;
    good &= ob_utf8_len("", "" + 1) == 0;                  /* NUL is not text */
    good &= ob_utf8_valid("a\0b", 3) && !ob_utf8_valid("\xe2\x82", 2);
    ok(good, "ob_utf8_len: well-formed sequences of 1-4 bytes; overlong forms, surrogates, "
       "> U+10FFFF, stray and cut sequences and NUL are not");
}

/* whole numbers, bytes and ids are written digit for digit */
static void exact(void)
{
    cJSON *o = cJSON_CreateObject();
    ob_json_add_int(o, "a", INT64_MIN);
    ob_json_add_int(o, "b", (INT64_C(1) << 53) + 1);
    ob_json_add_u64(o, "c", UINT64_MAX);
    const unsigned char bytes[] = {0, 0x7f, 0x80, 0xff};
    cJSON_AddItemToObject(o, "d", ob_json_bytes(bytes, sizeof bytes));
    const int32_t ids[] = {0, -1, 151935, INT32_MAX};
    cJSON_AddItemToObject(o, "e", ob_json_ids(ids, 4));
    cJSON_AddItemToObject(o, "f", ob_json_ids(ids, 0));
    char *txt = cJSON_PrintUnformatted(o);
    const char *want = "{\"a\":-9223372036854775808,\"b\":9007199254740993,"
                       "\"c\":18446744073709551615,\"d\":[0,127,128,255],"
                       "\"e\":[0,-1,151935,2147483647],\"f\":[]}";
    ok(txt && strcmp(txt, want) == 0, "integers beyond 2^53, bytes and ids written exactly: %s",
       txt ? txt : "(null)");
    free(txt);
    cJSON_Delete(o);
}

/* cJSON's allocations, counted through its hooks (this test's own: the library sets none) */
static size_t n_allocs;

static void *counting_malloc(size_t n)
{
    n_allocs++;
    return malloc(n);
}

static int count_nodes(const cJSON *j)
{
    int n = 0;
    for (; j; j = j->next)
        n += 1 + count_nodes(j->child);
    return n;
}

static void value_bound(void)
{
    static const char *const texts[] = {
        "{\"a\":[1,2,\"x\"],\"b\":{\"c\":true}}", "[]", "\"s\"", " 7 ", "[null,false,true]",
        "{\"k\" : \"v\" , \"k2\":\"\\\":\"}", "[[[[\"a\"]]],{},-1.5e3]",
        "{\"prompt\":\"Once upon\",\"max_tokens\":4,\"stop\":[\"a:\",\"b\"]}",
    };
    int good = 1;
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        cJSON *j = NULL, *k = NULL;
        size_t len = strlen(texts[i]);
        int e = ob_json_parse(texts[i], len, 0, &j);
        int n = j ? count_nodes(j) : -1;
        int at = ob_json_parse_max(texts[i], len, 0, (size_t)n, &k);
        cJSON_Delete(k);
        k = NULL;
        int below = n > 1 ? ob_json_parse_max(texts[i], len, 0, (size_t)n - 1, &k) : OB_ERANGE;
        if (e || at || below != OB_ERANGE || k) {
            printf("# %s: %d nodes; at the bound %d, one below %d\n", texts[i], n, at, below);
            good = 0;
        }
        cJSON_Delete(j);
    }
    ok(good, "ob_json_parse_max: a text of N nodes is taken with the bound N and refused "
       "(OB_ERANGE) with N - 1 (keys, colons in strings and nesting counted as cJSON does)");
    /* two million token ids against a bound of 12288: refused with nothing allocated */
    size_t n = 2000000, len = 0;
    char *big = malloc(2 * n + 16);
    big[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        big[len++] = '1';
        big[len++] = ',';
    }
    big[len - 1] = ']';
    cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = counting_malloc, .free_fn = free});
    n_allocs = 0;
    cJSON *j = NULL;
    int e = ob_json_parse_max(big, len, 0, 12288, &j);
    ok(e == OB_ERANGE && !j && n_allocs == 0 && strstr(ob_errmsg(), "more than 12288 JSON values"),
       "two million values against a bound of 12288: refused with %zu allocations (%s)",
       n_allocs, ob_errmsg());
    e = ob_json_parse_max(big, len, 0, 0, &j);
    ok(e == 0 && cJSON_GetArraySize(j) == (int)n && n_allocs > n,
       "the same text without a bound: %d values parsed", cJSON_GetArraySize(j));
    cJSON_Delete(j);
    cJSON_InitHooks(NULL);
    free(big);
}

static void exact_print(void)
{
    static const double v[] = {9007199254740992.0, 9007199254740990.0, 9007199254740993.0,
                               4503599627370497.0, 0.30000000000000004, 1e308, 5e-324, -0.0,
                               123, -7.25, 1.0000000000000002, 1.2345678901234567e-300};
    cJSON *o = cJSON_CreateObject(), *a = cJSON_CreateArray();
    char key[16];
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        snprintf(key, sizeof key, "k%zu", i);
        cJSON_AddNumberToObject(o, key, v[i]);
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    }
    cJSON_AddItemToObject(o, "nested", a);
    cJSON_AddNumberToObject(o, "nan", NAN);
    char *plain = cJSON_PrintUnformatted(o), *s = ob_json_print(o);
    cJSON *back = NULL;
    int e = s ? ob_json_parse(s, strlen(s), 0, &back) : -1;
    int good = e == 0 && cJSON_GetArraySize(back) == cJSON_GetArraySize(o);
    for (size_t i = 0; good && i < sizeof v / sizeof *v; i++) {
        snprintf(key, sizeof key, "k%zu", i);
        double x = cJSON_GetObjectItemCaseSensitive(back, key)->valuedouble;
        double y = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(back, "nested"),
                                      (int)i)->valuedouble;
        good = memcmp(&x, &v[i], 8) == 0 && memcmp(&y, &v[i], 8) == 0;
        if (!good)
            printf("# %.17g came back as %.17g, %.17g\n", v[i], x, y);
    }
    const cJSON *nan = cJSON_GetObjectItemCaseSensitive(back, "nan");
    good &= cJSON_IsString(nan) && !strcmp(nan->valuestring, "NaN") &&
            !strcmp(cJSON_GetArrayItem(back, 0)->string, "k0");
    ok(good, "ob_json_print: every double reads back to its bits, names and order kept, NaN as "
       "a string (%s)", s ? s : "NULL");
    ok(plain && strstr(plain, "9.00719925474099e+15") && cJSON_IsNumber(cJSON_GetArrayItem(o, 0)),
       "where cJSON's printer writes 2^53 as 9.00719925474099e+15; the tree is left as it was");
    cJSON_free(plain);
    cJSON_free(s);
    cJSON_Delete(back);
    cJSON_Delete(o);
}

int main(int argc, char **argv)
{
    tap_seed(0x1234567);
    floats();
    exact();
    reader(argc > 1 ? argv[1] : ".");
    bounded(argc > 1 ? argv[1] : ".");
    json_refusals();
    json_accepts();
    utf8();
    value_bound();
    exact_print();
    return tap_done();
}
