/*
 * tok.c — tests of the tokenizer (lib/tok.c).
 *
 *   tok                          TAP self-tests on small hand-made vocabularies: merge order
 *                                and ties, pre-tokenizer splits, special tokens, SentencePiece
 *                                scores, byte fallback and UNUSED pieces, pieces and decoding,
 *                                hostile vocabularies, invalid UTF-8, large inputs, GGUF keys
 *   tok dump SRC CORPUS          one JSON line per corpus line: {"plain":[ids],"special":[ids]}
 *                                (parse_special false / true), for tests/py/tok_oracle.py
 *   tok roundtrip SRC CORPUS     decode(encode(x)) == x for every line in both modes (llama
 *                                vocabularies: plus the space put before each text stretch)
 *   tok perf SRC CORPUS          load and encoding times; fails when load > 1 s or encoding
 *                                the corpus runs slower than 1 MB/s
 *   tok mkgguf JSON PRE N OUT    write a GGUF holding the tokenizer.ggml.* keys of a
 *                                tokenizer.json, vocabulary padded to N with [PAD<i>] tokens
 *
 * SRC is a .gguf file or PRE:path/tokenizer.json (PRE names the pre-tokenizer, e.g. qwen2).
 * CORPUS has one JSON value per line: a string, or {"hex":"..."} for bytes a JSON string cannot
 * hold (NUL, invalid UTF-8).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "1b.h"
#include "tok.h"
#include "bytelevel.h"
#include "tap.h"


static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap + 1);
    for (size_t k; s && (k = fread(s + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) {
            char *t = realloc(s, 2 * cap + 1);
            if (!t) {
                free(s);
                s = NULL;
                break;
            }
            s = t;
            cap *= 2;
        }
    }
    fclose(f);
    if (s)
        s[n] = 0;
    *len = n;
    return s;
}

/* ---- a vocabulary builder -------------------------------------------------------------------- */

struct vb {
    struct ob_tok_str tok[1024];
    int32_t type[1024];
    float score[1024];
    struct ob_tok_str merge[256];
    char pool[65536];
    size_t pool_n;
    uint32_t n, n_merge;
};

static const char *vb_keep(struct vb *v, const char *s, size_t n)
{
    char *p = v->pool + v->pool_n;
    memcpy(p, s, n);
    v->pool_n += n + 1;
    p[n] = 0;
    return p;
}

static int32_t vb_addn(struct vb *v, const char *s, size_t n, int type, float score)
{
    v->tok[v->n] = (struct ob_tok_str){vb_keep(v, s, n), n};
    v->type[v->n] = type;
    v->score[v->n] = score;
    return (int32_t)v->n++;
}

static int32_t vb_add(struct vb *v, const char *s, int type, float score)
{
    return vb_addn(v, s, strlen(s), type, score);
}

static void vb_merge(struct vb *v, const char *m)
{
    v->merge[v->n_merge++] = (struct ob_tok_str){vb_keep(v, m, strlen(m)), strlen(m)};
}

/* 256 byte-level tokens with id == byte, so that raw bytes read as ids */
static void vb_bytes(struct vb *v)
{
    for (unsigned b = 0; b < 256; b++) {
        char s[2];
        size_t n = bl_char(b, s);
        vb_addn(v, s, n, OB_TOK_NORMAL, 0);
    }
}

static struct ob_tok_spec vb_spec(struct vb *v, const char *model, const char *pre)
{
    return (struct ob_tok_spec){
        .model = model, .pre = pre, .n_vocab = v->n, .tokens = v->tok, .types = v->type,
        .scores = v->score, .n_merges = v->n_merge, .merges = v->merge,
        .bos = -1, .eos = -1, .unk = -1, .pad = -1, .add_bos = -1, .add_space_prefix = -1};
}

/* ---- helpers on encodings -------------------------------------------------------------------- */

/* encode and compare with an expected list terminated by -1 */
static void expect_ids(const struct ob_tok *t, const char *text, size_t len, bool special,
                       const int32_t *want, const char *what)
{
    int32_t *ids;
    size_t n, nw = 0;
    while (want[nw] >= 0)
        nw++;
    int e = ob_tok_encode(t, text, len, special, &ids, &n);
    int good = !e && n == nw && !memcmp(ids, want, n * sizeof *ids);
    char got[512] = "";
    size_t k = 0;
    for (size_t i = 0; !e && i < n && k < sizeof got - 16; i++)
        k += snprintf(got + k, sizeof got - k, "%s%d", i ? "," : "", ids[i]);
    ok(good, "%s -> [%s]%s%s", what, got, e ? " error: " : "", e ? ob_errmsg() : "");
    if (!e)
        free(ids);
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__, -1})
#define NONE ((const int32_t[]){-1})

/* decode(encode(x)) == prefix + x, where llama vocabularies put a space before every stretch of
 * text that starts the input or follows a special token (removed here before comparing), and
 * read a U+2581 of the input back as a space, as SentencePiece does (the vocabulary cannot tell
 * them apart once spaces are escaped). A gpt2 vocabulary drops the bytes it has no token for
 * (SmolLM2 has none for 0xff, for one): those are removed from x before comparing. */
