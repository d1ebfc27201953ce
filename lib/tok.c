/*
 * tok.c — byte-level BPE ("gpt2") and SentencePiece-style BPE ("llama") tokenizers.
 *
 * Tables built once by ob_tok_new (the tokenizer is read-only afterwards):
 *   info[n_vocab]     offset and length of each token's text in `texts` and of its output
 *                     bytes in `pieces`, type, score, flags
 *   thash             open addressing, text -> id; duplicates sit further along the probe
 *                     sequence, so the first hit for a text is its lowest id
 *   mhash             gpt2 merges: (left id, right id) -> (rank, result id)
 *   trie              the texts of special tokens, for parse_special (llama: CONTROL only)
 *   udtrie            llama: the texts of USER_DEFINED tokens, spaces escaped as U+2581
 *   byte_tok[256]     gpt2: the token for the byte-level character of each byte;
 *                     llama: the <0xNN> byte-fallback token of each byte
 *   re[]              the pre-tokenizer: PCRE2 regexes applied in sequence (gpt2)
 *
 * Encoding splits the text at special tokens (parse_special), then:
 *   gpt2   each regex splits every piece of the previous one (matches and the gaps between
 *          them are both pieces, as the `Isolated` split of Hugging Face `tokenizers`); each
 *          final piece becomes one symbol per byte, and the pair with the lowest merge rank
 *          (then the leftmost) is merged until no pair has a rule;
 *   llama  spaces become U+2581; USER_DEFINED pieces are cut out of the escaped text (leftmost,
 *          then longest, with or without parse_special: sentencepiece's user-defined symbols,
 *          which its BPE never merges with their neighbours); the stretches between them
 *          become one symbol per UTF-8 character (per byte where the text is not valid
 *          UTF-8), and the adjacent pair whose concatenation is a vocabulary piece with the
 *          highest score (then the leftmost) is merged until none is; symbols outside the
 *          vocabulary become <0xNN> byte tokens.
 * Both loops use a binary heap of candidate pairs; a candidate whose symbols changed since it
 * was pushed is skipped when it comes out. Work is O(n log n) in the length of a piece.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#include "sb.h"
#include "tok.h"

enum { KIND_GPT2 = 1, KIND_SPM = 2 };

/* info[].flags */
#define F_BPE     1u   /* gpt2: may be a BPE symbol or a merge result */
#define F_SPM     2u   /* llama: may be a merge result or a final symbol (sentencepiece's
                          "pieces": NORMAL, USER_DEFINED, UNUSED) */
#define F_SPECIAL 4u   /* matched by parse_special: CONTROL or USER_DEFINED (gpt2), CONTROL
                          (llama, whose USER_DEFINED tokens are matched always: udtrie) */

#define MAX_RE 3

struct tokinfo {
    uint32_t off, len;             /* text in tok->texts */
    uint32_t poff, plen;           /* output bytes in tok->pieces */
    float score;
    uint8_t type;                  /* enum ob_tok_type (out-of-range input types: NORMAL) */
    uint8_t flags;
};

struct tslot {                     /* text hash slot; id1 == 0 is empty */
    uint32_t id1;                  /* id + 1 */
    uint32_t h;                    /* high half of the text's hash (the low bits pick the
                                      slot), to skip most compares */
};

struct mslot {                     /* merge hash slot; rank == UINT32_MAX is empty */
    int32_t a, b;                  /* left and right token ids */
    uint32_t rank;
    int32_t res;                   /* the merged token */
};

struct tnode {                     /* special-token trie; children as a sibling list */
    int32_t id;                    /* lowest special id whose text ends here, or -1 */
    uint32_t child, sibling;       /* node indices, 0 = none (node 0 is the root) */
    uint8_t byte;
};

struct ob_tok {
    int kind;
    char model[8];
    char pre[16];
    uint32_t n_vocab;
    struct tokinfo *info;
    char *texts, *pieces;
    struct tslot *thash;
    uint32_t tmask;
    struct tslot *phash;           /* pieces -> ids (ob_tok_find_piece), masked by tmask */
    struct mslot *mhash;
    uint32_t mmask;
    struct tnode *trie;            /* NULL when there are no special tokens */
    bool has_special;
    struct tnode *udtrie;          /* llama: USER_DEFINED texts, escaped; NULL when none */
    int32_t byte_tok[256];
    bool has_byte_tok;             /* llama: some <0xNN> token exists (byte fallback on) */
    pcre2_code *re[MAX_RE];
    int n_re;
    bool ignore_merges;            /* gpt2: a piece that is a whole token is not merged */
    int32_t bos, eos, unk, pad;
    bool add_bos, add_space_prefix;
};

/* ---- pre-tokenizers ------------------------------------------------------------------------ */

/*
 * The regexes of Hugging Face `tokenizers` as the models' tokenizer.json files give them, with
 * one substitution: `tokenizers` matches \s with Oniguruma, whose \s is the Unicode White_Space
 * property; PCRE2's \s under UCP differs from it (it adds U+180E), so the patterns spell
 * White_Space out as a property. (?i:...) folds case with Unicode rules in both engines, so
 * "'ſ" is a contraction like "'s".
 */
#define WS "\\p{White_Space}"
#define NWS "\\P{White_Space}"
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|" \
                WS "+(?!" NWS ")|" WS "+"
#define RE_QWEN2 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" \
                 "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" WS "*[\\r\\n]+|" WS "+(?!" NWS ")|" WS "+"
#define RE_LLAMA3 "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}" \
                  "| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|" WS "*[\\r\\n]+|" WS "+(?!" NWS ")|" WS "+"

static const struct pre {
    const char *name;              /* as in tokenizer.ggml.pre */
    const char *canon;             /* the name ob_tok_pre reports */
    int n;
    const char *re[MAX_RE];
    bool ignore_merges;
} pres[] = {
    {"qwen2", "qwen2", 1, {RE_QWEN2}, false},
    /* Llama 3's tokenizer.json sets ignore_merges: a piece that is itself a token is kept */
    {"llama3", "llama3", 1, {RE_LLAMA3}, true},
    {"llama-bpe", "llama3", 1, {RE_LLAMA3}, true},
    /* SmolLM: Digits(individual_digits) then ByteLevel's GPT-2 regex, each on the pieces of
     * the one before (so a lookahead never sees past a digit) */
    {"smollm", "smollm", 2, {"\\p{N}", RE_GPT2}, false},
    {"gpt2", "gpt2", 1, {RE_GPT2}, false},
    {"gpt-2", "gpt2", 1, {RE_GPT2}, false},
    {"default", "gpt2", 1, {RE_GPT2}, false},
};

