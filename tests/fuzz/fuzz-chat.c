/*
 * fuzz-chat.c — libFuzzer harness for the chat templates (lib/chat.c). A template string comes
 * from a model file (GGUF tokenizer.chat_template), so it is untrusted input: chat.c scans its
 * Jinja tags, reads its string literals (Python's escapes) and recognises its family. The
 * messages come from requests.
 *
 * Input: byte 0 holds the options (bit 0 add_generation_prompt, bit 1 enable_thinking) and the
 * vocabulary (bits 2-3, below); then the template up to the first NUL; then messages, each a
 * role byte (bits 0-2: system, user, assistant, tool, "nobody"; bit 3: a reasoning_content
 * follows the content), the content up to a NUL, and the reasoning up to a NUL.
 *
 * Checked for every input (anything else aborts):
 *  - ob_chat_detect names one of its families; ob_chat_family gives qwen3, chatml or gemma,
 *    or fails with OB_EUNSUPP and a one-line message;
 *  - a template the family refuses renders nothing, tokenizes to nothing, and gives no stop
 *    tokens; one it accepts renders any conversation of system, user and assistant messages
 *    (gemma: alternating, else OB_EFORMAT), twice to the same bytes;
 *  - the token ids of a rendering decode to exactly its text, after the BOS when the
 *    vocabulary adds one; a vocabulary without the template's special tokens fails with
 *    OB_EFORMAT instead;
 *  - the stop tokens are 1 to OB_CHAT_MAX_STOPS distinct ids, the first the turn's end token.
 * Every failure is a known OB_E* code with a message of one line.
 *
 * With OB_FUZZ_CHAT_VERBOSE set, one line per input on stderr says what happened (family,
 * rendered bytes, ids), so that tests/t4210 can see that real templates got rendered.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "chat.h"
#include "tok.h"
#include "../unit/bytelevel.h"

#define MAX_MSGS 32

/* 0: ChatML and Gemma specials, no BOS; 1: the same with a BOS that is added;
 * 2: the 256 byte tokens alone (every special token missing) */
static struct ob_tok *toks[3];

static const char *const specials[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>",
                                       "</think>", "<start_of_turn>", "<end_of_turn>", "<bos>"};
#define N_SPECIAL (sizeof specials / sizeof *specials)

static struct ob_tok *make(int which)
{
    /* each vocabulary's own arrays, kept for the tokenizer's life */
    static struct ob_tok_str ts[3][256 + N_SPECIAL];
    static int32_t tys[3][256 + N_SPECIAL];
    static char pools[3][512];
    struct ob_tok_str *t = ts[which];
    int32_t *ty = tys[which];
    uint32_t n = bl_byte_tokens(t, ty, pools[which]);
    int32_t eos = -1, bos = -1;
    for (size_t i = 0; which < 2 && i < N_SPECIAL; i++) {
        if (i == N_SPECIAL - 1 && which == 0)
            break;                               /* <bos> only in vocabulary 1 */
        if (!strcmp(specials[i], "<|endoftext|>"))
            eos = (int32_t)n;
        if (!strcmp(specials[i], "<bos>"))
            bos = (int32_t)n;
        t[n] = (struct ob_tok_str){specials[i], strlen(specials[i])};
        ty[n++] = i == 3 || i == 4 ? OB_TOK_USER_DEFINED : OB_TOK_CONTROL;
    }
    struct ob_tok_spec sp = {.model = "gpt2", .pre = "qwen2", .n_vocab = n, .tokens = t,
                             .types = ty, .bos = bos, .eos = eos, .unk = -1, .pad = -1,
                             .add_bos = which == 1 ? 1 : 0, .add_space_prefix = -1};
    struct ob_tok *tok;
    if (ob_tok_new(&sp, &tok))
        abort();
    return tok;
}

static void fail(const char *what, const char *tmpl)
{
    fprintf(stderr, "fuzz-chat: %s (template: %.200s)\n", what, tmpl);
    abort();
}