static int roundtrip_one(const struct ob_tok *t, const char *x, size_t len, bool special,
                         char *why, size_t why_n)
{
    int32_t *ids;
    size_t n;
    if (ob_tok_encode(t, x, len, special, &ids, &n)) {
        snprintf(why, why_n, "encode: %s", ob_errmsg());
        return 0;
    }
    bool llama = !strcmp(ob_tok_model(t), "llama"), spm = llama && ob_tok_add_space_prefix(t);
    char *out = malloc(2 * len + 2 * n + 1);
    size_t o = 0;
    bool stretch_start = true;
    int good = 1;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t pl;
        if (ob_tok_piece(t, ids[i], &p, &pl)) {
            snprintf(why, why_n, "piece %d: %s", ids[i], ob_errmsg());
            good = 0;
            break;
        }
        /* a stretch of text ends at a special token: for llama, only CONTROL ones cut the
         * text (user-defined pieces are matched inside the escaped stretch) */
        bool sp = special && (llama ? ob_tok_type(t, ids[i]) == OB_TOK_CONTROL
                                    : ob_tok_is_special(t, ids[i]));
        if (spm && stretch_start && !sp) {
            if (pl == 0 || p[0] != ' ') {
                snprintf(why, why_n, "token %zu (%d) does not start with the prefix space", i,
                         ids[i]);
                good = 0;
                break;
            }
            p++, pl--;
        }
        stretch_start = sp;
        memcpy(out + o, p, pl);
        o += pl;
    }
    char *want = malloc(len + 1);
    size_t wl = 0;
    bool drop[256] = {0};
    for (unsigned b = 0; b < 256 && !llama; b++) {
        char c[2];
        int32_t id = ob_tok_find(t, c, bl_char(b, c));
        int ty = ob_tok_type(t, id);
        drop[b] = id < 0 || ty == OB_TOK_UNKNOWN || ty == OB_TOK_CONTROL ||
                  ty == OB_TOK_USER_DEFINED || ty == OB_TOK_BYTE;
    }
    for (size_t i = 0; i < len; i++) {
        if (drop[(uint8_t)x[i]])
            continue;
        if (llama && i + 2 < len && !memcmp(x + i, "\xe2\x96\x81", 3)) {
            want[wl++] = ' ';
            i += 2;
        } else {
            want[wl++] = x[i];
        }
    }
    if (good && (o != wl || memcmp(out, want, wl))) {
        snprintf(why, why_n, "decoded %zu bytes, want %zu", o, wl);
        good = 0;
    }
    /* ob_tok_decode must agree with the pieces */
    char *d;
    size_t dl;
    if (good && !ob_tok_decode(t, ids, n, &d, &dl)) {
        size_t pre = 0;
        if (spm && n && !(special && ob_tok_type(t, ids[0]) == OB_TOK_CONTROL))
            pre = 1;
        if (!special && (dl != wl + pre || memcmp(d + pre, want, wl))) {
            snprintf(why, why_n, "ob_tok_decode differs from the pieces");
            good = 0;
        }
        if (d[dl] != 0) {
            snprintf(why, why_n, "ob_tok_decode output is not NUL-terminated");
            good = 0;
        }
        free(d);
    }
    free(want);
    free(out);
    free(ids);
    return good;
}

/* ---- self-tests ------------------------------------------------------------------------------- */