/* ---- small helpers ------------------------------------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n)
{
    /* FNV-1a, then a final mix so that the low bits used for the slot are well spread */
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_pair(int32_t a, int32_t b)
{
    uint64_t h = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

/* Table size: a power of two at least twice n (n < 2^31 here). */
static uint32_t table_size(uint64_t n)
{
    uint64_t s = 16;
    while (s < 2 * n)
        s <<= 1;
    return (uint32_t)s;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when the bytes there are not one. */
static size_t utf8_seq(const uint8_t *p, size_t n, uint32_t *cp)
{
    uint8_t c = p[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

/*
 * GPT-2's byte-to-unicode alphabet: the printable bytes 33-126, 161-172 and 174-255 stand for
 * themselves, the other 68 bytes (controls, space, 127-160, 173) for U+0100 + their rank among
 * them. Every character is below U+0800, so at most 2 bytes of UTF-8.
 */
static uint32_t bytelevel_cp(unsigned b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
        return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174))
            n++;
    return 256 + n;
}

static int hexval(uint8_t c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;                      /* only called for cp < 0x800 */
}

/* ---- vocabulary lookups -------------------------------------------------------------------- */

/* The lowest id with exactly this text whose flags include `need` (0: any token), or -1. */
static int32_t lookup(const struct ob_tok *t, const char *s, size_t n, unsigned need)
{
    uint64_t h = hash_bytes(s, n);
    for (uint32_t i = (uint32_t)h & t->tmask;; i = (i + 1) & t->tmask) {
        const struct tslot *sl = &t->thash[i];
        if (!sl->id1)
            return -1;
        if (sl->h != (uint32_t)(h >> 32))
            continue;
        const struct tokinfo *ti = &t->info[sl->id1 - 1];
        if (ti->len == n && (!need || (ti->flags & need)) && !memcmp(t->texts + ti->off, s, n))
            return (int32_t)(sl->id1 - 1);
    }
}

static const struct mslot *merge_find(const struct ob_tok *t, int32_t a, int32_t b)
{
    if (!t->mhash)
        return NULL;
    for (uint32_t i = (uint32_t)hash_pair(a, b) & t->mmask;; i = (i + 1) & t->mmask) {
        const struct mslot *m = &t->mhash[i];
        if (m->rank == UINT32_MAX)
            return NULL;
        if (m->a == a && m->b == b)
            return m;
    }
}

/* ---- construction -------------------------------------------------------------------------- */

void ob_tok_free(struct ob_tok *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    free(t->info);
    free(t->texts);
    free(t->pieces);
    free(t->thash);
    free(t->phash);
    free(t->mhash);
    free(t->trie);
    free(t->udtrie);
    free(t);
}

static int32_t opt_id(const struct ob_tok *t, int64_t id)
{
    return id >= 0 && id < (int64_t)t->n_vocab ? (int32_t)id : -1;
}

/*
 * A trie of the texts of the tokens whose flags include `flag` (or, flag 0, of type
 * USER_DEFINED), each node keeping the lowest id whose text ends there. escape: ' ' is stored
 * as U+2581 (llama's escaped form). *out is NULL when no token qualifies.
 */
static int build_trie(const struct ob_tok *t, unsigned flag, bool escape, struct tnode **out)
{
    *out = NULL;
    uint64_t total = 1;
    for (uint32_t i = 0; i < t->n_vocab; i++)
        if (flag ? t->info[i].flags & flag : t->info[i].type == OB_TOK_USER_DEFINED)
            total += 3 * (uint64_t)t->info[i].len;
    if (total == 1)
        return 0;
    if (total > UINT32_MAX)
        return ob_seterr(OB_ERANGE, "tokenizer: special tokens are too long in total");
    struct tnode *trie = malloc(total * sizeof *trie);
    if (!trie)
        return ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
    trie[0] = (struct tnode){.id = -1};
    uint32_t n_trie = 1;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        const struct tokinfo *ti = &t->info[i];
        if (!(flag ? ti->flags & flag : ti->type == OB_TOK_USER_DEFINED) || !ti->len)
            continue;
        uint32_t node = 0;
        for (uint32_t k = 0; k < ti->len; k++) {
            uint8_t c = (uint8_t)t->texts[ti->off + k];
            const uint8_t esc[3] = {0xe2, 0x96, 0x81};
            int nb = escape && c == ' ' ? 3 : 1;
            for (int b = 0; b < nb; b++) {
                uint8_t cb = nb == 3 ? esc[b] : c;
                uint32_t ch = trie[node].child;
                while (ch && trie[ch].byte != cb)
                    ch = trie[ch].sibling;
                if (!ch) {
                    ch = n_trie++;
                    trie[ch] = (struct tnode){.id = -1, .sibling = trie[node].child, .byte = cb};
                    trie[node].child = ch;
                }
                node = ch;
            }
        }
        if (trie[node].id < 0)
            trie[node].id = (int32_t)i;
    }
    *out = trie;
    return 0;
}

/* Split a GGUF-style merge "left right" at its first space after the first byte (a left
 * token that is itself a space stays whole). */
static bool split_merge(const struct ob_tok_str *m, struct ob_tok_str *l, struct ob_tok_str *r)
{
    const char *sp = m->len > 1 ? memchr(m->ptr + 1, ' ', m->len - 1) : NULL;
    if (!sp)
        return false;
    *l = (struct ob_tok_str){m->ptr, (size_t)(sp - m->ptr)};
    *r = (struct ob_tok_str){sp + 1, m->len - (size_t)(sp - m->ptr) - 1};
    return true;
}

static int build_merges(struct ob_tok *t, const struct ob_tok_spec *sp)
{
    if (!sp->n_merges)
        return 0;
    if (!sp->merges && !sp->merge_pairs)
        return ob_seterr(OB_EFORMAT, "tokenizer: %u merges announced but none given",
                         sp->n_merges);
    uint32_t size = table_size(sp->n_merges);
    t->mhash = malloc((size_t)size * sizeof *t->mhash);
    struct ob_sb cat = {0};        /* the two halves of a merge, joined */
    if (!t->mhash)
        return ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
    for (uint32_t i = 0; i < size; i++)
        t->mhash[i].rank = UINT32_MAX;
    t->mmask = size - 1;
    for (uint32_t rank = 0; rank < sp->n_merges; rank++) {
        struct ob_tok_str l, r;
        if (sp->merge_pairs) {
            l = sp->merge_pairs[2 * (size_t)rank];
            r = sp->merge_pairs[2 * (size_t)rank + 1];
        } else {
            l = sp->merges[rank];
            r = (struct ob_tok_str){"", 0};
        }
        if ((!l.ptr && l.len) || (!r.ptr && r.len)) {
            ob_sb_free(&cat);
            return ob_seterr(OB_EFORMAT, "tokenizer: merge %u is NULL", rank);
        }
        if (!sp->merge_pairs && !split_merge(&sp->merges[rank], &l, &r)) {
            ob_sb_free(&cat);
            return ob_seterr(OB_EFORMAT, "tokenizer: merge %u has no space between its halves",
                             rank);
        }
        int32_t a = lookup(t, l.ptr, l.len, F_BPE), b = lookup(t, r.ptr, r.len, F_BPE);
        if (a < 0 || b < 0)
            continue;              /* names a token that does not exist: ignored */
        ob_sb_reset(&cat);
        ob_sb_add(&cat, l.ptr, l.len);
        ob_sb_add(&cat, r.ptr, r.len);
        if (cat.oom) {
            ob_sb_free(&cat);
            return ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
        }
        int32_t res = lookup(t, cat.p, cat.len, F_BPE);
        if (res < 0)
            continue;              /* the merged text is not a token: ignored */
        uint32_t j = (uint32_t)hash_pair(a, b) & t->mmask;
        while (t->mhash[j].rank != UINT32_MAX && !(t->mhash[j].a == a && t->mhash[j].b == b))
            j = (j + 1) & t->mmask;
        if (t->mhash[j].rank == UINT32_MAX)    /* a repeated pair keeps its first rank */
            t->mhash[j] = (struct mslot){a, b, rank, res};
    }
    ob_sb_free(&cat);
    return 0;
}

/* Output bytes of every token (see ob_tok_piece). Never longer than the text. */
static void build_pieces(struct ob_tok *t)
{
    int16_t rev[0x800];            /* byte-level character -> byte */
    memset(rev, 0xff, sizeof rev);
    for (unsigned b = 0; b < 256; b++)
        rev[bytelevel_cp(b)] = (int16_t)b;
    uint32_t o = 0;
    for (uint32_t i = 0; i < t->n_vocab; i++) {
        struct tokinfo *ti = &t->info[i];
        const uint8_t *s = (const uint8_t *)t->texts + ti->off;
        char *d = t->pieces + o;
        uint32_t n = 0, k = 0;
        int hi, lo;
        ti->poff = o;
        if (ti->type == OB_TOK_CONTROL || ti->type == OB_TOK_USER_DEFINED ||
            ti->type == OB_TOK_UNKNOWN) {
            memcpy(d, s, ti->len);
            n = ti->len;
        } else if (t->kind == KIND_SPM && ti->type == OB_TOK_BYTE && ti->len == 6 &&
                   !memcmp(s, "<0x", 3) && s[5] == '>' && (hi = hexval(s[3])) >= 0 &&
                   (lo = hexval(s[4])) >= 0) {
            d[n++] = (char)(hi << 4 | lo);
        } else if (t->kind == KIND_SPM) {
            while (k < ti->len) {
                if (ti->len - k >= 3 && s[k] == 0xe2 && s[k + 1] == 0x96 && s[k + 2] == 0x81) {
                    d[n++] = ' ';
                    k += 3;
                } else {
                    d[n++] = (char)s[k++];
                }
            }
        } else {
            while (k < ti->len) {
                uint32_t cp;
                size_t l = utf8_seq(s + k, ti->len - k, &cp);
                if (l && cp < 0x800 && rev[cp] >= 0) {
                    d[n++] = (char)rev[cp];
                    k += (uint32_t)l;
                } else {
                    /* not in the byte-level alphabet: passed through as stored */
                    l = l ? l : 1;
                    memcpy(d + n, s + k, l);
                    n += (uint32_t)l;
                    k += (uint32_t)l;
                }
            }
        }
        ti->plen = n;
        o += n;
    }
}

/* the id whose piece the slot's hash and bytes name, searched as ob_tok_find_piece does */
static int32_t piece_lookup(const struct ob_tok *t, const char *s, size_t n, uint64_t h)
{
    for (uint32_t i = (uint32_t)h & t->tmask;; i = (i + 1) & t->tmask) {
        const struct tslot *sl = &t->phash[i];
        if (!sl->id1)
            return -1;
        const struct tokinfo *ti = &t->info[sl->id1 - 1];
        if (sl->h == (uint32_t)(h >> 32) && ti->plen == n && !memcmp(t->pieces + ti->poff, s, n))
            return (int32_t)(sl->id1 - 1);
    }
}

/* Pieces -> ids: every non-empty piece once, the id found for it first: normal tokens (NORMAL,
 * UNDEFINED) before any other type, the lowest id of each kind first. */
static int build_piece_hash(struct ob_tok *t)
{
    t->phash = calloc((size_t)t->tmask + 1, sizeof *t->phash);
    if (!t->phash)
        return ob_seterr(OB_ENOMEM, "tokenizer: out of memory for %u tokens", t->n_vocab);
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < t->n_vocab; i++) {
            const struct tokinfo *ti = &t->info[i];
            bool normal = ti->type == OB_TOK_NORMAL || ti->type == OB_TOK_UNDEFINED;
            if (normal != (pass == 0) || !ti->plen)
                continue;
            const char *p = t->pieces + ti->poff;
            uint64_t h = hash_bytes(p, ti->plen);
            if (piece_lookup(t, p, ti->plen, h) >= 0)
                continue;                  /* an earlier id has these bytes */
            uint32_t j = (uint32_t)h & t->tmask;
            while (t->phash[j].id1)
                j = (j + 1) & t->tmask;
            t->phash[j] = (struct tslot){i + 1, (uint32_t)(h >> 32)};
        }
    return 0;
}