/* a failure: a known code and a message of one line */
static void known(int e, const char *tmpl)
{
    static const int codes[] = {OB_EUSAGE, OB_EUNSUPP, OB_EFORMAT, OB_ENOMEM};
    bool k = false;
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
        k |= e == codes[i];
    const char *m = ob_errmsg();
    if (!k || !m || !*m || strchr(m, '\n'))
        fail("a failure without a known code and a one-line message", tmpl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!toks[0])
        for (int i = 0; i < 3; i++)
            toks[i] = make(i);
    if (size < 1)
        return 0;
    /* a NUL-terminated copy, so that ASan sees a read past any field */
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    struct ob_chat_opts o = {.add_generation_prompt = buf[0] & 1, .enable_thinking = buf[0] & 2};
    const struct ob_tok *tok = toks[((unsigned char)buf[0] >> 2 & 3) % 3];
    const char *tmpl = buf + 1;
    /* end: the input's end (buf[size], the NUL added, is no role byte); a field that runs to
     * it ends there, and one that starts past it is empty */
    char *p = buf + 1 + strlen(tmpl) + 1, *end = buf + size;

    static const char *const roles[] = {"system", "user", "assistant", "tool", "nobody"};
    struct ob_chat_msg m[MAX_MSGS];
    size_t n = 0;
    bool plain_roles = true;                 /* system, user and assistant only */
    while (p < end && n < MAX_MSGS) {
        unsigned r = (unsigned char)*p++;
        m[n].role = roles[(r & 7) % 5];
        plain_roles &= (r & 7) % 5 < 3;
        m[n].content = p <= end ? p : "";
        p += p <= end ? strlen(p) + 1 : 0;
        m[n].reasoning_content = NULL;
        if (r & 8) {
            m[n].reasoning_content = p <= end ? p : "";
            p += p <= end ? strlen(p) + 1 : 0;
        }
        n++;
    }

    static const char *const names[] = {"none", "qwen3", "chatml-think", "chatml", "llama3",
                                        "gemma", "phi3", "llama2", "unknown"};
    const char *det = ob_chat_detect(tmpl);
    bool named = false;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        named |= !strcmp(det, names[i]);
    if (!named)
        fail("ob_chat_detect gave no family name", tmpl);

    const char *fam = NULL;
    int fe = ob_chat_family(tmpl, &fam);
    if (fe) {
        known(fe, tmpl);
        if (fe != OB_EUNSUPP)
            fail("a refused template's code is not OB_EUNSUPP", tmpl);
    } else if (strcmp(fam, "qwen3") && strcmp(fam, "chatml") && strcmp(fam, "gemma")) {
        fail("ob_chat_family accepted a family it does not render", tmpl);
    }

    char *text = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    int re = ob_chat_render(tmpl, m, n, &o, &text, &len);
    if (re) {
        known(re, tmpl);
        if (!fe && n > 0 && plain_roles && (strcmp(fam, "gemma") || re != OB_EFORMAT) &&
            !(!strcmp(fam, "gemma") && re == OB_EUNSUPP && !strcmp(m[0].role, "system")))
            fail("an accepted template failed to render plain roles", tmpl);
    } else {
        if (fe)
            fail("a refused template rendered", tmpl);
        if (n == 0 || !plain_roles)
            fail("a conversation that should be refused rendered", tmpl);
        if (strlen(text) != len)
            fail("the length of a rendering is not its string's", tmpl);
        if (ob_chat_render(tmpl, m, n, &o, &again, &len2) || len2 != len ||
            memcmp(again, text, len))
            fail("two renderings differ", tmpl);
        free(again);
    }

    int32_t *ids = NULL;
    size_t n_ids = 0;
    int te = ob_chat_tokenize(tok, tmpl, m, n, &o, &ids, &n_ids);
    if (te) {
        known(te, tmpl);
        if (!re && !(tok == toks[2] && te == OB_EFORMAT))
            fail("a rendered conversation failed to tokenize", tmpl);
    } else {
        if (re)
            fail("a conversation that does not render tokenized", tmpl);
        size_t skip = ob_tok_add_bos(tok) && ob_tok_bos(tok) >= 0;
        if (skip && (n_ids < 1 || ids[0] != ob_tok_bos(tok)))
            fail("the BOS is missing", tmpl);
        char *dec;
        size_t dlen;
        if (ob_tok_decode(tok, ids + skip, n_ids - skip, &dec, &dlen))
            fail("the ids do not decode", tmpl);
        if (dlen != len || memcmp(dec, text, len))
            fail("the ids decode to another text than the rendering", tmpl);
        free(dec);
        free(ids);
    }

    int32_t stops[OB_CHAT_MAX_STOPS];
    size_t ns = 0;
    int se = ob_chat_stops(tok, tmpl, stops, &ns);
    if (se) {
        known(se, tmpl);
        if (!fe && !(tok == toks[2] && se == OB_EFORMAT))
            fail("an accepted template gave no stop tokens", tmpl);
    } else {
        if (fe && *tmpl)
            fail("a refused template gave stop tokens", tmpl);
        if (ns > OB_CHAT_MAX_STOPS || (*tmpl && ns < 1))
            fail("a wrong number of stop tokens", tmpl);
        for (size_t i = 0; i < ns; i++) {
            if (stops[i] < 0 || (uint32_t)stops[i] >= ob_tok_n_vocab(tok))
                fail("a stop token out of the vocabulary", tmpl);
            for (size_t j = 0; j < i; j++)
                if (stops[j] == stops[i])
                    fail("a stop token listed twice", tmpl);
        }
        if (*tmpl) {
            const char *want = !strcmp(fam, "gemma") ? "<end_of_turn>" : "<|im_end|>", *s;
            size_t sl;
            if (ob_tok_text(tok, stops[0], &s, &sl) || sl != strlen(want) || memcmp(s, want, sl))
                fail("the first stop token is not the turn's end", tmpl);
        }
    }

    if (getenv("OB_FUZZ_CHAT_VERBOSE"))
        fprintf(stderr, "detect=%s family=%s messages=%zu render=%s bytes=%zu tokenize=%s "
                "ids=%zu stops=%zu\n", det, fe ? "-" : fam, n, re ? ob_strerror(re) : "ok", len,
                te ? ob_strerror(te) : "ok", n_ids, ns);
    free(text);
    free(buf);
    return 0;
}