static void test_gpt2(void)
{
    static struct vb v;
    memset(&v, 0, sizeof v);
    vb_bytes(&v);
    int32_t he = vb_add(&v, "he", 1, 0), ll = vb_add(&v, "ll", 1, 0),
            hell = vb_add(&v, "hell", 1, 0), hello = vb_add(&v, "hello", 1, 0),
            or = vb_add(&v, "or", 1, 0),
            gwor = vb_add(&v, "\xc4\xa0wor", 1, 0), gworl = vb_add(&v, "\xc4\xa0worl", 1, 0),
            gworld = vb_add(&v, "\xc4\xa0world", 1, 0), aa = vb_add(&v, "aa", 1, 0),
            bc = vb_add(&v, "bc", 1, 0), ab = vb_add(&v, "ab", 1, 0),
            g1 = vb_add(&v, "\xc4\xa0" "1", 1, 0), x12 = vb_add(&v, "12", 1, 0);
    vb_add(&v, "\xc4\xa0w", 1, 0);
    (void)he, (void)ll, (void)hell, (void)or, (void)gwor, (void)gworl, (void)ab;
    /* "!" followed by the byte-level characters of 0xe1 and 0xc2, the lead bytes of U+180E
     * and U+0085: they merge only when the pre-tokenizer keeps "!" and the character in one
     * piece */
    int32_t bang_e1 = vb_add(&v, "!\xc3\xa1", 1, 0), bang_c2 = vb_add(&v, "!\xc3\x82", 1, 0);
    const char *merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "o r", "\xc4\xa0w or",
                            "\xc4\xa0wor l", "\xc4\xa0worl d", "a a", "b c", "a b",
                            "\xc4\xa0 1", "1 2", "! \xc3\xa1", "! \xc3\x82"};
    for (size_t i = 0; i < sizeof merges / sizeof *merges; i++)
        vb_merge(&v, merges[i]);
    int32_t im_end = vb_add(&v, "<|im_end|>", OB_TOK_CONTROL, 0);
    int32_t think = vb_add(&v, "<think>", OB_TOK_USER_DEFINED, 0);
    int32_t im = vb_add(&v, "<|im", OB_TOK_CONTROL, 0);
    int32_t tAB = vb_add(&v, "AB", OB_TOK_CONTROL, 0), tBCD = vb_add(&v, "BCD", OB_TOK_CONTROL, 0);

    struct ob_tok_spec sp = vb_spec(&v, "gpt2", "qwen2");
    struct ob_tok *t;
    int e = ob_tok_new(&sp, &t);
    ok(!e, "gpt2/qwen2 tokenizer from arrays%s%s", e ? ": " : "", e ? ob_errmsg() : "");
    if (e)
        return;
    ok(ob_tok_n_vocab(t) == v.n && !strcmp(ob_tok_pre(t), "qwen2") &&
       !strcmp(ob_tok_model(t), "gpt2") && !ob_tok_add_bos(t) && !ob_tok_add_space_prefix(t) &&
       ob_tok_bos(t) == -1, "accessors and gpt2 defaults");

    expect_ids(t, "hello world", 11, false, IDS(hello, gworld), "merges in rank order");
    expect_ids(t, "hellohello", 10, false, IDS(hello, hello), "a piece merges all the way");
    expect_ids(t, "aaa", 3, false, IDS(aa, 'a'), "equal ranks: leftmost first");
    expect_ids(t, "aaaa", 4, false, IDS(aa, aa), "aaaa");
    expect_ids(t, "abc", 3, false, IDS('a', bc), "the lower rank wins (b c before a b)");
    expect_ids(t, "", 0, false, NONE, "empty text");
    /* qwen2 splits digits one by one and keeps the space apart from them */
    expect_ids(t, "x 12", 4, false, IDS('x', ' ', '1', '2'), "qwen2: ' ', '1', '2' stay apart");
    expect_ids(t, "I'M", 3, false, IDS('I', '\'', 'M'), "contraction (bytes only)");
    /* \s as Unicode White_Space (Oniguruma in tokenizers), not PCRE2's \s */
    expect_ids(t, "!\xe1\xa0\x8e", 4, false, IDS(bang_e1, 0xa0, 0x8e),
               "U+180E is not white space: one piece with '!'");
    expect_ids(t, "!\xc2\x85", 3, false, IDS('!', 0xc2, 0x85),
               "U+0085 is white space: a piece of its own");
    (void)bang_c2;                 /* its merge must not apply */

    expect_ids(t, "a<|im_end|>b", 12, true, IDS('a', im_end, 'b'), "special parsed");
    expect_ids(t, "a<|im_end|>b", 12, false,
               IDS('a', '<', '|', 'i', 'm', '_', 'e', 'n', 'd', '|', '>', 'b'),
               "special not parsed: plain text");
    expect_ids(t, "<|im_x", 6, true, IDS(im, '_', 'x'), "shorter special when the longer fails");
    expect_ids(t, "<think></think>", 15, true,
               IDS(think, '<', '/', 't', 'h', 'i', 'n', 'k', '>'), "user-defined special");
    expect_ids(t, "ABCD", 4, true, IDS(tAB, 'C', 'D'), "leftmost match before longest");
    expect_ids(t, "xBCD", 4, true, IDS('x', tBCD), "BCD");
    expect_ids(t, "<|im_end|><|im_end|>", 20, true, IDS(im_end, im_end), "specials back to back");
    ok(ob_tok_is_special(t, im_end) && ob_tok_is_special(t, think) && !ob_tok_is_special(t, 'a') &&
       !ob_tok_is_special(t, -1) && !ob_tok_is_special(t, 1 << 30), "is_special");
    ok(ob_tok_find(t, "<|im_end|>", 10) == im_end && ob_tok_find(t, "hello", 5) == hello &&
       ob_tok_find(t, "nope", 4) == -1 && ob_tok_find(t, "", 0) == -1 &&
       ob_tok_find(t, NULL, 3) == -1, "find by text");
    ok(ob_tok_type(t, think) == OB_TOK_USER_DEFINED && ob_tok_type(t, -5) == -1, "type");

    const char *p;
    size_t pl;
    e = ob_tok_piece(t, gworld, &p, &pl);
    ok(!e && pl == 6 && !memcmp(p, " world", 6), "piece: byte-level alphabet undone");
    e = ob_tok_piece(t, 0xc3, &p, &pl);
    ok(!e && pl == 1 && (uint8_t)p[0] == 0xc3, "piece: a lone UTF-8 lead byte");
    e = ob_tok_piece(t, im_end, &p, &pl);
    ok(!e && pl == 10 && !memcmp(p, "<|im_end|>", 10), "piece: special token text");
    e = ob_tok_piece(t, (int32_t)v.n, &p, &pl);
    ok(e == OB_ERANGE, "piece of an id past the end: %s", ob_errmsg());
    char *d;
    size_t dl;
    int32_t bad[] = {hello, -1};
    ok(ob_tok_decode(t, bad, 2, &d, &dl) == OB_ERANGE, "decode rejects id -1: %s", ob_errmsg());
    int32_t good[] = {hello, gworld, g1, x12, im_end};
    e = ob_tok_decode(t, good, 5, &d, &dl);
    ok(!e && dl == 25 && !strcmp(d, "hello world 112<|im_end|>"), "decode");
    if (!e)
        free(d);

    /* every byte string round-trips, invalid UTF-8 included */
    char why[256];
    int all = 1;
    for (unsigned b = 0; b < 256 && all; b++) {
        char s[3] = {(char)b, 'a', (char)b};
        all = roundtrip_one(t, s, 3, false, why, sizeof why) &&
              roundtrip_one(t, s, 3, true, why, sizeof why);
    }
    ok(all, "every byte value round-trips%s%s", all ? "" : ": ", all ? "" : why);
    uint64_t rng = 42;
    all = 1;
    for (int k = 0; k < 2000 && all; k++) {
        char s[64];
        size_t n = k % 64;
        for (size_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            /* bias towards bytes that make UTF-8 lead and continuation bytes, spaces, digits */
            static const char pick[] = "\x80\xbf\xc3\xe2\xf0\xff \n\t1a'<|AB";
            s[i] = (rng >> 60) < 8 ? pick[(rng >> 33) % (sizeof pick - 1)] : (char)(rng >> 40);
        }
        all = roundtrip_one(t, s, n, false, why, sizeof why) &&
              roundtrip_one(t, s, n, true, why, sizeof why);
    }
    ok(all, "2000 random byte strings round-trip%s%s", all ? "" : ": ", all ? "" : why);
    ob_tok_free(t);

    /* the same vocabulary under the GPT-2 regex keeps " 1" together */
    sp.pre = "gpt2";
    e = ob_tok_new(&sp, &t);
    if (!e) {
        expect_ids(t, "x 12", 4, false, IDS('x', g1, '2'), "gpt2: ' 12' is one piece");
        ob_tok_free(t);
    }
    sp.pre = "smollm";
    e = ob_tok_new(&sp, &t);
    if (!e) {
        expect_ids(t, "x 12", 4, false, IDS('x', ' ', '1', '2'), "smollm: digits split first");
        ob_tok_free(t);
    }
    sp.pre = "llama3";
    e = ob_tok_new(&sp, &t);
    if (!e) {
        expect_ids(t, "x 12", 4, false, IDS('x', ' ', x12), "llama3: up to 3 digits together");
        expect_ids(t, "hell", 4, false, IDS(hell), "llama3: a piece that is a token is kept");
        ob_tok_free(t);
    }
}