static int compile_pre(struct ob_tok *t, const struct pre *p)
{
    for (int i = 0; i < p->n; i++) {
        int ec;
        PCRE2_SIZE eo;
        t->re[i] = pcre2_compile((PCRE2_SPTR)p->re[i], PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
        if (!t->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return ob_seterr(OB_EUNSUPP, "tokenizer: pre-tokenizer '%s': PCRE2 %d.%d cannot "
                             "compile regex %d at offset %zu: %s", p->name, PCRE2_MAJOR,
                             PCRE2_MINOR, i, (size_t)eo, (char *)msg);
        }
        t->n_re = i + 1;
        /* JIT is an optimisation only: without it the interpreter gives the same matches */
        (void)pcre2_jit_compile(t->re[i], PCRE2_JIT_COMPLETE);
    }
    t->ignore_merges = p->ignore_merges;
    return 0;
}

int ob_tok_new(const struct ob_tok_spec *sp, struct ob_tok **out)
{
    *out = NULL;
    if (!sp || !sp->model)
        return ob_seterr(OB_EUSAGE, "tokenizer: no model name");
    int kind = !strcmp(sp->model, "gpt2") ? KIND_GPT2 : !strcmp(sp->model, "llama") ? KIND_SPM : 0;
    if (!kind)
        return ob_seterr(OB_EUNSUPP, "tokenizer: model '%.64s' is not supported (gpt2 and "
                         "llama are)", sp->model);
    const struct pre *pre = NULL;
    if (kind == KIND_GPT2) {
        const char *name = sp->pre ? sp->pre : "default";
        for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++)
            if (!strcmp(name, pres[i].name))
                pre = &pres[i];
        if (!pre)
            return ob_seterr(OB_EUNSUPP, "tokenizer: pre-tokenizer '%.64s' is not supported "
                             "(qwen2, llama3, llama-bpe, smollm, gpt2, default are)", name);
    }
    if (sp->n_vocab == 0)
        return ob_seterr(OB_EFORMAT, "tokenizer: the vocabulary is empty");
    if (sp->n_vocab > INT32_MAX - 1)
        return ob_seterr(OB_ERANGE, "tokenizer: %u tokens is too many", sp->n_vocab);
    if (!sp->tokens)
        return ob_seterr(OB_EFORMAT, "tokenizer: no token texts");

    struct ob_tok *t = calloc(1, sizeof *t);
    if (!t)
        return ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
    int e = 0;
    t->kind = kind;
    strcpy(t->model, kind == KIND_GPT2 ? "gpt2" : "llama");
    strcpy(t->pre, pre ? pre->canon : "");
    t->n_vocab = sp->n_vocab;

    /* texts, types, flags */
    uint64_t total = 0;
    for (uint32_t i = 0; i < sp->n_vocab; i++) {
        if (!sp->tokens[i].ptr && sp->tokens[i].len) {
            e = ob_seterr(OB_EFORMAT, "tokenizer: token %u has no text", i);
            goto fail;
        }
        if (sp->tokens[i].len >= UINT32_MAX) {
            e = ob_seterr(OB_ERANGE, "tokenizer: token %u is %zu bytes long", i,
                          sp->tokens[i].len);
            goto fail;
        }
        total += sp->tokens[i].len;
    }
    if (total >= UINT32_MAX) {
        e = ob_seterr(OB_ERANGE, "tokenizer: token texts are too long in total (%llu bytes)",
                      (unsigned long long)total);
        goto fail;
    }
    t->info = calloc(sp->n_vocab, sizeof *t->info);
    t->texts = malloc(total + 1);
    t->pieces = malloc(total + 1);
    t->tmask = table_size(sp->n_vocab) - 1;
    t->thash = calloc((size_t)t->tmask + 1, sizeof *t->thash);
    if (!t->info || !t->texts || !t->pieces || !t->thash) {
        e = ob_seterr(OB_ENOMEM, "tokenizer: out of memory for %u tokens", sp->n_vocab);
        goto fail;
    }
    uint32_t off = 0;
    for (uint32_t i = 0; i < sp->n_vocab; i++) {
        struct tokinfo *ti = &t->info[i];
        size_t len = sp->tokens[i].len;
        if (len)
            memcpy(t->texts + off, sp->tokens[i].ptr, len);
        ti->off = off;
        ti->len = (uint32_t)len;
        off += (uint32_t)len;
        int32_t ty = sp->types ? sp->types[i] : OB_TOK_NORMAL;
        ti->type = ty >= OB_TOK_NORMAL && ty <= OB_TOK_BYTE ? (uint8_t)ty : OB_TOK_NORMAL;
        ti->score = sp->scores ? sp->scores[i] : 0.0f;
        if (len == 0)
            continue;              /* an empty text is never a symbol, a merge or special */
        if (ti->type == OB_TOK_CONTROL || (ti->type == OB_TOK_USER_DEFINED && kind == KIND_GPT2))
            ti->flags |= F_SPECIAL;
        if (ti->type == OB_TOK_NORMAL || ti->type == OB_TOK_UNUSED)
            ti->flags |= F_BPE | F_SPM;
        if (ti->type == OB_TOK_USER_DEFINED)
            ti->flags |= F_SPM;
        uint64_t h = hash_bytes(t->texts + ti->off, len);
        uint32_t j = (uint32_t)h & t->tmask;
        while (t->thash[j].id1)
            j = (j + 1) & t->tmask;
        t->thash[j] = (struct tslot){i + 1, (uint32_t)(h >> 32)};
    }

    t->bos = opt_id(t, sp->bos);
    t->eos = opt_id(t, sp->eos);
    t->unk = opt_id(t, sp->unk);
    t->pad = opt_id(t, sp->pad);
    t->add_bos = sp->add_bos < 0 ? kind == KIND_SPM : sp->add_bos != 0;
    t->add_space_prefix = sp->add_space_prefix < 0 ? kind == KIND_SPM : sp->add_space_prefix != 0;

    if ((e = build_trie(t, F_SPECIAL, false, &t->trie)) ||
        (kind == KIND_SPM && (e = build_trie(t, 0, true, &t->udtrie))))
        goto fail;
    t->has_special = t->trie != NULL;

    for (unsigned b = 0; b < 256; b++) {
        char s[8];
        if (kind == KIND_GPT2) {
            size_t n = put_utf8(s, bytelevel_cp(b));
            t->byte_tok[b] = lookup(t, s, n, F_BPE);
        } else {
            snprintf(s, sizeof s, "<0x%02X>", b);
            int32_t id = -1;
            uint64_t h = hash_bytes(s, 6);
            /* the lowest token of type BYTE with this text */
            for (uint32_t j = (uint32_t)h & t->tmask; t->thash[j].id1; j = (j + 1) & t->tmask) {
                const struct tokinfo *ti = &t->info[t->thash[j].id1 - 1];
                if (ti->type == OB_TOK_BYTE && ti->len == 6 && !memcmp(t->texts + ti->off, s, 6)) {
                    id = (int32_t)t->thash[j].id1 - 1;
                    break;
                }
            }
            t->byte_tok[b] = id;
            t->has_byte_tok |= id >= 0;
        }
    }

    if (kind == KIND_GPT2) {
        if ((e = build_merges(t, sp)) || (e = compile_pre(t, pre)))
            goto fail;
    }
    build_pieces(t);
    if ((e = build_piece_hash(t)))
        goto fail;
    *out = t;
    return 0;
fail:
    ob_tok_free(t);
    return e;
}

