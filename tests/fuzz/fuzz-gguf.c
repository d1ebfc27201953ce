/*
 * fuzz-gguf.c — libFuzzer harness for the GGUF reader: parse a buffer, then touch everything a
 * command would touch (every metadata value as JSON, every tensor's bytes, typed getters), read
 * the hyper-parameters and their checks as 1b-load does, and decode the first row of every
 * tensor with the kernels' block layouts, so that UBSan sees a tensor the reader let through
 * misaligned (general.alignment = 1 once did). Then the file's tokenizer is built as every
 * command builds it (ob_tok_from_gguf: the token strings, merges, types, scores and special
 * ids of the metadata), a few texts are encoded and decoded with it, and a conversation is
 * rendered and tokenized with the file's chat template. Any out-of-bounds read, misaligned
 * load, leak or crash is a bug in lib/gguf.c, lib/hparams.c, lib/tok.c or lib/chat.c; so is
 * an id outside the vocabulary, or a failure without a known code.
 *
 * The same bytes also go through ob_gguf_scan as archive extraction (lib/archive.c) calls it on
 * a member still being written: whole, and cut at every length up to 64 bytes and then at the
 * doubling lengths extraction scans at (scan_prefixes says what must hold).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "chat.h"
#include "model.h"
#include "quant.h"
#include "tok.h"

static void known(int e)
{
    if (e != OB_EFORMAT && e != OB_EUNSUPP && e != OB_ERANGE && e != OB_ENOTFOUND &&
        e != OB_EUSAGE && e != OB_ENOMEM)
        abort();
}

static void ids_in(const struct ob_tok *tok, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= ob_tok_n_vocab(tok))
            abort();
}

/* what a command does with the file's tokenizer and chat template */
static void tokenizer(const struct ob_gguf *g)
{
    struct ob_tok *tok;
    int e = ob_tok_from_gguf(g, &tok);
    if (getenv("OB_FUZZ_GGUF_VERBOSE"))
        fprintf(stderr, "%s\n", e ? ob_errmsg() : "tokenizer: built");
    if (e) {
        known(e);
        return;
    }
    static const char *const texts[] = {
        "Hello, world! 123 <|im_start|>user\n<s></s><0x41> \xe2\x96\x81x\n\n  \t",
        "caf\xc3\xa9 \xf0\x9f\x98\x80 \xff\xfe don't I'll",
        ""};
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++)
        for (int special = 0; special < 2; special++) {
            int32_t *ids;
            size_t n;
            if ((e = ob_tok_encode(tok, texts[t], strlen(texts[t]), special, &ids, &n))) {
                known(e);
                continue;
            }
            ids_in(tok, ids, n);
            char *out;
            size_t len;
            if (ob_tok_decode(tok, ids, n, &out, &len))
                abort();                     /* ids of its own encoding decode */
            free(out);
            free(ids);
        }
    int32_t all[3] = {ob_tok_bos(tok), ob_tok_eos(tok), ob_tok_unk(tok)};
    for (int i = 0; i < 3; i++)
        if (all[i] >= (int64_t)ob_tok_n_vocab(tok))
            abort();
    char *tmpl = NULL;
    if (ob_gguf_get_str(g, "tokenizer.chat_template", &tmpl) == 0) {
        struct ob_chat_msg m[3] = {{"system", "Be brief.", NULL}, {"user", "Hi <think>", NULL},
                                   {"assistant", "<think>r</think>a", NULL}};
        int32_t *ids, stops[OB_CHAT_MAX_STOPS];
        size_t n;
        e = ob_chat_tokenize(tok, tmpl, m, 2, NULL, &ids, &n);
        if (getenv("OB_FUZZ_GGUF_VERBOSE"))
            fprintf(stderr, "chat: %s\n", e ? ob_errmsg() : "tokenized");
        if (e == 0) {
            ids_in(tok, ids, n);
            free(ids);
        } else {
            known(e);
        }
        if ((e = ob_chat_stops(tok, tmpl, stops, &n)) == 0)
            ids_in(tok, stops, n);
        else
            known(e);
        free(tmpl);
    }
    ob_tok_free(tok);
}

/* ob_gguf_scan of the first n bytes, from a buffer of exactly n (ASan sees a read past them) */
static int scan_n(const uint8_t *data, size_t n, uint64_t *min, uint64_t *max, bool *more)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        abort();
    memcpy(p, data, n);
    int e = ob_gguf_scan(p, n, min, max, more);
    free(p);
    if (e)
        known(e);
    return e;
}

/*
 * What extraction relies on, which reads a member's header as the member grows and stops at
 * the size the header gives:
 *  - a file the reader opens scans, and its tensors end within it (min <= size; bytes after
 *    max the reader takes and extraction refuses);
 *  - a prefix that scans holds the whole header: it gives the whole input's sizes;
 *  - a prefix refused outright (*more false) is refused outright whole: a refusal that more
 *    bytes could lift must say so, or extraction would refuse a file it accepts whole.
 */
static void scan_prefixes(const uint8_t *data, size_t size, bool opened)
{
    uint64_t min = 0, max = 0, a, z;
    bool more = false, m;
    int e = scan_n(data, size, &min, &max, &more);
    if (getenv("OB_FUZZ_GGUF_VERBOSE"))
        fprintf(stderr, "scan: %s\n", e ? ob_errmsg() : "sized");
    if ((opened && (e || min > size)) || (!e && min > max))
        abort();
    for (size_t n = 0; n < size; n = n < 64 ? n + 1 : 2 * n) {
        int en = scan_n(data, n, &a, &z, &m);
        if ((!en && (e || a != min || z != max)) || (en && !m && (!e || more)))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ob_gguf *g;
    /* copy so that ASan sees reads past the end of exactly `size` bytes */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    bool opened = ob_gguf_open_mem(buf, size, &g) == 0;
    scan_prefixes(data, size, opened);
    if (opened) {
        volatile uint64_t sink = 0;
        for (uint64_t i = 0; i < ob_gguf_n_kv(g); i++) {
            const struct ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
            cJSON *j = ob_gguf_value_json(&kv->val);
            char *s = j ? cJSON_PrintUnformatted(j) : NULL;
            if (s)
                sink += strlen(s);
            free(s);
            cJSON_Delete(j);
            if (ob_gguf_get(g, kv->key) != &kv->val)
                abort();
            uint64_t u;
            char *str;
            if (ob_gguf_get_u64(g, kv->key, &u) == 0)
                sink += u;
            if (ob_gguf_get_str(g, kv->key, &str) == 0)
                free(str);
        }
        for (uint64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
            const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
            const uint8_t *p = t->data;
            for (uint64_t k = 0; k < t->nbytes; k += 61)
                sink += p[k];
            if (t->nbytes)
                sink += p[t->nbytes - 1];
            if (ob_gguf_tensor(g, t->name) != t)
                abort();
            /* the reader promises each tensor aligned to its blocks (malloc'd buf: 16) */
            uint32_t bs = ob_type_size(t->type), align = bs & -bs;
            if ((uintptr_t)p % (align > 8 ? 8 : align))
                abort();
            if (ob_dequant_supported(t->type) && t->ne[0] <= 4096) {
                float row[4096];
                ob_dequant_row(t->type, p, row, (int64_t)t->ne[0]);
            }
        }
        struct ob_hparams hp;
        ob_hparams_read(g, &hp);
        tokenizer(g);
        (void)sink;
        ob_gguf_close(g);
    }
    free(buf);
    return 0;
}