static void test_hostile(void)
{
    static struct vb v;
    memset(&v, 0, sizeof v);
    vb_bytes(&v);
    int32_t z1 = vb_add(&v, "zz", 1, 0), z2 = vb_add(&v, "zz", 1, 0);
    vb_add(&v, "", 1, 0);                           /* an empty token */
    vb_add(&v, "", OB_TOK_CONTROL, 0);              /* an empty special */
    int32_t w = vb_add(&v, "ww", 99, 0);            /* a type outside 0..6 */
    int32_t yc = vb_add(&v, "yy", OB_TOK_CONTROL, 0), yn = vb_add(&v, "yy", 1, 0);
    vb_merge(&v, "z z");
    vb_merge(&v, "q QQQ");                          /* right half is not a token */
    vb_merge(&v, "q q");                            /* result is not a token */
    vb_merge(&v, "w w");
    vb_merge(&v, "z z");                            /* repeated */
    struct ob_tok_spec sp = vb_spec(&v, "gpt2", "qwen2");
    sp.bos = 1 << 30;
    sp.eos = -7;
    sp.pad = v.n;
    struct ob_tok *t;
    int e = ob_tok_new(&sp, &t);
    ok(!e, "hostile vocabulary accepted%s%s", e ? ": " : "", e ? ob_errmsg() : "");
    if (!e) {
        expect_ids(t, "zz", 2, false, IDS(z1), "duplicate text: the lowest id");
        expect_ids(t, "qq", 2, false, IDS('q', 'q'), "merge with an absent result is ignored");
        expect_ids(t, "ww", 2, false, IDS(w), "unknown type counts as normal");
        expect_ids(t, "zz", 2, true, IDS(z1), "an empty special never matches");
        ok(ob_tok_find(t, "zz", 2) == z1 && z2 == z1 + 1, "find: the lowest duplicate");
        /* find_piece against every id by brute force: normal tokens first, the lowest id */
        int bad = 0;
        uint32_t nv = ob_tok_n_vocab(t);
        for (uint32_t i = 0; i < nv; i++) {
            const char *pi, *pj;
            size_t li, lj;
            if (ob_tok_piece(t, (int32_t)i, &pi, &li) || !li)
                continue;
            int32_t want = -1;
            for (int pass = 0; pass < 2 && want < 0; pass++)
                for (uint32_t j = 0; j < nv && want < 0; j++) {
                    int ty = ob_tok_type(t, (int32_t)j);
                    bool normal = ty == OB_TOK_NORMAL || ty == OB_TOK_UNDEFINED;
                    if (normal == (pass == 0) && !ob_tok_piece(t, (int32_t)j, &pj, &lj) &&
                        lj == li && !memcmp(pi, pj, li))
                        want = (int32_t)j;
                }
            bad += ob_tok_find_piece(t, pi, li) != want;
        }
        ok(!bad && ob_tok_find_piece(t, "yy", 2) == yn && yc < yn &&
               ob_tok_find_piece(t, "zz", 2) == z1 && ob_tok_find_piece(t, "ww", 2) == w &&
               ob_tok_find_piece(t, " ", 1) == ob_tok_find(t, "\xc4\xa0", 2) &&
               ob_tok_find_piece(t, "zq", 2) == -1 && ob_tok_find_piece(t, "", 0) == -1,
           "find_piece: the reverse of ob_tok_piece, normal tokens first, then the lowest id "
           "(%d of %u pieces wrong)", bad, nv);
        ok(ob_tok_bos(t) == -1 && ob_tok_eos(t) == -1 && ob_tok_pad(t) == -1,
           "out-of-range ids read as none");
        ob_tok_free(t);
    }

    struct vb *m = malloc(sizeof *m);
    memcpy(m, &v, sizeof v);
    vb_merge(m, "nospace");
    sp = vb_spec(m, "gpt2", "qwen2");
    e = ob_tok_new(&sp, &t);
    ok(e == OB_EFORMAT && strstr(ob_errmsg(), "merge"), "merge without a space: %s", ob_errmsg());
    free(m);

    sp = vb_spec(&v, "gpt2", "qwen9");
    e = ob_tok_new(&sp, &t);
    ok(e == OB_EUNSUPP && strstr(ob_errmsg(), "'qwen9'"), "unknown pre: %s", ob_errmsg());
    sp = vb_spec(&v, "bert", NULL);
    e = ob_tok_new(&sp, &t);
    ok(e == OB_EUNSUPP && strstr(ob_errmsg(), "'bert'"), "unknown model: %s", ob_errmsg());
    sp = vb_spec(&v, "gpt2", NULL);
    e = ob_tok_new(&sp, &t);
    ok(!e && !strcmp(ob_tok_pre(t), "gpt2"), "no pre name: the GPT-2 regex");
    ob_tok_free(t);
    sp.n_vocab = 0;
    ok(ob_tok_new(&sp, &t) == OB_EFORMAT, "empty vocabulary: %s", ob_errmsg());
    sp = vb_spec(&v, "gpt2", NULL);
    struct ob_tok_str keep = v.tok[5];
    v.tok[5] = (struct ob_tok_str){NULL, 3};
    ok(ob_tok_new(&sp, &t) == OB_EFORMAT, "NULL token text: %s", ob_errmsg());
    v.tok[5] = keep;
    sp.merges = NULL;
    ok(ob_tok_new(&sp, &t) == OB_EFORMAT, "merges announced, none given: %s", ob_errmsg());

    /* a vocabulary that cannot spell every byte: unknown token, or nothing */
    struct vb *s = malloc(sizeof *s);
    memset(s, 0, sizeof *s);
    int32_t a = vb_add(s, "a", 1, 0), b = vb_add(s, "b", 1, 0);
    int32_t unk = vb_add(s, "<unk>", OB_TOK_UNKNOWN, 0);
    sp = vb_spec(s, "gpt2", "qwen2");
    sp.unk = unk;
    if (!ob_tok_new(&sp, &t)) {
        expect_ids(t, "abc", 3, false, IDS(a, b), "gpt2: a byte without a token is dropped");
        ob_tok_free(t);
    }
    free(s);
}