/* ---- GGUF ---------------------------------------------------------------------------------- */

/* An optional id key: absent, or a value outside the vocabulary (4294967295 is common) -> -1. */
/* A special-token id: -1 as a signed integer, or 0xffffffff as llama.cpp's converter writes an
 * absent id, mean none; any other id outside the n tokens is an error that names the key (it
 * used to mean none silently: a bos id of 600 in a 512-token vocabulary dropped BOS). */
static int gguf_id(const struct ob_gguf *g, const char *key, uint64_t n, int64_t *out)
{
    const struct ob_gguf_value *v = ob_gguf_get(g, key);
    uint64_t u;
    *out = -1;
    if (!v || ((v->type == OB_GGUF_I8 || v->type == OB_GGUF_I16 || v->type == OB_GGUF_I32 ||
                v->type == OB_GGUF_I64) && v->i < 0))
        return 0;
    int e = ob_gguf_get_u64(g, key, &u);
    if (e)
        return ob_errprefix(e, "tokenizer");
    if (u == UINT32_MAX || u == UINT64_MAX)
        return 0;
    if (u >= n)
        return ob_seterr(OB_EFORMAT, "tokenizer: %s = %llu: outside the vocabulary of %llu tokens",
                         key, (unsigned long long)u, (unsigned long long)n);
    *out = (int64_t)u;
    return 0;
}

