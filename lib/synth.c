/*
 * synth.c — synthetic models: seeded random weights in the exact tensor layout, metadata and
 * tokenizer of a real architecture, so that every loader (1b's, llama.cpp's, the gguf Python
 * package) accepts them. Speed depends on shapes, not on weight values, so a synthetic model
 * with real shapes is a fair benchmark subject; tiny ones make fast unit tests.
 *
 * Weights are generated row by row at write time (the GGUF writer's fill callback), so even
 * the Qwen3-0.6B preset never sits in memory at once. Values come from a counter-based
 * generator keyed by (seed, tensor index, element index) and use only integer arithmetic and
 * exact float operations, so the same seed writes the same bytes on every machine.
 *
 * Vocabularies:
 *   qwen2/qwen3: the real Qwen3 byte-level BPE vocabulary and merges read from a HF
 *     tokenizer.json (added tokens become CONTROL or USER_DEFINED; ids up to n_vocab that the
 *     tokenizer does not define become "[PADn]" UNUSED tokens, as in released Qwen GGUFs). With
 *     a smaller n_vocab the vocabulary is cut: the first ordinary tokens by id, the merges
 *     among them, then the added tokens renumbered after them.
 *   llama: a generated SentencePiece-style vocabulary (<unk> <s> </s>, 256 byte tokens, then
 *     "▁"-prefixed English words and all their prefixes, scored by rank), enough to tokenise
 *     any text with byte fallback; its last two ids are the CONTROL tokens <|im_start|> and
 *     <|im_end|> of its ChatML chat template (the format of llama-architecture chat models
 *     such as SmolLM2; Llama 2's and 3's formats are ones 1b does not render).
 *   gemma3: the same generated vocabulary laid out as Gemma's (<pad> <eos> <bos> <unk>, the
 *     CONTROL tokens <start_of_turn> and <end_of_turn>, USER_DEFINED newline and space runs
 *     and a tab, then the byte tokens and words), no space prefix, no chat template (1b uses
 *     its built-in Gemma 3 turn format, as for the real GGUF); the sliding window and its
 *     layer pattern are written as attention.sliding_window(_pattern).
 *
 * Chat templates: qwen2/qwen3 take the one in the tokenizer_config.json beside tokenizer.json
 * (Qwen3's real template), else ChatML when the vocabulary has its two tokens; llama ChatML;
 * gemma3 none. no_chat_template writes none at all (a model whose messages 1b refuses).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "sb.h"
#include "quant.h"
#include "strmap.h"

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

/* ---- presets ------------------------------------------------------------------------------ */

static const struct ob_synth presets[] = {
    {.preset = "qwen3-tiny", .arch = "qwen3", .n_vocab = 151936, .n_embd = 64, .n_layer = 2,
     .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 128, .n_ctx = 4096,
     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .mix = "f32"},
    {.preset = "qwen3-small", .arch = "qwen3", .n_vocab = 151936, .n_embd = 256, .n_layer = 2,
     .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_ff = 512, .n_ctx = 4096,
     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .mix = "q8_0"},
    {.preset = "qwen2-tiny", .arch = "qwen2", .n_vocab = 151936, .n_embd = 64, .n_layer = 2,
     .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 128, .n_ctx = 4096,
     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = false, .mix = "f32"},
    {.preset = "llama-tiny", .arch = "llama", .n_vocab = 1024, .n_embd = 64, .n_layer = 2,
     .n_head = 4, .n_head_kv = 2, .head_dim = 16, .n_ff = 160, .n_ctx = 2048,
     .rope_base = 10000.0f, .rms_eps = 1e-5f, .tied = false, .mix = "f32"},
    {.preset = "qwen3-0.6b", .arch = "qwen3", .n_vocab = 151936, .n_embd = 1024, .n_layer = 28,
     .n_head = 16, .n_head_kv = 8, .head_dim = 128, .n_ff = 3072, .n_ctx = 40960,
     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .mix = "q8_0"},
    /* Gemma 3 shapes: heads wider than n_embd / n_head, one kv head; a window of 16 keys so
     * that short requests cross it, layers 0 and 1 local, 2 global */
    {.preset = "gemma3-tiny", .arch = "gemma3", .n_vocab = 1024, .n_embd = 256, .n_layer = 3,
     .n_head = 4, .n_head_kv = 1, .head_dim = 128, .n_ff = 512, .n_ctx = 2048,
     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .mix = "q8_0", .n_swa = 16,
     .swa_pattern = 3},
    {.preset = "gemma3-270m", .arch = "gemma3", .n_vocab = 262144, .n_embd = 640, .n_layer = 18,
     .n_head = 4, .n_head_kv = 1, .head_dim = 256, .n_ff = 2048, .n_ctx = 32768,
     .rope_base = 1000000.0f, .rms_eps = 1e-6f, .tied = true, .mix = "q8_0", .n_swa = 512,
     .swa_pattern = 6},
};