static void test_spm(void)
{
    static struct vb v;
    memset(&v, 0, sizeof v);
    int32_t unk = vb_add(&v, "<unk>", OB_TOK_UNKNOWN, 0);
    int32_t bos = vb_add(&v, "<s>", OB_TOK_CONTROL, 0);
    int32_t eos = vb_add(&v, "</s>", OB_TOK_CONTROL, 0);
    for (unsigned b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        vb_add(&v, s, OB_TOK_BYTE, 0);
    }
#define BYTE(x) (3 + (x))
    int32_t sp_ = vb_add(&v, "\xe2\x96\x81", 1, -1), a = vb_add(&v, "a", 1, -2),
            b = vb_add(&v, "b", 1, -3), c = vb_add(&v, "c", 1, -4),
            sa = vb_add(&v, "\xe2\x96\x81" "a", 1, -5), ab = vb_add(&v, "ab", 1, -6),
            sab = vb_add(&v, "\xe2\x96\x81" "ab", 1, -7), z = vb_add(&v, "z", 1, -8),
            q = vb_add(&v, "q", 1, -8), zz = vb_add(&v, "zz", OB_TOK_UNUSED, 0),
            zzq = vb_add(&v, "zzq", 1, -1), x = vb_add(&v, "x", 1, -8),
            y = vb_add(&v, "y", 1, -8), xy = vb_add(&v, "xy", 1, -10),
            yx = vb_add(&v, "yx", 1, -10), ud = vb_add(&v, "<me>", OB_TOK_USER_DEFINED, 0),
            ud2 = vb_add(&v, "  ", OB_TOK_USER_DEFINED, 0);
    (void)sa, (void)unk, (void)a, (void)q, (void)zz;
    struct ob_tok_spec sp = vb_spec(&v, "llama", "ignored");
    sp.bos = bos;
    sp.eos = eos;
    sp.unk = unk;
    struct ob_tok *t;
    int e = ob_tok_new(&sp, &t);
    ok(!e, "llama tokenizer from arrays%s%s", e ? ": " : "", e ? ob_errmsg() : "");
    if (e)
        return;
    ok(ob_tok_add_bos(t) && ob_tok_add_space_prefix(t) && ob_tok_bos(t) == bos &&
       ob_tok_eos(t) == eos && !strcmp(ob_tok_pre(t), ""), "llama defaults");
    expect_ids(t, "ab", 2, false, IDS(sab), "space prefix, highest score first");
    expect_ids(t, "cab", 3, false, IDS(sp_, c, ab), "cab");
    expect_ids(t, "a b", 3, false, IDS(sa, sp_, b), "inner space");
    expect_ids(t, "\xc3\xa9", 2, false, IDS(sp_, BYTE(0xc3), BYTE(0xa9)), "byte fallback");
    expect_ids(t, "\xff", 1, false, IDS(sp_, BYTE(0xff)), "invalid UTF-8 byte");
    expect_ids(t, "zz", 2, false, IDS(sp_, z, z), "UNUSED piece taken apart again");
    expect_ids(t, "zzq", 3, false, IDS(sp_, zzq), "UNUSED piece merges on");
    expect_ids(t, "xyx", 3, false, IDS(sp_, xy, x), "equal scores: leftmost first");
    expect_ids(t, "yxy", 3, false, IDS(sp_, yx, y), "equal scores: leftmost first (2)");
    expect_ids(t, "", 0, false, NONE, "empty text: no prefix either");
    expect_ids(t, "<s>ab</s>c", 10, true, IDS(bos, sab, eos, sp_, c),
               "specials: a space prefix after each");
    expect_ids(t, "<s>", 3, false, IDS(sp_, BYTE('<'), BYTE('s'), BYTE('>')),
               "special not parsed: plain text");
    /* user-defined pieces are sentencepiece's user_defined_symbols: matched in the escaped
     * text (after the dummy prefix), with or without parse_special, never merged with their
     * neighbours; a piece's spaces (llama.cpp's converter writes Gemma's "▁▁" as "  ") match
     * spaces and U+2581 alike */
    expect_ids(t, "<me>", 4, true, IDS(sp_, ud), "user-defined piece, parse_special");
    expect_ids(t, "<me>", 4, false, IDS(sp_, ud), "user-defined piece without parse_special");
    expect_ids(t, "ab<me>ab", 8, false, IDS(sab, ud, ab), "no merge across a user-defined piece");
    expect_ids(t, "x  y", 4, false, IDS(sp_, x, ud2, y), "a run of spaces as a user-defined piece");
    expect_ids(t, "x\xe2\x96\x81 y", 6, false, IDS(sp_, x, ud2, y),
               "U+2581 in the text is a space to a user-defined piece");
    expect_ids(t, "x   y", 5, false, IDS(sp_, x, ud2, sp_, y), "leftmost, then longest");

    const char *p;
    size_t pl;
    e = ob_tok_piece(t, sab, &p, &pl);
    ok(!e && pl == 3 && !memcmp(p, " ab", 3), "piece: U+2581 is a space");
    e = ob_tok_piece(t, BYTE(0x41), &p, &pl);
    ok(!e && pl == 1 && p[0] == 'A', "piece: <0x41> is A");
    e = ob_tok_piece(t, bos, &p, &pl);
    ok(!e && pl == 3 && !memcmp(p, "<s>", 3), "piece: control text");

    char why[256];
    int all = 1;
    uint64_t rng = 7;
    for (int k = 0; k < 2000 && all; k++) {
        char s[64];
        size_t n = k % 64;
        for (size_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            static const char pick[] = "abcxyzq  \xe2\x96\x81\xc3\xff<s><me>";
            s[i] = (rng >> 60) < 10 ? pick[(rng >> 33) % (sizeof pick - 1)] : (char)(rng >> 40);
        }
        all = roundtrip_one(t, s, n, false, why, sizeof why) &&
              roundtrip_one(t, s, n, true, why, sizeof why);
    }
    ok(all, "2000 random byte strings round-trip%s%s", all ? "" : ": ", all ? "" : why);
    ob_tok_free(t);

    sp.add_space_prefix = 0;
    sp.add_bos = 0;
    if (!ob_tok_new(&sp, &t)) {
        expect_ids(t, "ab", 2, false, IDS(ab), "add_space_prefix off");
        ok(!ob_tok_add_bos(t), "add_bos off");
        ob_tok_free(t);
    }
#undef BYTE
}