static int gguf_flag(const struct ob_gguf *g, const char *key, int *out)
{
    bool b;
    *out = -1;
    if (!ob_gguf_get(g, key))
        return 0;
    int e = ob_gguf_get_bool(g, key, &b);
    if (e)
        return ob_errprefix(e, "tokenizer");
    *out = b;
    return 0;
}

static bool is_int_vtype(uint32_t t)
{
    return t <= OB_GGUF_I32 || t == OB_GGUF_BOOL || t == OB_GGUF_U64 || t == OB_GGUF_I64;
}

/* A string value as a NUL-terminated name, or NULL when it holds a NUL or is too long. */
static bool gguf_name(const struct ob_gguf_value *v, char *buf, size_t cap)
{
    if (v->str.len >= cap || memchr(v->str.ptr, 0, v->str.len))
        return false;
    memcpy(buf, v->str.ptr, v->str.len);
    buf[v->str.len] = 0;
    return true;
}

int ob_tok_from_gguf(const struct ob_gguf *g, struct ob_tok **out)
{
    *out = NULL;
    struct ob_tok_spec sp = {.add_bos = -1, .add_space_prefix = -1};
    char model[64], pre[64];
    const struct ob_gguf_value *v;
    int e;

    v = ob_gguf_get(g, "tokenizer.ggml.model");
    if (!v)
        return ob_seterr(OB_ENOTFOUND, "tokenizer: metadata key 'tokenizer.ggml.model' is "
                         "missing");
    if (v->type != OB_GGUF_STRING)
        return ob_seterr(OB_EFORMAT, "tokenizer: 'tokenizer.ggml.model' is not a string");
    if (!gguf_name(v, model, sizeof model))
        return ob_seterr(OB_EUNSUPP, "tokenizer: model name of %llu bytes is not supported",
                         (unsigned long long)v->str.len);
    sp.model = model;
    v = ob_gguf_get(g, "tokenizer.ggml.pre");
    if (v) {
        if (v->type != OB_GGUF_STRING)
            return ob_seterr(OB_EFORMAT, "tokenizer: 'tokenizer.ggml.pre' is not a string");
        if (!gguf_name(v, pre, sizeof pre))
            return ob_seterr(OB_EUNSUPP, "tokenizer: pre-tokenizer name of %llu bytes is not "
                             "supported", (unsigned long long)v->str.len);
        sp.pre = pre;
    }

    const struct ob_gguf_value *toks, *types = NULL, *scores = NULL, *merges = NULL;
    if ((e = ob_gguf_get_arr(g, "tokenizer.ggml.tokens", OB_GGUF_STRING, &toks)))
        return ob_errprefix(e, "tokenizer");
    uint64_t n = toks->arr.n;
    if (n > INT32_MAX - 1)
        return ob_seterr(OB_ERANGE, "tokenizer: %llu tokens is too many", (unsigned long long)n);
    types = ob_gguf_get(g, "tokenizer.ggml.token_type");
    if (types && (types->type != OB_GGUF_ARRAY || !is_int_vtype(types->arr.elem_type) ||
                  types->arr.n != n))
        return ob_seterr(OB_EFORMAT, "tokenizer: 'tokenizer.ggml.token_type' is not an array "
                         "of %llu integers", (unsigned long long)n);
    scores = ob_gguf_get(g, "tokenizer.ggml.scores");
    if (scores && (scores->type != OB_GGUF_ARRAY || scores->arr.n != n ||
                   (scores->arr.elem_type != OB_GGUF_F32 && scores->arr.elem_type != OB_GGUF_F64)))
        return ob_seterr(OB_EFORMAT, "tokenizer: 'tokenizer.ggml.scores' is not an array of "
                         "%llu floats", (unsigned long long)n);
    if (ob_gguf_get(g, "tokenizer.ggml.merges")) {
        if ((e = ob_gguf_get_arr(g, "tokenizer.ggml.merges", OB_GGUF_STRING, &merges)))
            return ob_errprefix(e, "tokenizer");
        if (merges->arr.n > UINT32_MAX - 1)
            return ob_seterr(OB_ERANGE, "tokenizer: too many merges");
    }
    if ((e = gguf_id(g, "tokenizer.ggml.bos_token_id", n, &sp.bos)) ||
        (e = gguf_id(g, "tokenizer.ggml.eos_token_id", n, &sp.eos)) ||
        (e = gguf_id(g, "tokenizer.ggml.unknown_token_id", n, &sp.unk)) ||
        (e = gguf_id(g, "tokenizer.ggml.padding_token_id", n, &sp.pad)) ||
        (e = gguf_flag(g, "tokenizer.ggml.add_bos_token", &sp.add_bos)) ||
        (e = gguf_flag(g, "tokenizer.ggml.add_space_prefix", &sp.add_space_prefix)))
        return e;

    struct ob_tok_str *tk = malloc((n ? n : 1) * sizeof *tk);
    int32_t *ty = types ? malloc((n ? n : 1) * sizeof *ty) : NULL;
    float *sc = scores ? malloc((n ? n : 1) * sizeof *sc) : NULL;
    struct ob_tok_str *mg = merges ? malloc((merges->arr.n + 1) * sizeof *mg) : NULL;
    if (!tk || (types && !ty) || (scores && !sc) || (merges && !mg)) {
        e = ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
        goto out;
    }
    for (uint64_t i = 0; i < n; i++) {
        tk[i] = (struct ob_tok_str){toks->arr.elems[i].str.ptr, toks->arr.elems[i].str.len};
        if (ty) {
            int64_t x = ob_gguf_arr_i(types, i);
            ty[i] = x >= INT32_MIN && x <= INT32_MAX ? (int32_t)x : OB_TOK_NORMAL;
        }
        if (sc)
            sc[i] = (float)ob_gguf_arr_f(scores, i);
    }
    if (merges)
        for (uint64_t i = 0; i < merges->arr.n; i++)
            mg[i] = (struct ob_tok_str){merges->arr.elems[i].str.ptr,
                                        merges->arr.elems[i].str.len};
    sp.n_vocab = (uint32_t)n;
    sp.tokens = tk;
    sp.types = ty;
    sp.scores = sc;
    sp.n_merges = merges ? (uint32_t)merges->arr.n : 0;
    sp.merges = mg;
    e = ob_tok_new(&sp, out);
out:
    free(tk);
    free(ty);
    free(sc);
    free(mg);
    return e;
}