int ob_synth_preset(const char *name, struct ob_synth *out)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].preset, name) == 0) {
            *out = presets[i];
            out->seed = 1;
            return 0;
        }
    return ob_seterr(OB_EUSAGE, "unknown preset '%s' (%s)", name, ob_synth_preset_names());
}

const char *ob_synth_preset_names(void)
{
    return "qwen3-tiny, qwen3-small, qwen2-tiny, llama-tiny, qwen3-0.6b, gemma3-tiny, gemma3-270m";
}

/* ---- deterministic random numbers ---------------------------------------------------------- */

static uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Approximately standard normal: the sum of four uniforms on [-1, 1) has variance 4/3; every
 * step is exact or correctly rounded, so the value is the same on every machine. */
static float gauss(uint64_t key, uint64_t i)
{
    uint64_t r = mix64(key ^ mix64(i));
    float s = 0.0f;
    for (int k = 0; k < 4; k++) {
        int32_t u = (int32_t)((r >> (16 * k)) & 0xffff) - 32768;   /* [-32768, 32767] */
        s += (float)u * (1.0f / 32768.0f);
    }
    return s * 0.8660254f;                                          /* sqrt(3/4) */
}

/* ---- vocabulary ---------------------------------------------------------------------------- */

/* ChatML without a default system message (family "chatml", lib/chat.h): each message
 * "<|im_start|>ROLE\nCONTENT<|im_end|>\n", then the generation prompt "<|im_start|>assistant\n" */