/* Big inputs stay fast and never trip the regex engine's limits. */
static void test_big(void)
{
    static struct vb v;
    memset(&v, 0, sizeof v);
    vb_bytes(&v);
    vb_add(&v, "aa", 1, 0);
    vb_add(&v, "\xc4\xa0\xc4\xa0", 1, 0);
    vb_merge(&v, "a a");
    vb_merge(&v, "\xc4\xa0 \xc4\xa0");
    const char *pres[] = {"qwen2", "llama3", "smollm", "gpt2"};
    size_t n = 1 << 20;
    char *s = malloc(n);
    for (size_t p = 0; p < 4; p++) {
        struct ob_tok_spec sp = vb_spec(&v, "gpt2", pres[p]);
        struct ob_tok *t;
        if (ob_tok_new(&sp, &t))
            continue;
        const char fills[] = {' ', 'a', '1', '\n', '!', (char)0xff};
        for (size_t f = 0; f < sizeof fills; f++) {
            memset(s, fills[f], n);
            s[n - 1] = 'x';
            char why[256];
            double t0 = now();
            int good = roundtrip_one(t, s, n, false, why, sizeof why);
            double dt = now() - t0;
            ok(good && dt < 10, "%s: 1 MiB of 0x%02x round-trips (%.2f s)%s%s", pres[p],
               (uint8_t)fills[f], dt, good ? "" : ": ", good ? "" : why);
        }
        ob_tok_free(t);
    }
    free(s);
}

/* GGUF keys: types, defaults, rejections. */
static void test_gguf(void)
{
    char path[] = "/tmp/ob-tok-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        ok(0, "mkstemp");
        return;
    }
    close(fd);
    const char *toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "<0x41>"};
    uint64_t lens[6];
    int32_t types[] = {2, 3, 3, 1, 1, 6};
    float scores[] = {0, 0, 0, -1, -2, 0};
    for (int i = 0; i < 6; i++)
        lens[i] = strlen(toks[i]);
    for (int pass = 0; pass < 5; pass++) {
        struct ob_gguf_writer *w;
        if (ob_gguf_writer_new(&w))
            break;
        ob_gguf_writer_set_str(w, "tokenizer.ggml.model", pass == 1 ? "t5" : "llama");
        if (pass == 2)
            ob_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2"),
            ob_gguf_writer_set_str(w, "tokenizer.ggml.pre", "mystery");
        ob_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", 6, toks, lens);
        ob_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", OB_GGUF_I32, pass == 3 ? 5 : 6,
                               types);
        ob_gguf_writer_set_arr(w, "tokenizer.ggml.scores", OB_GGUF_F32, 6, scores);
        ob_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
        ob_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
        ob_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 4294967295u);
        if (pass == 4)
            ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
        int e = ob_gguf_writer_write(w, path);
        ob_gguf_writer_free(w);
        struct ob_gguf *g;
        if (e || ob_gguf_open(path, &g)) {
            ok(0, "write/read a tokenizer GGUF: %s", ob_errmsg());
            break;
        }
        struct ob_tok *t = NULL;
        e = ob_tok_from_gguf(g, &t);
        switch (pass) {
        case 0:
            ok(!e && ob_tok_n_vocab(t) == 6 && ob_tok_bos(t) == 1 && ob_tok_eos(t) == 2 &&
               ob_tok_pad(t) == -1 && ob_tok_unk(t) == -1 && ob_tok_add_bos(t) &&
               ob_tok_add_space_prefix(t), "GGUF: keys and llama defaults");
            if (!e)
                expect_ids(t, "aA", 2, false, IDS(3, 4, 5), "GGUF: encode");
            break;
        case 1:
            ok(e == OB_EUNSUPP && strstr(ob_errmsg(), "'t5'"), "GGUF: model t5: %s", ob_errmsg());
            break;
        case 2:
            ok(e == OB_EUNSUPP && strstr(ob_errmsg(), "'mystery'"), "GGUF: unknown pre: %s",
               ob_errmsg());
            break;
        case 3:
            ok(e == OB_EFORMAT, "GGUF: token_type of the wrong length: %s", ob_errmsg());
            break;
        case 4:
            ok(!e && !ob_tok_add_space_prefix(t), "GGUF: add_space_prefix false");
            break;
        }
        ob_tok_free(t);
        ob_gguf_close(g);
    }
    unlink(path);
}