/* ---- encoding ------------------------------------------------------------------------------ */

struct sym {
    uint32_t start, len;           /* bytes of the piece (gpt2) or of the escaped text (llama);
                                      len 0: merged into the symbol on its left */
    int32_t prev, next;            /* neighbours, -1 at the ends */
    int32_t id;                    /* gpt2: the symbol's token (-1: its byte has none) */
};

/*
 * A candidate merge, ordered by `key` (smallest first):
 *   gpt2   key = rank << 32 | left index; a, b = the left and right token ids it expects
 *   llama  key = (descending score) << 32 | left index; a = right index, b = merged length
 */
struct cand {
    uint64_t key;
    int32_t a, b;
};

/* llama: what sentencepiece calls rev_merge — for each merged text that is an UNUSED piece,
 * where the pair that last proposed it was split, so the piece can be taken apart again */
struct rslot {
    uint32_t start, len, left_len; /* len 0: empty */
};

struct enc {
    const struct ob_tok *t;
    int32_t *ids;
    size_t n, cap;
    struct sym *sym;
    size_t sym_cap;
    struct cand *heap;
    size_t heap_n, heap_cap;
    char *buf;                     /* llama: the escaped text; gpt2: a piece in the alphabet */
    size_t buf_cap;
    struct rslot *rev;
    uint32_t rev_mask, rev_n;
    uint32_t *stack;               /* llama resegmentation work list */
    size_t stack_cap;
    pcre2_match_data *md;
};

/* room for need elements of an encoder's array (sb.h): 0, or OB_ENOMEM */
#define GROW(ptr, cap, need) \
    (OB_GROW(ptr, cap, need) ? 0 : ob_seterr(OB_ENOMEM, "tokenizer: out of memory"))

static int emit(struct enc *e, int32_t id)
{
    if (e->n == e->cap && GROW(e->ids, e->cap, e->n + 1))
        return OB_ENOMEM;
    e->ids[e->n++] = id;
    return 0;
}

static int heap_push(struct enc *e, uint64_t key, int32_t a, int32_t b)
{
    if (e->heap_n == e->heap_cap && GROW(e->heap, e->heap_cap, e->heap_n + 1))
        return OB_ENOMEM;
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (e->heap[p].key <= key)
            break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = (struct cand){key, a, b};
    return 0;
}

static struct cand heap_pop(struct enc *e)
{
    struct cand top = e->heap[0], last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && e->heap[c + 1].key < e->heap[c].key)
            c++;
        if (e->heap[c].key >= last.key)
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n)
        e->heap[i] = last;
    return top;
}

/* ---- gpt2 ---- */

static int gpt2_push(struct enc *e, int32_t l)
{
    if (l < 0 || e->sym[l].next < 0)
        return 0;
    int32_t a = e->sym[l].id, b = e->sym[e->sym[l].next].id;
    if (a < 0 || b < 0)
        return 0;
    const struct mslot *m = merge_find(e->t, a, b);
    if (!m)
        return 0;
    return heap_push(e, (uint64_t)m->rank << 32 | (uint32_t)l, a, b);
}

/* BPE over one pre-tokenized piece. */
static int gpt2_piece(struct enc *e, const uint8_t *p, size_t n)
{
    const struct ob_tok *t = e->t;
    if (n > INT32_MAX)
        return ob_seterr(OB_ERANGE, "tokenizer: piece of %zu bytes is too long", n);
    if (t->ignore_merges && n > 1) {
        /* the whole piece spelled in the byte-level alphabet: one token if it is one */
        if (GROW(e->buf, e->buf_cap, 2 * n))
            return OB_ENOMEM;
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            k += put_utf8(e->buf + k, bytelevel_cp(p[i]));
        int32_t id = lookup(t, e->buf, k, F_BPE);
        if (id >= 0)
            return emit(e, id);
    }
    if (GROW(e->sym, e->sym_cap, n))
        return OB_ENOMEM;
    for (size_t i = 0; i < n; i++)
        e->sym[i] = (struct sym){(uint32_t)i, 1, (int32_t)i - 1,
                                 i + 1 < n ? (int32_t)i + 1 : -1, t->byte_tok[p[i]]};
    e->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (gpt2_push(e, (int32_t)i))
            return OB_ENOMEM;
    while (e->heap_n) {
        struct cand c = heap_pop(e);
        int32_t l = (int32_t)(uint32_t)c.key;
        struct sym *sl = &e->sym[l];
        if (!sl->len || sl->next < 0 || sl->id != c.a || e->sym[sl->next].id != c.b)
            continue;              /* stale: one of the two symbols changed */
        struct sym *sr = &e->sym[sl->next];
        sl->id = merge_find(t, c.a, c.b)->res;
        sl->len += sr->len;
        sr->len = 0;
        sl->next = sr->next;
        if (sr->next >= 0)
            e->sym[sr->next].prev = l;
        if (gpt2_push(e, sl->prev) || gpt2_push(e, l))
            return OB_ENOMEM;
    }
    /* A byte whose byte-level character is not in the vocabulary (SmolLM2 has no token for
     * 0xff, for instance) is dropped, as the `tokenizers` BPE model without an unk_token does;
     * tokenizer.ggml.unknown_token_id of a gpt2 vocabulary names a special token from the
     * model's configuration, not a BPE fallback, so it is not emitted here. */
    for (int32_t i = 0; i >= 0; i = e->sym[i].next)
        if (e->sym[i].id >= 0 && emit(e, e->sym[i].id))
            return OB_ENOMEM;
    return 0;
}

/* Apply pre-tokenizer regex `level` to a piece, recursing into every match and gap. */
static int pre_split(struct enc *e, int level, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (level == e->t->n_re)
        return gpt2_piece(e, (const uint8_t *)s, n);
    const pcre2_code *re = e->t->re[level];
    size_t pos = 0, gap = 0;
    uint32_t opts = 0;
    while (pos < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, opts, e->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !(opts & PCRE2_NO_JIT)) {
            opts |= PCRE2_NO_JIT;  /* same matches from the interpreter, which uses the heap */
            continue;
        }
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ob_seterr(OB_EINTERNAL, "tokenizer: pre-tokenizer regex at byte %zu: %s",
                             pos, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) {            /* no pattern here matches empty; be safe anyway */
            pos = ms + 1;
            continue;
        }
        int err;
        if (ms > gap && (err = pre_split(e, level + 1, s + gap, ms - gap)))
            return err;            /* bytes no alternative matched (invalid UTF-8) */
        if ((err = pre_split(e, level + 1, s + ms, me - ms)))
            return err;
        pos = gap = me;
    }
    return pre_split(e, level + 1, s + gap, n - gap);
}

