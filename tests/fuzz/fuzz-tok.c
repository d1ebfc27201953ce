/*
 * fuzz-tok.c — libFuzzer harness for the tokenizer (lib/tok.c). Model files are not at hand
 * when fuzzing, so the tokenizers are built from small vocabularies written here: byte-level
 * BPE (all 256 byte tokens, a few merges, special tokens, one of which is a prefix of another)
 * under the qwen2, smollm and llama3 pre-tokenizers, and a SentencePiece vocabulary with byte
 * fallback and an UNUSED piece.
 *
 * Input: byte 0 picks the tokenizer (bits 1-2) and parse_special (bit 0); the rest is the
 * text. Every encoding must decode back to the text (SentencePiece: with its space prefix and
 * U+2581 read as a space); anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "tok.h"
#include "../unit/bytelevel.h"

#define MAXV 600

static struct ob_tok *toks[4];


struct vocab {
    struct ob_tok_str t[MAXV];
    int32_t ty[MAXV];
    float sc[MAXV];
    struct ob_tok_str m[64];
    char pool[16384];
    size_t used;
    uint32_t n, nm;
};

static const char *keep(struct vocab *v, const char *s, size_t n)
{
    char *p = v->pool + v->used;
    memcpy(p, s, n);
    v->used += n;
    return p;
}

static void add(struct vocab *v, const char *s, size_t n, int type, float score)
{
    v->t[v->n] = (struct ob_tok_str){keep(v, s, n), n};
    v->ty[v->n] = type;
    v->sc[v->n++] = score;
}

static void build(void)
{
    static struct vocab v;
    /* byte-level BPE: merges written with "_" for the byte-level space "Ġ" */
    static const char *merges[] = {"_ t", "h e", "i n", "_t he", "e r", "a n", "_ _", "__ __",
                                   "1 2", "12 3", "' s", "_ a", "a a", "aa aa", "< |", "| >"};
    memset(&v, 0, sizeof v);
    for (unsigned b = 0; b < 256; b++) {
        char c[2];
        add(&v, c, bl_char(b, c), OB_TOK_NORMAL, 0);
    }
    for (size_t i = 0; i < sizeof merges / sizeof *merges; i++) {
        char m[32], r[32];
        size_t k = 0, rk = 0;
        for (const char *p = merges[i]; *p; p++) {
            if (*p == '_') {
                memcpy(m + k, "\xc4\xa0", 2), k += 2;
                memcpy(r + rk, "\xc4\xa0", 2), rk += 2;
            } else {
                m[k++] = *p;
                if (*p != ' ')
                    r[rk++] = *p;
            }
        }
        v.m[v.nm++] = (struct ob_tok_str){keep(&v, m, k), k};
        add(&v, r, rk, OB_TOK_NORMAL, 0);
    }
    static const char *special[] = {"<|im_start|>", "<|im_end|>", "<|im", "<think>", "</think>"};
    for (size_t i = 0; i < 5; i++)
        add(&v, special[i], strlen(special[i]), i < 3 ? OB_TOK_CONTROL : OB_TOK_USER_DEFINED, 0);
    static const char *pres[] = {"qwen2", "smollm", "llama3"};
    for (int p = 0; p < 3; p++) {
        struct ob_tok_spec sp = {.model = "gpt2", .pre = pres[p], .n_vocab = v.n, .tokens = v.t,
                                 .types = v.ty, .n_merges = v.nm, .merges = v.m, .bos = -1,
                                 .eos = -1, .unk = -1, .pad = -1, .add_bos = -1,
                                 .add_space_prefix = -1};
        if (ob_tok_new(&sp, &toks[p]))
            abort();
    }

    /* SentencePiece */
    memset(&v, 0, sizeof v);
    add(&v, "<unk>", 5, OB_TOK_UNKNOWN, 0);
    add(&v, "<s>", 3, OB_TOK_CONTROL, 0);
    add(&v, "</s>", 4, OB_TOK_CONTROL, 0);
    for (unsigned b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        add(&v, s, 6, OB_TOK_BYTE, 0);
    }
    static const char *pieces[] = {"\xe2\x96\x81", "t", "h", "e", "a", "n", "\xe2\x96\x81t", "he",
                                   "\xe2\x96\x81the", "an", "\xe2\x96\x81\xe2\x96\x81", "z", "q",
                                   "zzq", "1", "2", "12", "<", ">", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof pieces / sizeof *pieces; i++)
        add(&v, pieces[i], strlen(pieces[i]), OB_TOK_NORMAL, -(float)i);
    add(&v, "zz", 2, OB_TOK_UNUSED, 0);
    add(&v, "<me>", 4, OB_TOK_USER_DEFINED, 0);
    struct ob_tok_spec sp = {.model = "llama", .n_vocab = v.n, .tokens = v.t, .types = v.ty,
                             .scores = v.sc, .bos = 1, .eos = 2, .unk = 0, .pad = -1,
                             .add_bos = -1, .add_space_prefix = -1};
    if (ob_tok_new(&sp, &toks[3]))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!toks[0])
        build();
    if (size == 0)
        return 0;
    const struct ob_tok *t = toks[(data[0] >> 1) & 3];
    bool special = data[0] & 1, spm = !strcmp(ob_tok_model(t), "llama");
    /* a copy of exactly the text, so that ASan sees any read past its end */
    size_t n = size - 1;
    char *text = malloc(n ? n : 1);
    if (!text)
        return 0;
    memcpy(text, data + 1, n);
    int32_t *ids;
    size_t k;
    if (ob_tok_encode(t, text, n, special, &ids, &k))
        abort();
    char *out;
    size_t ol;
    if (ob_tok_decode(t, ids, k, &out, &ol))
        abort();
    for (size_t i = 0; i < k; i++) {
        const char *p;
        size_t pl;
        if (ob_tok_piece(t, ids[i], &p, &pl))
            abort();
    }
    if (!spm) {
        if (ol != n || memcmp(out, text, n))
            abort();
    } else if (!special) {
        /* " " + text, with U+2581 read as a space; nothing at all for empty text */
        char *want = malloc(n + 2);
        size_t wl = 0;
        if (n)
            want[wl++] = ' ';
        for (size_t i = 0; i < n; i++) {
            if (i + 2 < n && !memcmp(text + i, "\xe2\x96\x81", 3)) {
                want[wl++] = ' ';
                i += 2;
            } else {
                want[wl++] = text[i];
            }
        }
        if (ol != wl || memcmp(out, want, wl))
            abort();
        free(want);
    }
    free(out);
    free(ids);
    free(text);
    return 0;
}