/* ---- tools for the shell driver ------------------------------------------------------------- */

/* Build a tokenizer from a Hugging Face tokenizer.json (BPE model, added tokens). */
static int load_json(const char *path, const char *pre, struct ob_tok **out, int pad_to,
                     struct ob_gguf_writer *w)
{
    size_t len;
    char *s = read_file(path, &len);
    if (!s)
        return ob_seterr(OB_EIO, "%s: cannot read", path);
    cJSON *j = cJSON_ParseWithLength(s, len);
    free(s);
    cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        cJSON_Delete(j);
        return ob_seterr(OB_EFORMAT, "%s: not a BPE tokenizer.json", path);
    }
    int n = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, vocab) if (it->valueint + 1 > n) n = it->valueint + 1;
    cJSON_ArrayForEach(it, added) {
        cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (cJSON_IsNumber(id) && id->valueint + 1 > n)
            n = id->valueint + 1;
    }
    if (pad_to > n)
        n = pad_to;
    struct ob_tok_str *tk = calloc(n, sizeof *tk);
    int32_t *ty = calloc(n, sizeof *ty);
    char (*padname)[24] = calloc(n, sizeof *padname);
    cJSON_ArrayForEach(it, vocab) {
        tk[it->valueint] = (struct ob_tok_str){it->string, strlen(it->string)};
        ty[it->valueint] = OB_TOK_NORMAL;
    }
    cJSON_ArrayForEach(it, added) {
        int id = cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
        const char *c = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
        tk[id] = (struct ob_tok_str){c, strlen(c)};
        ty[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) ?
                 OB_TOK_CONTROL : OB_TOK_USER_DEFINED;
    }
    for (int i = 0; i < n; i++)
        if (!ty[i]) {              /* a hole: padding, as llama.cpp's converter writes it */
            snprintf(padname[i], sizeof padname[i], "[PAD%d]", i);
            tk[i] = (struct ob_tok_str){padname[i], strlen(padname[i])};
            ty[i] = OB_TOK_UNUSED;
        }
    int nm = cJSON_GetArraySize(merges), k = 0;
    struct ob_tok_str *mg = calloc(2 * (size_t)nm + 1, sizeof *mg);
    char **joined = calloc((size_t)nm + 1, sizeof *joined);
    cJSON_ArrayForEach(it, merges) {
        if (cJSON_IsString(it)) {
            struct ob_tok_str l, r;
            const char *sp = strchr(it->valuestring + 1, ' ');
            l = (struct ob_tok_str){it->valuestring, (size_t)(sp - it->valuestring)};
            r = (struct ob_tok_str){sp + 1, strlen(sp + 1)};
            mg[2 * k] = l, mg[2 * k + 1] = r;
        } else {
            const char *l = cJSON_GetArrayItem(it, 0)->valuestring;
            const char *r = cJSON_GetArrayItem(it, 1)->valuestring;
            mg[2 * k] = (struct ob_tok_str){l, strlen(l)};
            mg[2 * k + 1] = (struct ob_tok_str){r, strlen(r)};
        }
        k++;
    }
    struct ob_tok_spec sp = {.model = "gpt2", .pre = pre, .n_vocab = (uint32_t)n, .tokens = tk,
                             .types = ty, .n_merges = (uint32_t)nm, .merge_pairs = mg,
                             .bos = -1, .eos = -1, .unk = -1, .pad = -1, .add_bos = 0,
                             .add_space_prefix = 0};
    int e = 0;
    if (out)
        e = ob_tok_new(&sp, out);
    if (w) {
        /* GGUF form: merges as "left right", token types, Qwen3's special ids */
        const char **ts = calloc(n, sizeof *ts), **ms = calloc(nm + 1, sizeof *ms);
        uint64_t *tl = calloc(n, sizeof *tl), *ml = calloc(nm + 1, sizeof *ml);
        for (int i = 0; i < n; i++)
            ts[i] = tk[i].ptr, tl[i] = tk[i].len;
        for (int i = 0; i < nm; i++) {
            size_t a = mg[2 * i].len, b = mg[2 * i + 1].len;
            joined[i] = malloc(a + b + 2);
            memcpy(joined[i], mg[2 * i].ptr, a);
            joined[i][a] = ' ';
            memcpy(joined[i] + a + 1, mg[2 * i + 1].ptr, b);
            ms[i] = joined[i], ml[i] = a + b + 1;
        }
        ob_gguf_writer_set_str(w, "general.architecture", "qwen3");
        ob_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        ob_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
        ob_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", n, ts, tl);
        ob_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", OB_GGUF_I32, n, ty);
        ob_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", nm, ms, ml);
        int32_t eot = -1, eos = -1;
        for (int i = 0; i < n; i++) {
            if (tk[i].len == 10 && !memcmp(tk[i].ptr, "<|im_end|>", 10))
                eos = i;
            if (tk[i].len == 13 && !memcmp(tk[i].ptr, "<|endoftext|>", 13))
                eot = i;
        }
        if (eos >= 0)
            ob_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
        if (eot >= 0) {
            ob_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)eot);
            ob_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)eot);
        }
        ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
        for (int i = 0; i < nm; i++)
            free(joined[i]);
        free(ts), free(ms), free(tl), free(ml);
    }
    free(joined);
    free(mg);
    free(padname);
    free(ty);
    free(tk);
    cJSON_Delete(j);
    return e;
}