/* ---- llama (SentencePiece) ---- */

static uint32_t score_order(float f)
{
    /* float -> unsigned with the same order; -0 counts as 0; descending for the heap */
    uint32_t u;
    if (f == 0.0f)
        f = 0.0f;
    memcpy(&u, &f, 4);
    u = (u & 0x80000000u) ? ~u : u | 0x80000000u;
    return ~u;
}

static int rev_put(struct enc *e, uint32_t start, uint32_t len, uint32_t left_len)
{
    if (2 * (e->rev_n + 1) > e->rev_mask + 1 || !e->rev) {
        /* grow and rehash */
        uint32_t old = e->rev ? e->rev_mask + 1 : 0, size = old ? 2 * old : 64;
        struct rslot *nr = calloc(size, sizeof *nr), *or = e->rev;
        if (!nr)
            return ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
        e->rev = nr;
        e->rev_mask = size - 1;
        e->rev_n = 0;
        for (uint32_t i = 0; i < old; i++)
            if (or[i].len)
                rev_put(e, or[i].start, or[i].len, or[i].left_len);
        free(or);
    }
    uint32_t i = (uint32_t)hash_bytes(e->buf + start, len) & e->rev_mask;
    for (;; i = (i + 1) & e->rev_mask) {
        struct rslot *r = &e->rev[i];
        if (!r->len) {
            *r = (struct rslot){start, len, left_len};
            e->rev_n++;
            return 0;
        }
        if (r->len == len && !memcmp(e->buf + r->start, e->buf + start, len)) {
            *r = (struct rslot){start, len, left_len};     /* the last proposal wins */
            return 0;
        }
    }
}

static const struct rslot *rev_get(const struct enc *e, uint32_t start, uint32_t len)
{
    if (!e->rev)
        return NULL;
    for (uint32_t i = (uint32_t)hash_bytes(e->buf + start, len) & e->rev_mask;;
         i = (i + 1) & e->rev_mask) {
        const struct rslot *r = &e->rev[i];
        if (!r->len)
            return NULL;
        if (r->len == len && !memcmp(e->buf + r->start, e->buf + start, len))
            return r;
    }
}

static int spm_push(struct enc *e, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return 0;
    const struct sym *sl = &e->sym[l], *sr = &e->sym[r];
    uint32_t len = sl->len + sr->len;
    int32_t id = lookup(e->t, e->buf + sl->start, len, F_SPM);
    if (id < 0)
        return 0;
    const struct tokinfo *ti = &e->t->info[id];
    if (ti->type == OB_TOK_UNUSED && rev_put(e, sl->start, len, sl->len))
        return OB_ENOMEM;
    return heap_push(e, (uint64_t)score_order(ti->score) << 32 | (uint32_t)l, r, (int32_t)len);
}

/* Output for one final symbol: its piece, an UNUSED piece taken apart again, or bytes. */
static int spm_emit(struct enc *e, uint32_t start, uint32_t len)
{
    const struct ob_tok *t = e->t;
    size_t sp = 0;
    /* explicit stack of (start, len), right half pushed first so the left comes out first */
    if (GROW(e->stack, e->stack_cap, 2))
        return OB_ENOMEM;
    e->stack[sp++] = start;
    e->stack[sp++] = len;
    while (sp) {
        len = e->stack[--sp];
        start = e->stack[--sp];
        int32_t id = lookup(t, e->buf + start, len, F_SPM);
        const struct rslot *r;
        if (id >= 0 && t->info[id].type == OB_TOK_UNUSED &&
            (r = rev_get(e, start, len)) != NULL) {
            if (GROW(e->stack, e->stack_cap, sp + 4))
                return OB_ENOMEM;
            e->stack[sp++] = start + r->left_len;
            e->stack[sp++] = len - r->left_len;
            e->stack[sp++] = start;
            e->stack[sp++] = r->left_len;
            continue;
        }
        if (id >= 0) {
            if (emit(e, id))
                return OB_ENOMEM;
        } else if (t->has_byte_tok) {
            for (uint32_t k = 0; k < len; k++) {
                int32_t b = t->byte_tok[(uint8_t)e->buf[start + k]];
                if (b < 0)
                    b = t->unk;
                if (b >= 0 && emit(e, b))
                    return OB_ENOMEM;
            }
        } else if (t->unk >= 0 && emit(e, t->unk)) {
            return OB_ENOMEM;
        }
    }
    return 0;
}

/* Longest text of a trie at s[0..n): its token (the lowest id with that text), or -1; *mlen
 * gets its length. */
static int32_t trie_match(const struct tnode *trie, const uint8_t *s, size_t n, size_t *mlen)
{
    int32_t best = -1;
    uint32_t node = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t ch = trie[node].child;
        while (ch && trie[ch].byte != s[k])
            ch = trie[ch].sibling;
        if (!ch)
            break;
        node = ch;
        if (trie[node].id >= 0) {
            best = trie[node].id;
            *mlen = k + 1;
        }
    }
    return best;
}

/* BPE by score over the escaped text e->buf[b0, b1) */
static int spm_bpe(struct enc *e, size_t b0, size_t b1)
{
    if (GROW(e->sym, e->sym_cap, b1 - b0))
        return OB_ENOMEM;
    size_t ns = 0;
    for (size_t i = b0; i < b1;) {
        uint32_t cp;
        size_t l = utf8_seq((const uint8_t *)e->buf + i, b1 - i, &cp);
        if (!l)
            l = 1;                 /* an invalid byte is a symbol of its own */
        e->sym[ns] = (struct sym){(uint32_t)i, (uint32_t)l, (int32_t)ns - 1, (int32_t)ns + 1, -1};
        ns++;
        i += l;
    }
    if (!ns)
        return 0;
    e->sym[ns - 1].next = -1;
    e->heap_n = 0;
    if (e->rev) {
        memset(e->rev, 0, ((size_t)e->rev_mask + 1) * sizeof *e->rev);
        e->rev_n = 0;
    }
    for (size_t i = 1; i < ns; i++)
        if (spm_push(e, (int32_t)i - 1, (int32_t)i))
            return OB_ENOMEM;
    while (e->heap_n) {
        struct cand c = heap_pop(e);
        int32_t l = (int32_t)(uint32_t)c.key, r = c.a;
        struct sym *sl = &e->sym[l], *sr = &e->sym[r];
        if (!sl->len || !sr->len || sl->len + sr->len != (uint32_t)c.b)
            continue;              /* stale */
        sl->len += sr->len;
        sr->len = 0;
        sl->next = sr->next;
        if (sr->next >= 0)
            e->sym[sr->next].prev = l;
        if (spm_push(e, sl->prev, l) || spm_push(e, l, sl->next))
            return OB_ENOMEM;
    }
    for (int32_t i = 0; i >= 0; i = e->sym[i].next)
        if (spm_emit(e, e->sym[i].start, e->sym[i].len))
            return OB_ENOMEM;
    return 0;
}