static const char chatml_template[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

struct vocab {
    uint64_t n;
    char **tok;
    int32_t *type;
    float *score;                  /* llama only */
    uint64_t n_merges;
    char **merges;
    int64_t bos, eos, pad, unk;
    char *chat_template;
};

static void vocab_free(struct vocab *v)
{
    for (uint64_t i = 0; i < v->n; i++)
        free(v->tok ? v->tok[i] : NULL);
    for (uint64_t i = 0; i < v->n_merges; i++)
        free(v->merges[i]);
    free(v->tok);
    free(v->type);
    free(v->score);
    free(v->merges);
    free(v->chat_template);
    memset(v, 0, sizeof *v);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f;
    if (ob_open_input(path, &f))                 /* missing, unreadable, a directory */
        return NULL;
    struct ob_sb b = {0};
    char chunk[1 << 16];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
        ob_sb_add(&b, chunk, k);
    bool err = ferror(f);
    if (f != stdin)
        fclose(f);
    if (err || b.oom) {
        ob_sb_free(&b);
        ob_seterr(err ? OB_EIO : OB_ENOMEM, "%s: %s", path, err ? "read error" : "out of memory");
        return NULL;
    }
    return ob_sb_take(&b, len);
}

/* The chat template from tokenizer_config.json beside tokenizer.json, if there is one. */
static char *sibling_template(const char *tokenizer_json)
{
    const char *slash = strrchr(tokenizer_json, '/');
    char *p = NULL;
    if (asprintf(&p, "%.*stokenizer_config.json", slash ? (int)(slash - tokenizer_json + 1) : 0,
                 tokenizer_json) < 0)
        return NULL;
    size_t len;
    char *txt = read_file(p, &len);
    free(p);
    if (!txt)
        return NULL;
    cJSON *j = NULL;
    ob_json_parse(txt, len, 0, &j);        /* not JSON, or cut short: no template */
    free(txt);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    char *s = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(j);
    return s;
}

static bool has_token(const struct vocab *v, const char *t)
{
    for (uint64_t i = 0; i < v->n; i++)
        if (v->tok[i] && strcmp(v->tok[i], t) == 0)
            return true;
    return false;
}

static int bpe_vocab(const char *path, uint64_t n_vocab, struct vocab *v)
{
    size_t len;
    char *txt = read_file(path, &len);
    if (!txt)
        return ob_errprefix(OB_EUSAGE, "tokenizer");
    cJSON *j = NULL;
    int pe = ob_json_parse(txt, len, 0, &j);
    free(txt);
    if (pe)
        return ob_errprefix(pe, "%s", path);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *vj = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *aj = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
    struct ob_strmap *ids = NULL;
    int e = 0;
    if (!cJSON_IsObject(vj) || !cJSON_IsArray(mj)) {
        e = ob_seterr(OB_EFORMAT, "%s: not a BPE tokenizer.json (model.vocab, model.merges)", path);
        goto out;
    }
    /* ordinary tokens by id */
    uint64_t n_base = 0, n_added = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vj) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= 1e7) {
            e = ob_seterr(OB_EFORMAT, "%s: bad id for token '%s'", path, it->string);
            goto out;
        }
        if ((uint64_t)it->valuedouble + 1 > n_base)
            n_base = (uint64_t)it->valuedouble + 1;
    }
    cJSON_ArrayForEach(it, aj) n_added++;
    uint64_t full = n_base;
    cJSON_ArrayForEach(it, aj) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (cJSON_IsNumber(id) && (uint64_t)id->valuedouble + 1 > full)
            full = (uint64_t)id->valuedouble + 1;
    }
    bool cut = n_vocab < full;
    if (cut && n_vocab < 256 + n_added) {
        e = ob_seterr(OB_EUSAGE, "vocab %llu is too small for a byte-level BPE with %llu added "
                      "tokens", (unsigned long long)n_vocab, (unsigned long long)n_added);
        goto out;
    }
    uint64_t keep = cut ? n_vocab - n_added : n_base;   /* ordinary ids kept: [0, keep) */
    v->n = n_vocab;
    v->tok = calloc(n_vocab, sizeof *v->tok);
    v->type = calloc(n_vocab, sizeof *v->type);
    if (!v->tok || !v->type) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    cJSON_ArrayForEach(it, vj) {
        uint64_t id = (uint64_t)it->valuedouble;
        if (id >= keep)
            continue;
        if (v->tok[id]) {
            e = ob_seterr(OB_EFORMAT, "%s: id %llu used twice", path, (unsigned long long)id);
            goto out;
        }
        v->tok[id] = strdup(it->string);
        v->type[id] = TT_NORMAL;
    }
    /* added tokens: at their own ids, or renumbered after the kept ones when cut */
    uint64_t next = keep;
    v->bos = v->eos = v->pad = v->unk = -1;
    cJSON_ArrayForEach(it, aj) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "special");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(c)) {
            e = ob_seterr(OB_EFORMAT, "%s: bad entry in added_tokens", path);
            goto out;
        }
        uint64_t at = cut ? next++ : (uint64_t)id->valuedouble;
        if (at >= n_vocab) {
            e = ob_seterr(OB_EUSAGE, "vocab %llu is smaller than the tokenizer's added token id "
                          "%llu", (unsigned long long)n_vocab, (unsigned long long)at);
            goto out;
        }
        free(v->tok[at]);
        v->tok[at] = strdup(c->valuestring);
        v->type[at] = cJSON_IsTrue(sp) ? TT_CONTROL : TT_USER;
        if (strcmp(c->valuestring, "<|endoftext|>") == 0)
            v->bos = v->pad = (int64_t)at;
        if (strcmp(c->valuestring, "<|im_end|>") == 0)
            v->eos = (int64_t)at;
    }
    for (uint64_t i = 0; i < n_vocab; i++)
        if (!v->tok[i]) {
            if (asprintf(&v->tok[i], "[PAD%llu]", (unsigned long long)i) < 0)
                v->tok[i] = NULL;
            v->type[i] = TT_UNUSED;
        }
    for (uint64_t i = 0; i < n_vocab; i++)
        if (!v->tok[i]) {
            e = ob_seterr(OB_ENOMEM, "out of memory");
            goto out;
        }
    if (v->eos < 0)
        v->eos = v->bos;

    /* merges, as "left right" strings; when cut, only those among kept tokens */
    uint64_t nm = (uint64_t)cJSON_GetArraySize(mj);
    if (cut) {
        if (!(ids = ob_strmap_new(keep))) {
            e = ob_seterr(OB_ENOMEM, "out of memory");
            goto out;
        }
        for (uint64_t i = 0; i < keep; i++)
            if (v->type[i] == TT_NORMAL && ob_strmap_put(ids, v->tok[i], strlen(v->tok[i]),
                                                         (int64_t)i, false) < 0) {
                e = ob_seterr(OB_ENOMEM, "out of memory");
                goto out;
            }
    }
    v->merges = calloc(nm ? nm : 1, sizeof *v->merges);
    if (!v->merges) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    cJSON_ArrayForEach(it, mj) {
        const char *a, *b;
        char *m = NULL;
        if (cJSON_IsString(it)) {
            m = strdup(it->valuestring);
            char *sp = m ? strchr(m, ' ') : NULL;
            if (!sp) {
                free(m);
                e = ob_seterr(OB_EFORMAT, "%s: merge '%s' has no space", path, it->valuestring);
                goto out;
            }
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring;
            b = cJSON_GetArrayItem(it, 1)->valuestring;
            if (asprintf(&m, "%s %s", a, b) < 0)
                m = NULL;
        } else {
            e = ob_seterr(OB_EFORMAT, "%s: merge %llu is neither \"a b\" nor [a, b]", path,
                          (unsigned long long)v->n_merges);
            goto out;
        }
        if (!m) {
            e = ob_seterr(OB_ENOMEM, "out of memory");
            goto out;
        }
        if (cut) {
            /* keep the merge only if both sides and their join are kept tokens */
            char *sp = strchr(m, ' ');
            *sp = 0;
            char *joined = NULL;
            if (asprintf(&joined, "%s%s", m, sp + 1) < 0)
                joined = NULL;
            bool kept = joined && ob_strmap_get(ids, m, strlen(m), NULL) &&
                        ob_strmap_get(ids, sp + 1, strlen(sp + 1), NULL) &&
                        ob_strmap_get(ids, joined, strlen(joined), NULL);
            free(joined);
            *sp = ' ';
            if (!kept) {
                free(m);
                continue;
            }
        }
        v->merges[v->n_merges++] = m;
    }
    v->chat_template = sibling_template(path);