static int load_src(const char *src, struct ob_tok **t)
{
    size_t n = strlen(src);
    if (n > 5 && !strcmp(src + n - 5, ".gguf")) {
        struct ob_gguf *g;
        int e = ob_gguf_open(src, &g);
        if (!e) {
            e = ob_tok_from_gguf(g, t);
            ob_gguf_close(g);
        }
        return e;
    }
    const char *colon = strchr(src, ':');
    if (!colon)
        return ob_seterr(OB_EUSAGE, "%s: want FILE.gguf or PRE:tokenizer.json", src);
    char pre[32];
    snprintf(pre, sizeof pre, "%.*s", (int)(colon - src), src);
    return load_json(colon + 1, pre, t, 0, NULL);
}

struct line {
    char *s;
    size_t n;
};

/* Corpus lines: a JSON string, or {"hex": "..."} */
static struct line *read_corpus(const char *path, size_t *count)
{
    size_t len;
    char *all = read_file(path, &len);
    if (!all)
        return NULL;
    struct line *v = NULL;
    size_t n = 0;
    for (char *p = all, *e; p < all + len; p = e + 1) {
        e = memchr(p, '\n', all + len - p);
        if (!e)
            e = all + len;
        if (e == p)
            continue;
        cJSON *j = cJSON_ParseWithLength(p, e - p);
        v = realloc(v, (n + 1) * sizeof *v);
        if (cJSON_IsString(j)) {
            v[n].s = strdup(j->valuestring);
            v[n].n = strlen(j->valuestring);
        } else {
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "hex");
            const char *hx = cJSON_IsString(h) ? h->valuestring : "";
            size_t hl = strlen(hx);
            v[n].s = malloc(hl / 2 + 1);
            v[n].n = 0;
            for (size_t i = 0; i + 1 < hl;) {
                if (hx[i] == ' ') {
                    i++;
                    continue;
                }
                unsigned x;
                sscanf(hx + i, "%2x", &x);
                v[n].s[v[n].n++] = (char)x;
                i += 2;
            }
        }
        cJSON_Delete(j);
        n++;
    }
    free(all);
    *count = n;
    return v;
}

static int cmd_dump(struct ob_tok *t, struct line *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        printf("{\"line\":%zu", i + 1);
        for (int special = 0; special < 2; special++) {
            int32_t *ids;
            size_t k;
            if (ob_tok_encode(t, c[i].s, c[i].n, special, &ids, &k)) {
                fprintf(stderr, "line %zu: %s\n", i + 1, ob_errmsg());
                return 1;
            }
            printf(",\"%s\":[", special ? "special" : "plain");
            for (size_t m = 0; m < k; m++)
                printf("%s%d", m ? "," : "", ids[m]);
            printf("]");
            free(ids);
        }
        printf("}\n");
    }
    return 0;
}

static int cmd_roundtrip(struct ob_tok *t, struct line *c, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        for (int special = 0; special < 2; special++) {
            char why[256];
            if (!roundtrip_one(t, c[i].s, c[i].n, special, why, sizeof why)) {
                printf("line %zu (%s): %s\n", i + 1, special ? "special" : "plain", why);
                bad = 1;
            }
        }
    return bad;
}

static int cmd_perf(const char *src, struct line *c, size_t n)
{
    struct ob_tok *t;
    double t0 = now();
    if (load_src(src, &t)) {
        fprintf(stderr, "%s: %s\n", src, ob_errmsg());
        return 1;
    }
    double load = now() - t0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += c[i].n + 1;
    char *text = malloc(total + 1), *p = text;
    for (size_t i = 0; i < n; i++) {
        memcpy(p, c[i].s, c[i].n);
        p += c[i].n;
        *p++ = '\n';
    }
    int32_t *ids;
    size_t k = 0, rounds = 0;
    t0 = now();
    double dt;
    do {
        if (ob_tok_encode(t, text, total, true, &ids, &k))
            return 1;
        free(ids);
        rounds++;
    } while ((dt = now() - t0) < 0.2);
    double per = dt / rounds, mbs = total / per / 1e6;
    printf("load %.3f s (%u tokens); encode %zu bytes -> %zu tokens in %.2f ms (%.1f MB/s)\n",
           load, ob_tok_n_vocab(t), total, k, per * 1e3, mbs);
    free(text);
    ob_tok_free(t);
    return load > 1.0 || mbs < 1.0;
}

int main(int argc, char **argv)
{
    if (argc == 1) {
        test_gpt2();
        test_hostile();
        test_spm();
        test_big();
        test_gguf();
        printf("1..%d\n", n_test);
        return n_fail ? 1 : 0;
    }
    if (!strcmp(argv[1], "mkgguf") && argc == 6) {
        struct ob_gguf_writer *w;
        int e = ob_gguf_writer_new(&w);
        if (!e)
            e = load_json(argv[2], argv[3], NULL, atoi(argv[4]), w);
        if (!e)
            e = ob_gguf_writer_write(w, argv[5]);
        ob_gguf_writer_free(w);
        if (e)
            fprintf(stderr, "mkgguf: %s\n", ob_errmsg());
        return e != 0;
    }
    if (argc != 4) {
        fprintf(stderr, "usage: tok [dump|roundtrip|perf SRC CORPUS | mkgguf JSON PRE N OUT]\n");
        return 2;
    }
    size_t n;
    struct line *c = read_corpus(argv[3], &n);
    if (!c) {
        fprintf(stderr, "%s: cannot read\n", argv[3]);
        return 1;
    }
    int rc = 2;
    if (!strcmp(argv[1], "perf")) {
        rc = cmd_perf(argv[2], c, n);
    } else {
        struct ob_tok *t;
        if (load_src(argv[2], &t)) {
            fprintf(stderr, "%s: %s\n", argv[2], ob_errmsg());
            return 1;
        }
        if (!strcmp(argv[1], "dump"))
            rc = cmd_dump(t, c, n);
        else if (!strcmp(argv[1], "roundtrip"))
            rc = cmd_roundtrip(t, c, n);
        ob_tok_free(t);
    }
    for (size_t i = 0; i < n; i++)
        free(c[i].s);
    free(c);
    return rc;
}