static int spm_text(struct enc *e, const char *s, size_t n, bool prefix)
{
    /* escape: optional leading space, then every ' ' as U+2581 (3 bytes) */
    if (n > (INT32_MAX - 3) / 3)
        return ob_seterr(OB_ERANGE, "tokenizer: text of %zu bytes is too long", n);
    if (GROW(e->buf, e->buf_cap, 3 * (n + 1)))
        return OB_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n + prefix; i++) {
        char c = prefix ? (i ? s[i - 1] : ' ') : s[i];
        if (c == ' ') {
            memcpy(e->buf + k, "\xe2\x96\x81", 3);
            k += 3;
        } else {
            e->buf[k++] = c;
        }
    }
    const struct tnode *ud = e->t->udtrie;
    if (!ud)
        return spm_bpe(e, 0, k);
    /* user-defined pieces, leftmost then longest, tried at every character (sentencepiece's
     * PrefixMatch); BPE on the stretches between them */
    size_t seg = 0;
    for (size_t i = 0; i < k;) {
        size_t ml = 0;
        int32_t id = trie_match(ud, (const uint8_t *)e->buf + i, k - i, &ml);
        if (id < 0) {
            uint32_t cp;
            size_t l = utf8_seq((const uint8_t *)e->buf + i, k - i, &cp);
            i += l ? l : 1;
            continue;
        }
        if (spm_bpe(e, seg, i) || emit(e, id))
            return OB_ENOMEM;
        seg = i = i + ml;
    }
    return spm_bpe(e, seg, k);
}

/* ---- driver ---- */

static int encode_text(struct enc *e, const char *s, size_t n, bool after_special)
{
    if (e->t->kind == KIND_SPM)
        return spm_text(e, s, n, e->t->add_space_prefix && after_special);
    return pre_split(e, 0, s, n);
}

int ob_tok_encode(const struct ob_tok *t, const char *text, size_t len, bool parse_special,
                  int32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (!text && len)
        return ob_seterr(OB_EUSAGE, "tokenizer: NULL text");
    struct enc e = {.t = t};
    int err = 0;
    if (t->n_re && !(e.md = pcre2_match_data_create(1, NULL)))
        return ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
    /* The text is cut at special tokens (leftmost, then longest); each stretch between them
     * is tokenized on its own. "after_special": at the start, or right after a special token
     * (where llama vocabularies put their space prefix). */
    size_t frag = 0;
    bool after_special = true;
    if (parse_special && t->has_special) {
        for (size_t i = 0; i < len; i++) {
            size_t ml = 0;
            int32_t id = trie_match(t->trie, (const uint8_t *)text + i, len - i, &ml);
            if (id < 0)
                continue;
            if (i > frag) {
                if ((err = encode_text(&e, text + frag, i - frag, after_special)))
                    goto out;
            }
            if ((err = emit(&e, id)))
                goto out;
            after_special = true;
            frag = i + ml;
            i = frag - 1;
        }
    }
    if (len > frag)
        err = encode_text(&e, text + frag, len - frag, after_special);
out:
    free(e.sym);
    free(e.heap);
    free(e.buf);
    free(e.rev);
    free(e.stack);
    pcre2_match_data_free(e.md);
    if (!err && !e.ids && !(e.ids = malloc(sizeof *e.ids)))
        err = ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
    if (err) {
        free(e.ids);
        return err;
    }
    *ids = e.ids;
    *n = e.n;
    return 0;
}

/* ---- decoding and accessors ---------------------------------------------------------------- */

static int bad_id(const struct ob_tok *t, int32_t id)
{
    return ob_seterr(OB_ERANGE, "tokenizer: token id %d is outside the vocabulary [0, %u)", id,
                     t->n_vocab);
}

int ob_tok_piece(const struct ob_tok *t, int32_t id, const char **bytes, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->n_vocab)
        return bad_id(t, id);
    *bytes = t->pieces + t->info[id].poff;
    *len = t->info[id].plen;
    return 0;
}

int ob_tok_text(const struct ob_tok *t, int32_t id, const char **text, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->n_vocab)
        return bad_id(t, id);
    *text = t->texts + t->info[id].off;
    *len = t->info[id].len;
    return 0;
}

int ob_tok_decode(const struct ob_tok *t, const int32_t *ids, size_t n, char **out, size_t *len)
{
    size_t total = 0;
    *out = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= t->n_vocab)
            return ob_errprefix(bad_id(t, ids[i]), "at position %zu", i);
        total += t->info[ids[i]].plen;
    }
    char *s = malloc(total + 1), *p = s;
    if (!s)
        return ob_seterr(OB_ENOMEM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        const struct tokinfo *ti = &t->info[ids[i]];
        memcpy(p, t->pieces + ti->poff, ti->plen);
        p += ti->plen;
    }
    *p = 0;
    *out = s;
    *len = total;
    return 0;
}

uint32_t ob_tok_n_vocab(const struct ob_tok *t) { return t->n_vocab; }
const char *ob_tok_model(const struct ob_tok *t) { return t->model; }
const char *ob_tok_pre(const struct ob_tok *t) { return t->pre; }
int32_t ob_tok_bos(const struct ob_tok *t) { return t->bos; }
int32_t ob_tok_eos(const struct ob_tok *t) { return t->eos; }
int32_t ob_tok_unk(const struct ob_tok *t) { return t->unk; }
int32_t ob_tok_pad(const struct ob_tok *t) { return t->pad; }
bool ob_tok_add_bos(const struct ob_tok *t) { return t->add_bos; }
bool ob_tok_add_space_prefix(const struct ob_tok *t) { return t->add_space_prefix; }

int ob_tok_type(const struct ob_tok *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->n_vocab ? t->info[id].type : -1;
}

bool ob_tok_is_special(const struct ob_tok *t, int32_t id)
{
    int ty = ob_tok_type(t, id);
    return ty == OB_TOK_CONTROL || ty == OB_TOK_USER_DEFINED;
}

int32_t ob_tok_find(const struct ob_tok *t, const char *text, size_t len)
{
    if (!text && len)
        return -1;
    return lookup(t, text ? text : "", len, 0);
}

int32_t ob_tok_find_piece(const struct ob_tok *t, const char *bytes, size_t len)
{
    if (!bytes || !len)
        return -1;
    return piece_lookup(t, bytes, len, hash_bytes(bytes, len));
}