out:
    ob_strmap_free(ids);
    cJSON_Delete(j);
    return e;
}

/* A SentencePiece-style vocabulary: words and every prefix of them, best score first. */
static const char *const words[] = {
    "the", "and", "was", "to", "a", "he", "she", "they", "it", "of", "in", "that", "with", "his",
    "her", "said", "day", "one", "time", "once", "upon", "there", "little", "girl", "boy",
    "named", "lily", "tim", "ben", "mom", "dad", "play", "happy", "saw", "big", "friend", "but",
    "for", "on", "you", "not", "had", "so", "were", "very", "went", "wanted", "what", "when",
    "this", "is", "are", "be", "have", "all", "can", "we", "up", "out", "do", "go", "see", "an",
    "at", "as", "by", "from", "or", "if", "no", "my", "me", "him", "them", "their", "about",
    "would", "could", "like", "just", "how", "why", "sky", "blue", "sun", "tree", "dog", "cat",
    "ball", "park", "home", "house", "water", "red", "good", "new", "man", "woman", "world",
    "look", "come", "make", "know", "think", "take", "help", "every", "some", "story", "end",
};

static int spm_vocab(uint64_t n_vocab, bool gemma, struct vocab *v)
{
    /* gather candidate pieces: single characters, "▁"+char, words and their prefixes */
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                ".,!?'\"-:;()";
    const char *sp = "\xe2\x96\x81";      /* U+2581 */
    size_t cap = 4096, n = 0;
    char **cand = calloc(cap, sizeof *cand);
    if (!cand)
        return ob_seterr(OB_ENOMEM, "out of memory");
    cand[n++] = strdup(sp);
    for (const char *c = chars; *c; c++) {
        if (asprintf(&cand[n++], "%s%c", sp, *c) < 0 || asprintf(&cand[n++], "%c", *c) < 0)
            return ob_seterr(OB_ENOMEM, "out of memory");
    }
    for (size_t w = 0; w < sizeof words / sizeof words[0] && n + 64 < cap; w++) {
        size_t L = strlen(words[w]);
        for (size_t k = 2; k <= L; k++) {
            if (asprintf(&cand[n++], "%s%.*s", sp, (int)k, words[w]) < 0 ||
                asprintf(&cand[n++], "%.*s", (int)k, words[w] + L - k) < 0)
                return ob_seterr(OB_ENOMEM, "out of memory");
        }
    }
    /* the tokens before the byte tokens: llama's three, or Gemma's layout */
    static const struct { const char *t; int32_t type; } llama_head[] = {
        {"<unk>", TT_UNKNOWN}, {"<s>", TT_CONTROL}, {"</s>", TT_CONTROL},
    }, gemma_head[] = {
        {"<pad>", TT_CONTROL}, {"<eos>", TT_CONTROL}, {"<bos>", TT_CONTROL},
        {"<unk>", TT_UNKNOWN}, {"<start_of_turn>", TT_CONTROL}, {"<end_of_turn>", TT_CONTROL},
        {"\n", TT_USER}, {"\n\n", TT_USER}, {"\n\n\n", TT_USER}, {"  ", TT_USER},
        {"   ", TT_USER}, {"    ", TT_USER}, {"\t", TT_USER},
    };
    size_t nh = gemma ? sizeof gemma_head / sizeof *gemma_head : 3;
    /* llama: ChatML's two tokens take the last ids, so that the others keep theirs */
    static const char *const llama_tail[] = {"<|im_start|>", "<|im_end|>"};
    size_t nt = gemma ? 0 : sizeof llama_tail / sizeof *llama_tail;
    uint64_t base = nh + 256;
    if (n_vocab < base + nt)
        return ob_seterr(OB_EUSAGE, "a %s vocabulary needs at least %llu tokens",
                         gemma ? "gemma3" : "llama", (unsigned long long)(base + nt));
    v->n = n_vocab;
    v->tok = calloc(n_vocab, sizeof *v->tok);
    v->type = calloc(n_vocab, sizeof *v->type);
    v->score = calloc(n_vocab, sizeof *v->score);
    if (!v->tok || !v->type || !v->score)
        return ob_seterr(OB_ENOMEM, "out of memory");
    for (size_t i = 0; i < nh; i++) {
        v->tok[i] = strdup(gemma ? gemma_head[i].t : llama_head[i].t);
        v->type[i] = gemma ? gemma_head[i].type : llama_head[i].type;
        v->score[i] = gemma ? -1000.0f : 0.0f;
    }
    for (int b = 0; b < 256; b++) {
        if (asprintf(&v->tok[nh + b], "<0x%02X>", b) < 0)
            return ob_seterr(OB_ENOMEM, "out of memory");
        v->type[nh + b] = TT_BYTE;
    }
    uint64_t id = base, end = n_vocab - nt;
    for (size_t i = 0; i < n && id < end; i++) {
        bool dup = false;
        for (uint64_t k = base; k < id && !dup; k++)
            dup = strcmp(v->tok[k], cand[i]) == 0;
        if (dup)
            continue;
        v->tok[id] = strdup(cand[i]);
        v->type[id] = TT_NORMAL;
        v->score[id] = -(float)(id - base);
        id++;
    }
    for (; id < end; id++) {
        if (asprintf(&v->tok[id], "<unused%llu>", (unsigned long long)id) < 0)
            return ob_seterr(OB_ENOMEM, "out of memory");
        v->type[id] = TT_UNUSED;
        v->score[id] = -1e9f;
    }
    for (size_t i = 0; i < nt; i++, id++) {
        v->tok[id] = strdup(llama_tail[i]);
        v->type[id] = TT_CONTROL;
        v->score[id] = 0.0f;
    }
    if (nt && !(v->chat_template = strdup(chatml_template)))
        return ob_seterr(OB_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        free(cand[i]);
    free(cand);
    for (uint64_t i = 0; i < n_vocab; i++)
        if (!v->tok[i])
            return ob_seterr(OB_ENOMEM, "out of memory");
    v->unk = gemma ? 3 : 0;
    v->bos = gemma ? 2 : 1;
    v->eos = gemma ? 1 : 2;
    v->pad = gemma ? 0 : -1;
    return 0;
}

/* ---- tensors ------------------------------------------------------------------------------- */

struct tgen {
    uint64_t key;                  /* seed ⊕ tensor index */
    uint64_t ne0, ne1;
    uint32_t type;
    float scale;                   /* standard deviation of the values */
    float offset;                  /* added to every value (1 for norm weights) */
};

struct synth_ctx {
    struct tgen *t;
    float *row;
};

static int fill_tensor(void *ctx, uint64_t index, void *buf, uint64_t nbytes)
{
    struct synth_ctx *c = ctx;
    const struct tgen *g = &c->t[index];
    uint64_t rb;
    ob_type_row_bytes(g->type, g->ne0, &rb);
    for (uint64_t r = 0; r < g->ne1; r++) {
        for (uint64_t i = 0; i < g->ne0; i++)
            c->row[i] = g->offset + g->scale * gauss(g->key, r * g->ne0 + i);
        int e = ob_quant_row(g->type, c->row, (uint8_t *)buf + r * rb, (int64_t)g->ne0);
        if (e)
            return e;
    }
    (void)nbytes;
    return 0;
}

struct spec {
    char name[64];
    const char *role;              /* token_embd, attn_q, ..., norm, bias, output */
    uint32_t layer;
    uint64_t ne0, ne1;
};

/* layer < 0: a tensor outside the blocks */
static void add_spec(struct spec *sp, size_t *n, const char *name, int layer, const char *role,
                     uint64_t ne0, uint64_t ne1)
{
    struct spec *p = &sp[(*n)++];
    if (layer >= 0)
        snprintf(p->name, sizeof p->name, "blk.%d.%s", layer, name);
    else
        snprintf(p->name, sizeof p->name, "%s", name);
    p->role = role;
    p->layer = layer >= 0 ? (uint32_t)layer : 0;
    p->ne0 = ne0;
    p->ne1 = ne1;
}

int ob_synth_write(const struct ob_synth *s, const char *path)
{
    int e = 0;
    bool qwen = strcmp(s->arch, "qwen3") == 0 || strcmp(s->arch, "qwen2") == 0;
    bool gemma = strcmp(s->arch, "gemma3") == 0;
    bool llama = strcmp(s->arch, "llama") == 0 || gemma;   /* a SentencePiece vocabulary */
    if (!qwen && !llama)
        return ob_seterr(OB_EUSAGE, "synthetic models exist for qwen3, qwen2, llama and gemma3, "
                         "not '%s'", s->arch);
    if (!s->n_vocab || !s->n_embd || !s->n_layer || !s->n_head || !s->n_head_kv ||
        !s->head_dim || !s->n_ff || s->n_head % s->n_head_kv || s->head_dim % 2)
        return ob_seterr(OB_EUSAGE, "inconsistent shape (heads %u/%u, head_dim %u)", s->n_head,
                         s->n_head_kv, s->head_dim);
    if (!ob_mix_known(s->mix))
        return ob_seterr(OB_EUSAGE, "weight type '%s' cannot be written (use one of: %s)", s->mix,
                         ob_mix_names());
    if (qwen && !s->tokenizer)
        return ob_seterr(OB_EUSAGE, "%s needs the Qwen tokenizer.json (--tokenizer FILE)", s->arch);

    struct vocab v = {0};
    struct ob_gguf_writer *w = NULL;
    struct synth_ctx ctx = {0};
    size_t cap_t = 16 + 16 * (size_t)s->n_layer, nt = 0;
    if ((e = qwen ? bpe_vocab(s->tokenizer, s->n_vocab, &v) : spm_vocab(s->n_vocab, gemma, &v)))
        goto out;
    if (qwen && !v.chat_template && has_token(&v, "<|im_start|>") && has_token(&v, "<|im_end|>") &&
        !(v.chat_template = strdup(chatml_template))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    if (s->no_chat_template) {
        free(v.chat_template);
        v.chat_template = NULL;
    }
    ctx.t = calloc(cap_t, sizeof *ctx.t);
    uint64_t maxrow = s->n_embd > s->n_ff ? s->n_embd : s->n_ff;
    if ((uint64_t)s->n_head * s->head_dim > maxrow)
        maxrow = (uint64_t)s->n_head * s->head_dim;
    ctx.row = malloc(maxrow * sizeof(float));
    if (!ctx.t || !ctx.row || (e = ob_gguf_writer_new(&w))) {
        e = e ? e : ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }

    /* metadata */
    const char *ar = s->arch;
    char k[128];
#define SETU32(key, val) (snprintf(k, sizeof k, "%s." key, ar), ob_gguf_writer_set_u32(w, k, (val)))
#define SETF32(key, val) (snprintf(k, sizeof k, "%s." key, ar), ob_gguf_writer_set_f32(w, k, (val)))
    char name[96];
    snprintf(name, sizeof name, "1b synthetic %s (seed %llu)", s->preset ? s->preset : ar,
             (unsigned long long)s->seed);
    if ((e = ob_gguf_writer_set_str(w, "general.architecture", ar)) ||
        (e = ob_gguf_writer_set_str(w, "general.name", name)) ||
        (e = ob_gguf_writer_set_str(w, "general.type", "model")) ||
        (e = ob_gguf_writer_set_u32(w, "general.quantization_version", 2)) ||
        (e = ob_gguf_writer_set_u32(w, "general.alignment", 32)) ||
        (e = SETU32("context_length", s->n_ctx)) || (e = SETU32("embedding_length", s->n_embd)) ||
        (e = SETU32("block_count", s->n_layer)) || (e = SETU32("feed_forward_length", s->n_ff)) ||
        (e = SETU32("attention.head_count", s->n_head)) ||
        (e = SETU32("attention.head_count_kv", s->n_head_kv)) ||
        (e = SETU32("attention.key_length", s->head_dim)) ||
        (e = SETU32("attention.value_length", s->head_dim)) ||
        (e = SETU32("rope.dimension_count", s->head_dim)) ||
        (e = SETU32("vocab_size", s->n_vocab)) ||
        (e = SETF32("rope.freq_base", s->rope_base)) ||
        (e = SETF32("attention.layer_norm_rms_epsilon", s->rms_eps)) ||
        (gemma && s->n_swa && ((e = SETU32("attention.sliding_window", s->n_swa)) ||
                               (e = SETU32("attention.sliding_window_pattern", s->swa_pattern)))))
        goto out;
#undef SETU32
#undef SETF32
    if ((e = ob_gguf_writer_set_str(w, "tokenizer.ggml.model", qwen ? "gpt2" : "llama")) ||
        (qwen && (e = ob_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2"))) ||
        (e = ob_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", v.n,
                                        (const char *const *)v.tok, NULL)) ||
        (e = ob_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", OB_GGUF_I32, v.n, v.type)) ||
        (v.score && (e = ob_gguf_writer_set_arr(w, "tokenizer.ggml.scores", OB_GGUF_F32, v.n,
                                                v.score))) ||
        (qwen && (e = ob_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", v.n_merges,
                                                 (const char *const *)v.merges, NULL))) ||
        (v.bos >= 0 && (e = ob_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v.bos))) ||
        (v.eos >= 0 && (e = ob_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v.eos))) ||
        (v.pad >= 0 && (e = ob_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v.pad))) ||
        (v.unk >= 0 && (e = ob_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)v.unk))) ||
        (e = ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", !qwen)) ||
        (llama && (e = ob_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", !gemma))) ||
        (v.chat_template &&
         (e = ob_gguf_writer_set_str(w, "tokenizer.chat_template", v.chat_template))))
        goto out;

    /* tensors, in the order converters write them */
    const uint64_t E = s->n_embd, V = s->n_vocab, F = s->n_ff;
    const uint64_t Q = (uint64_t)s->n_head * s->head_dim, KV = (uint64_t)s->n_head_kv * s->head_dim;
    struct spec *sp = calloc(cap_t, sizeof *sp);
    if (!sp) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    add_spec(sp, &nt, "token_embd.weight", -1, "token_embd", E, V);
    for (uint32_t l = 0; l < s->n_layer; l++) {
        int L = (int)l;
        add_spec(sp, &nt, "attn_norm.weight", L, "norm", E, 1);
        add_spec(sp, &nt, "attn_q.weight", L, "attn_q", E, Q);
        add_spec(sp, &nt, "attn_k.weight", L, "attn_k", E, KV);
        add_spec(sp, &nt, "attn_v.weight", L, "attn_v", E, KV);
        if (strcmp(ar, "qwen2") == 0) {
            add_spec(sp, &nt, "attn_q.bias", L, "bias", Q, 1);
            add_spec(sp, &nt, "attn_k.bias", L, "bias", KV, 1);
            add_spec(sp, &nt, "attn_v.bias", L, "bias", KV, 1);
        }
        add_spec(sp, &nt, "attn_output.weight", L, "attn_output", Q, E);
        if (strcmp(ar, "qwen3") == 0 || gemma) {
            add_spec(sp, &nt, "attn_q_norm.weight", L, "norm", s->head_dim, 1);
            add_spec(sp, &nt, "attn_k_norm.weight", L, "norm", s->head_dim, 1);
        }
        if (gemma)
            add_spec(sp, &nt, "post_attention_norm.weight", L, "post_norm", E, 1);
        add_spec(sp, &nt, "ffn_norm.weight", L, "norm", E, 1);
        add_spec(sp, &nt, "ffn_gate.weight", L, "ffn_gate", E, F);
        add_spec(sp, &nt, "ffn_up.weight", L, "ffn_up", E, F);
        add_spec(sp, &nt, "ffn_down.weight", L, "ffn_down", F, E);
        if (gemma)
            add_spec(sp, &nt, "post_ffw_norm.weight", L, "post_norm", E, 1);
    }
    add_spec(sp, &nt, "output_norm.weight", -1, "norm", E, 1);
    if (!s->tied)
        add_spec(sp, &nt, "output.weight", -1, "output", E, V);
    for (size_t i = 0; i < nt; i++) {
        struct tgen *g = &ctx.t[i];
        bool vec = sp[i].ne1 == 1;
        g->key = mix64(s->seed * 0x100000001b3ull + i);
        g->ne0 = sp[i].ne0;
        g->ne1 = sp[i].ne1;
        /* the mix's type (quant.c, shared with 1b-requant); vectors (norm weights, biases)
         * stay f32 like in released models */
        struct ob_mix_tensor mq = {sp[i].name, vec ? 1 : 2, g->ne0, s->n_layer, s->tied};
        if ((e = ob_mix_type(s->mix, &mq, &g->type)))
            break;
        /* Standard deviations: matrices 1/sqrt(fan_in), so unit-variance inputs give
         * unit-variance outputs; norm weights 1 +- 0.1; biases +-0.1. The output projection
         * (or the tied embedding) gets 2/sqrt(n_embd): after the final RMSNorm the logits then
         * have a standard deviation near 2, a softmax that is neither flat nor one-hot.
         * Gemma's post norms 3 +- 0.3: the embedding enters the residual stream scaled by
         * sqrt(n_embd), and with unit post norms it would outweigh the blocks and the tied
         * output would mostly repeat the input token. */
        float r = 1.0f;
        while (r * r < (float)g->ne0)     /* r = ceil(sqrt(ne0)) without libm */
            r += 1.0f;
        g->scale = 1.0f / r;
        g->offset = 0.0f;
        if (vec) {
            bool norm = strcmp(sp[i].role, "norm") == 0;
            bool post = strcmp(sp[i].role, "post_norm") == 0;
            g->scale = post ? 0.3f : 0.1f;
            g->offset = post ? 3.0f : norm ? 1.0f : 0.0f;
        } else if (strcmp(sp[i].role, "output") == 0 ||
                   (strcmp(sp[i].role, "token_embd") == 0 && s->tied)) {
            g->scale = 2.0f / r;
        } else if (strcmp(sp[i].role, "token_embd") == 0) {
            g->scale = 1.0f;
        }
        uint64_t ne[2] = {g->ne0, g->ne1};
        if ((e = ob_gguf_writer_add_tensor(w, sp[i].name, g->type, vec ? 1 : 2, ne, NULL,
                                           fill_tensor, &ctx)))
            break;
    }
    free(sp);
    if (!e)
        e = ob_gguf_writer_write(w, path);
out:
    ob_gguf_writer_free(w);
    free(ctx.t);
    free(ctx.row);
    vocab_free(&v);
    return e;
}
