/*
 * chat.c — chat templates, recognised by what they contain (1b has no Jinja engine: it knows
 * a few template families and renders them in C; anything else is reported by name). The
 * families and the token rule are described in chat.h.
 *
 * A rendering is built as a list of segments, each a byte range that is either a special token
 * the template writes (<|im_start|>, ...) or text (template text or message content). The
 * string is their concatenation; the token ids are the special tokens' ids with every maximal
 * run of text segments between them tokenized as one stretch, parse_special off.
 */
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "chat.h"
#include "sb.h"
#include "tok.h"

static bool has(const char *s, const char *needle)
{
    return strstr(s, needle) != NULL;
}

const char *ob_chat_detect(const char *t)
{
    if (!t || !*t)
        return "none";
    if (has(t, "<|im_start|>")) {
        /* Qwen3: ChatML whose assistant turns may carry a <think> block, switched by the
         * enable_thinking variable, with reasoning kept only after the last user query. A
         * ChatML template that handles <think> some other way (no enable_thinking switch, no
         * last-query rule) is a different family that 1b does not render. */
        if (has(t, "<think>")) {
            if (has(t, "enable_thinking") && has(t, "last_query_index") &&
                has(t, "reasoning_content"))
                return "qwen3";
            return "chatml-think";
        }
        return "chatml";
    }
    if (has(t, "<|start_header_id|>") && has(t, "<|eot_id|>"))
        return "llama3";
    if (has(t, "<start_of_turn>"))
        return "gemma";
    if (has(t, "<|user|>") && has(t, "<|end|>"))
        return "phi3";
    if (has(t, "[INST]"))
        return "llama2";
    return "unknown";
}

/* ---- template analysis ------------------------------------------------------------------ */

enum fam { FAM_CHATML, FAM_QWEN3, FAM_GEMMA };

struct tinfo {
    enum fam fam;
    const char *name;
    char *defsys;                  /* chatml: default system message, or NULL */
    bool sys_prefix;               /* gemma: a first system message prefixes the first turn
                                      (Gemma 3); false: system messages are refused (1, 2) */
};

/* A Jinja tag: the byte range [start, end) of "{{ ... }}", "{% ... %}" or "{# ... #}". */
struct tag {
    size_t start, end;
    char kind;                     /* '{', '%' or '#' */
    bool trim_left, trim_right;    /* "{{-" / "-}}" whitespace control */
};

/* Find the next tag at or after *pos; string literals inside expressions and statements may
 * hold "}}" or "%}", so quotes are followed. false when there is none or it is unterminated
 * (then *bad is set). */
static bool next_tag(const char *t, size_t len, size_t pos, struct tag *g, bool *bad)
{
    *bad = false;
    for (size_t i = pos; i + 1 < len; i++) {
        if (t[i] != '{' || (t[i + 1] != '{' && t[i + 1] != '%' && t[i + 1] != '#'))
            continue;
        char k = t[i + 1], close = k == '{' ? '}' : k;
        g->start = i;
        g->kind = k;
        g->trim_left = i + 2 < len && t[i + 2] == '-';
        char q = 0;
        for (size_t j = i + 2; j + 1 < len; j++) {
            if (k != '#') {
                if (q) {
                    if (t[j] == '\\')
                        j++;
                    else if (t[j] == q)
                        q = 0;
                    continue;
                }
                if (t[j] == '\'' || t[j] == '"') {
                    q = t[j];
                    continue;
                }
            }
            if (t[j] == close && t[j + 1] == '}') {
                g->end = j + 2;
                g->trim_right = t[j - 1] == '-' && j - 1 >= i + 2;
                return true;
            }
        }
        *bad = true;
        return false;
    }
    return false;
}

/* Append the UTF-8 encoding of code point cp. */
static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
           c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/*
 * Decode the string literal whose opening quote is at s[0] (Jinja reads literals with Python's
 * escapes): \n \t \r \\ \' \" \xNN \uNNNN \UNNNNNNNN; CR and CRLF become LF as Jinja
 * normalises newlines. Returns the decoded, NUL-terminated literal (malloc'd) and sets *used
 * to its length in the source, or NULL for an escape we do not read (*used still set).
 */
static char *literal(const char *s, size_t avail, size_t *used)
{
    char q = s[0];
    char *o = malloc(avail * 4 + 1);
    size_t n = 0, i = 1;
    bool ok = o != NULL;
    for (; i < avail && s[i] != q; i++) {
        char c = s[i];
        if (c == '\r') {
            if (i + 1 < avail && s[i + 1] == '\n')
                i++;
            c = '\n';
        }
        if (c != '\\') {
            if (o)
                o[n++] = c;
            continue;
        }
        if (++i >= avail)
            break;
        int digits = 0;
        switch (s[i]) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case '\\': case '\'': case '"': c = s[i]; break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: ok = false; c = s[i]; break;
        }
        if (!digits) {
            if (o)
                o[n++] = c;
            continue;
        }
        uint32_t cp = 0;
        for (int d = 0; d < digits; d++) {
            int v = i + 1 < avail ? hexval(s[i + 1]) : -1;
            if (v < 0) {
                ok = false;
                break;
            }
            cp = cp << 4 | (uint32_t)v;
            i++;
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
            ok = false;
        else if (o)
            n += put_utf8(o + n, cp);
    }
    *used = i + 1;
    if (!ok || i >= avail) {
        free(o);
        return NULL;
    }
    o[n] = 0;
    return o;
}

/*
 * Raw text between two tags (or the template's ends) must render as nothing: 1b writes only
 * what the expressions write. Whitespace is removed by Jinja when a neighbouring tag has a '-'
 * marker; with the trim_blocks and lstrip_blocks settings chat templates are rendered with,
 * "\n" and then spaces/tabs between two block tags vanish; one final newline of the template
 * is dropped (keep_trailing_newline off).
 */
static bool raw_renders_empty(const char *s, size_t n, const struct tag *left,
                              const struct tag *right)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return false;
    if (n == 0 || (left && left->trim_right) || (right && right->trim_left))
        return true;
    bool lblock = left && left->kind != '{', rblock = right && right->kind != '{';
    size_t i = 0;
    if (lblock && s[0] == '\n')                  /* trim_blocks */
        i = 1;
    else if (lblock && n >= 2 && s[0] == '\r' && s[1] == '\n')
        i = 2;
    if (i == n)
        return true;
    if (!right)                    /* the end of the template: one trailing newline */
        return n - i == 1 && s[i] == '\n';
    if (rblock && (i > 0 || !left)) {           /* lstrip_blocks: the rest starts a line */
        for (; i < n; i++)
            if (s[i] != ' ' && s[i] != '\t')
                return false;
        return true;
    }
    return false;
}

/*
 * The ChatML checks: text outside the tags, the generation-prompt literal, the default system
 * message, and constructs whose rendering the chatml family does not reproduce.
 */
static int chatml_analyse(const char *t, struct tinfo *ti)
{
    static const char *const refuse[] = {"bos_token", "trim", "strip(", "enable_thinking"};
    for (size_t k = 0; k < sizeof refuse / sizeof *refuse; k++)
        if (has(t, refuse[k]))
            return ob_seterr(OB_EUNSUPP, "chat template 'chatml' uses '%s', which 1b does not "
                             "render; send a plain prompt instead", refuse[k]);
    size_t len = strlen(t), pos = 0;
    struct tag prev, g;
    bool have_prev = false, bad, gen_prompt = false;
    for (;;) {
        bool found = next_tag(t, len, pos, &g, &bad);
        if (bad)
            return ob_seterr(OB_EUNSUPP, "chat template 'chatml': unterminated tag at byte %zu",
                             g.start);
        size_t raw_end = found ? g.start : len;
        if (!raw_renders_empty(t + pos, raw_end - pos, have_prev ? &prev : NULL,
                               found ? &g : NULL))
            return ob_seterr(OB_EUNSUPP, "chat template 'chatml' writes text outside its "
                             "expressions (byte %zu), which 1b does not render; send a plain "
                             "prompt instead", pos);
        if (!found)
            break;
        /* string literals of this tag */
        for (size_t i = g.start + 2; g.kind != '#' && i + 2 < g.end; i++) {
            if (t[i] != '\'' && t[i] != '"')
                continue;
            size_t used;
            char *lit = literal(t + i, g.end - 2 - i, &used);
            i += used - 1;
            if (!lit) {
                if (memmem(t + i - used + 1, used, "<|im_start|>", 12))
                    return ob_seterr(OB_EUNSUPP, "chat template 'chatml': cannot read the "
                                     "string literal at byte %zu", i - used + 1);
                continue;
            }
            if (has(lit, "<|im_start|>assistant\n"))
                gen_prompt = true;
            const char *sys = strstr(lit, "<|im_start|>system\n");
            const char *end = sys ? strstr(sys, "<|im_end|>") : NULL;
            if (end) {                 /* "" too: an empty system turn is still a turn */
                const char *txt = sys + 19;
                size_t n = (size_t)(end - txt);
                if (ti->defsys && (strlen(ti->defsys) != n || memcmp(ti->defsys, txt, n))) {
                    free(lit);
                    return ob_seterr(OB_EUNSUPP, "chat template 'chatml' holds two different "
                                     "default system messages; send a plain prompt instead");
                }
                if (!ti->defsys && !(ti->defsys = strndup(txt, n))) {
                    free(lit);
                    return ob_seterr(OB_ENOMEM, "out of memory");
                }
            }
            free(lit);
        }
        prev = g;
        have_prev = true;
        pos = g.end;
    }
    if (!gen_prompt)
        return ob_seterr(OB_EUNSUPP, "chat template 'chatml' has no \"<|im_start|>assistant\\n\" "
                         "generation prompt that 1b recognises; send a plain prompt instead");
    return 0;
}

/* A model without a template (and without a built-in one, ob_chat_builtin): its messages
 * are refused, since joining them somehow would be a guess at a format it was never trained
 * on. The words are the ones every command and 1b-serve show. */
static int no_template(void)
{
    return ob_seterr(OB_EUNSUPP, "the model has no chat template; send a plain prompt instead");
}

static int tinfo_read(const char *tmpl, struct tinfo *ti)
{
    *ti = (struct tinfo){0};
    const char *name = ob_chat_detect(tmpl);
    ti->name = name;
    if (!strcmp(name, "none"))
        return no_template();
    if (!strcmp(name, "qwen3")) {
        ti->fam = FAM_QWEN3;
        return 0;
    }
    if (!strcmp(name, "chatml")) {
        ti->fam = FAM_CHATML;
        int e = chatml_analyse(tmpl, ti);
        if (e) {
            free(ti->defsys);
            ti->defsys = NULL;
        }
        return e;
    }
    if (!strcmp(name, "gemma")) {
        /* Gemma 3 sets first_user_prefix from a system message; Gemma 1 and 2 raise
         * "System role not supported"; another variant is not guessed at */
        ti->fam = FAM_GEMMA;
        ti->sys_prefix = has(tmpl, "first_user_prefix");
        if (ti->sys_prefix || has(tmpl, "System role not supported"))
            return 0;
        return ob_seterr(OB_EUNSUPP, "chat template 'gemma' (a variant with neither Gemma 3's "
                         "first_user_prefix nor Gemma 2's system-role refusal) is not "
                         "supported; send a plain prompt instead");
    }
    return ob_seterr(OB_EUNSUPP, "chat template '%s' is not supported; send a plain prompt "
                     "instead", name);
}

int ob_chat_family(const char *tmpl, const char **family)
{
    struct tinfo ti;
    int e = tinfo_read(tmpl, &ti);
    free(ti.defsys);
    if (e)
        return e;
    *family = ti.name;
    return 0;
}

/*
 * The Gemma 3 turn format as a Jinja template, for gemma3 files without one (1b's own
 * wording: it renders what Google's Gemma 3 template renders for text messages, so that other
 * engines can be given it, e.g. llama-server --chat-template-file; tests/t4200-chat.sh renders
 * it with jinja2 next to Google's).
 */
static const char gemma3_template[] =
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = '' -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}\n"
    "    {%- endif -%}\n"
    "    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else '') }}\n"
    "    {{- message['content'] | trim }}\n"
    "    {{- '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{ '<start_of_turn>model\\n' }}\n"
    "{%- endif -%}\n";

const char *ob_chat_builtin(const char *arch)
{
    return arch && !strcmp(arch, "gemma3") ? gemma3_template : NULL;
}

/* ---- segments ------------------------------------------------------------------------------ */

struct seg {
    const char *p;
    size_t n;
    bool special;
};

struct segs {
    struct seg *v;
    size_t n, cap;
    bool oom;
};

static void put(struct segs *s, const char *p, size_t n, bool special)
{
    if (s->oom || (n == 0 && !special))
        return;
    if (!OB_GROW(s->v, s->cap, s->n + 1)) {
        s->oom = true;
        return;
    }
    s->v[s->n++] = (struct seg){p, n, special};
}

static void text(struct segs *s, const char *p)
{
    put(s, p, strlen(p), false);
}

static void spec(struct segs *s, const char *p)
{
    put(s, p, strlen(p), true);
}

/* A byte range of a message (a view; Python's str methods on it, applied to bytes: '\n' never
 * occurs inside a UTF-8 sequence, so the results are the same). */
struct view {
    const char *p;
    size_t n;
};

static struct view lstrip_nl(struct view v)
{
    while (v.n && v.p[0] == '\n')
        v.p++, v.n--;
    return v;
}

static struct view rstrip_nl(struct view v)
{
    while (v.n && v.p[v.n - 1] == '\n')
        v.n--;
    return v;
}

/* first / last occurrence of a NUL-terminated needle in a view, or NULL */
static const char *find_first(struct view v, const char *nd)
{
    return memmem(v.p, v.n, nd, strlen(nd));
}

/* the last occurrence of nd in v, given one of them (at) */
static const char *last_from(struct view v, const char *at, const char *nd)
{
    size_t k = strlen(nd);
    const char *q;
    while ((q = memmem(at + 1, v.n - (size_t)(at + 1 - v.p), nd, k)))
        at = q;
    return at;
}

static const char *find_last(struct view v, const char *nd)
{
    const char *first = find_first(v, nd);
    return first ? last_from(v, first, nd) : NULL;
}

static bool starts(const char *s, const char *pre)
{
    return strncmp(s, pre, strlen(pre)) == 0;
}

static bool ends(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && memcmp(s + n - k, suf, k) == 0;
}

enum role { R_SYSTEM, R_USER, R_ASSISTANT };

static int check_msgs(const struct ob_chat_msg *m, size_t n, enum role *roles)
{
    if (n == 0)
        return ob_seterr(OB_EUSAGE, "a conversation needs at least one message");
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content)
            return ob_seterr(OB_EUSAGE, "message %zu: %s is missing", i,
                             m[i].role ? "content" : "role");
        const char *r = m[i].role;
        if (!strcmp(r, "system"))
            roles[i] = R_SYSTEM;
        else if (!strcmp(r, "user"))
            roles[i] = R_USER;
        else if (!strcmp(r, "assistant"))
            roles[i] = R_ASSISTANT;
        else if (!strcmp(r, "tool") || !strcmp(r, "function") || !strcmp(r, "ipython"))
            return ob_seterr(OB_EUNSUPP, "message %zu: role '%s' is not supported (1b renders "
                             "system, user and assistant messages only)", i, r);
        else
            return ob_seterr(OB_EUSAGE, "message %zu: unknown role '%s' (system, user, "
                             "assistant)", i, r);
    }
    return 0;
}

/* Qwen3 (see chat.h); the comments name the template's variables. */
static void render_qwen3(struct segs *s, const struct ob_chat_msg *m, const enum role *roles,
                         size_t n, const struct ob_chat_opts *o)
{
    if (roles[0] == R_SYSTEM) {
        spec(s, "<|im_start|>");
        text(s, "system\n");
        text(s, m[0].content);
        spec(s, "<|im_end|>");
        text(s, "\n");
    }
    /* last_query_index: the last user message that is not a tool response, else n - 1 */
    size_t last_query = n - 1;
    for (size_t i = n; i-- > 0;)
        if (roles[i] == R_USER && !(starts(m[i].content, "<tool_response>") &&
                                    ends(m[i].content, "</tool_response>"))) {
            last_query = i;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        if (roles[i] == R_USER || (roles[i] == R_SYSTEM && i > 0)) {
            spec(s, "<|im_start|>");
            text(s, m[i].role);
            text(s, "\n");
            text(s, m[i].content);
            spec(s, "<|im_end|>");
            text(s, "\n");
            continue;
        }
        if (roles[i] != R_ASSISTANT)
            continue;
        struct view content = {m[i].content, strlen(m[i].content)}, reasoning = {"", 0};
        const char *think_end;
        if (m[i].reasoning_content) {
            reasoning = (struct view){m[i].reasoning_content, strlen(m[i].reasoning_content)};
        } else if ((think_end = find_first(content, "</think>"))) {
            /* content.split('</think>')[-1].lstrip('\n') */
            struct view c = content;
            const char *last = last_from(c, think_end, "</think>") + 8;
            content = lstrip_nl((struct view){last, c.n - (size_t)(last - c.p)});
            /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
            size_t head = (size_t)(think_end - c.p);
            struct view r = rstrip_nl((struct view){c.p, head});
            const char *open = find_last(r, "<think>");
            if (open)
                r = (struct view){open + 7, r.n - (size_t)(open + 7 - r.p)};
            reasoning = lstrip_nl(r);
        }
        spec(s, "<|im_start|>");
        text(s, "assistant\n");
        if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
            struct view r = lstrip_nl(rstrip_nl(reasoning));     /* reasoning.strip('\n') */
            struct view c = lstrip_nl(content);
            spec(s, "<think>");
            text(s, "\n");
            put(s, r.p, r.n, false);
            text(s, "\n");
            spec(s, "</think>");
            text(s, "\n\n");
            put(s, c.p, c.n, false);
        } else {
            put(s, content.p, content.n, false);
        }
        spec(s, "<|im_end|>");
        text(s, "\n");
    }
    if (o->add_generation_prompt) {
        spec(s, "<|im_start|>");
        text(s, "assistant\n");
        if (!o->enable_thinking) {
            spec(s, "<think>");
            text(s, "\n\n");
            spec(s, "</think>");
            text(s, "\n\n");
        }
    }
}

static void render_chatml(struct segs *s, const struct ob_chat_msg *m, const enum role *roles,
                          size_t n, const struct ob_chat_opts *o, const char *defsys)
{
    if (defsys && roles[0] != R_SYSTEM) {
        spec(s, "<|im_start|>");
        text(s, "system\n");
        text(s, defsys);
        spec(s, "<|im_end|>");
        text(s, "\n");
    }
    for (size_t i = 0; i < n; i++) {
        spec(s, "<|im_start|>");
        text(s, m[i].role);
        text(s, "\n");
        text(s, m[i].content);
        spec(s, "<|im_end|>");
        text(s, "\n");
    }
    if (o->add_generation_prompt) {
        spec(s, "<|im_start|>");
        text(s, "assistant\n");
    }
}

/*
 * Python's str.strip() (Jinja's trim filter) on UTF-8: the characters for which str.isspace()
 * is true, at both ends. Bytes that are not UTF-8 are not white space.
 */
static size_t space_at(const char *p, size_t n)
{
    unsigned char c = (unsigned char)p[0];
    if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f))
        return 1;
    uint32_t cp;
    size_t l;
    if (c >= 0xc2 && c < 0xe0 && n >= 2 && ((unsigned char)p[1] & 0xc0) == 0x80) {
        cp = (uint32_t)(c & 0x1f) << 6 | ((unsigned char)p[1] & 0x3f);
        l = 2;
    } else if (c >= 0xe0 && c < 0xf0 && n >= 3 && ((unsigned char)p[1] & 0xc0) == 0x80 &&
               ((unsigned char)p[2] & 0xc0) == 0x80) {
        cp = (uint32_t)(c & 0x0f) << 12 | (uint32_t)((unsigned char)p[1] & 0x3f) << 6 |
             ((unsigned char)p[2] & 0x3f);
        l = 3;
    } else {
        return 0;
    }
    bool sp = cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
              cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return sp ? l : 0;
}

/* the length of the white-space character that ends p[0..n), or 0 */
static size_t space_before(const char *p, size_t n)
{
    for (size_t l = 1; l <= 3 && l <= n; l++)
        if (space_at(p + n - l, l) == l)
            return l;
    return 0;
}

static struct view py_strip(struct view v)
{
    size_t l;
    while (v.n && (l = space_at(v.p, v.n)))
        v.p += l, v.n -= l;
    while (v.n && (l = space_before(v.p, v.n)))
        v.n -= l;
    return v;
}

/*
 * Gemma (see chat.h): "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n", ROLE "model" for the
 * assistant, CONTENT stripped of white space at both ends; turns alternate user, assistant,
 * ... (the templates raise an exception otherwise: the message at an even place must be a
 * user's, at an odd place anything but a user's); Gemma 3 takes a first system message out of
 * the turns and puts its content and "\n\n" (not stripped) at the start of the first turn.
 */
static int render_gemma(struct segs *s, const struct ob_chat_msg *m, const enum role *roles,
                        size_t n, const struct ob_chat_opts *o, bool sys_prefix)
{
    size_t first = 0;
    if (roles[0] == R_SYSTEM) {
        if (!sys_prefix)
            return ob_seterr(OB_EUNSUPP, "chat template 'gemma': this Gemma template has no "
                             "system role");
        first = 1;
    }
    for (size_t i = first; i < n; i++) {
        size_t k = i - first;
        if ((roles[i] == R_USER) != (k % 2 == 0))
            return ob_seterr(OB_EFORMAT, "chat template 'gemma': message %zu: roles must "
                             "alternate user/assistant/user/assistant/... (after an optional "
                             "system message)", i);
        spec(s, "<start_of_turn>");
        text(s, roles[i] == R_ASSISTANT ? "model" : m[i].role);
        text(s, "\n");
        if (k == 0 && first) {
            text(s, m[0].content);
            text(s, "\n\n");
        }
        struct view c = py_strip((struct view){m[i].content, strlen(m[i].content)});
        put(s, c.p, c.n, false);
        spec(s, "<end_of_turn>");
        text(s, "\n");
    }
    if (o->add_generation_prompt) {
        spec(s, "<start_of_turn>");
        text(s, "model\n");
    }
    return 0;
}

/* Build the segments of a conversation; ti->defsys must outlive them. */
static int build(const char *tmpl, const struct ob_chat_msg *msgs, size_t n,
                 const struct ob_chat_opts *o, struct tinfo *ti, struct segs *s)
{
    *s = (struct segs){0};
    struct ob_chat_opts def = OB_CHAT_OPTS_DEFAULT;
    if (!o)
        o = &def;
    int e = tinfo_read(tmpl, ti);
    if (e)
        return e;
    if (!msgs && n)
        return ob_seterr(OB_EUSAGE, "no messages");
    enum role *roles = malloc((n ? n : 1) * sizeof *roles);
    if (!roles)
        return ob_seterr(OB_ENOMEM, "out of memory");
    e = check_msgs(msgs, n, roles);
    if (!e) {
        switch (ti->fam) {
        case FAM_QWEN3: render_qwen3(s, msgs, roles, n, o); break;
        case FAM_CHATML: render_chatml(s, msgs, roles, n, o, ti->defsys); break;
        case FAM_GEMMA: e = render_gemma(s, msgs, roles, n, o, ti->sys_prefix); break;
        }
        if (!e && s->oom)
            e = ob_seterr(OB_ENOMEM, "out of memory");
    }
    free(roles);
    return e;
}

int ob_chat_render(const char *tmpl, const struct ob_chat_msg *msgs, size_t n,
                   const struct ob_chat_opts *o, char **out, size_t *len)
{
    struct tinfo ti;
    struct segs s;
    int e = build(tmpl, msgs, n, o, &ti, &s);
    if (!e) {
        size_t total = 0;
        for (size_t i = 0; i < s.n; i++)
            total += s.v[i].n;
        char *str = malloc(total + 1);
        if (!str) {
            e = ob_seterr(OB_ENOMEM, "out of memory");
        } else {
            size_t k = 0;
            for (size_t i = 0; i < s.n; i++) {
                memcpy(str + k, s.v[i].p, s.v[i].n);
                k += s.v[i].n;
            }
            str[k] = 0;
            *out = str;
            if (len)
                *len = k;
        }
    }
    free(s.v);
    free(ti.defsys);
    return e;
}

/* growable id array */
struct ids {
    int32_t *v;
    size_t n, cap;
};

static int ids_add(struct ids *a, const int32_t *v, size_t n)
{
    if (!OB_GROW(a->v, a->cap, a->n + n))
        return ob_seterr(OB_ENOMEM, "out of memory");
    memcpy(a->v + a->n, v, n * sizeof *v);
    a->n += n;
    return 0;
}

/* Tokenize buf[0..n) as plain text and append. */
static int flush_text(const struct ob_tok *tok, const char *buf, size_t n, struct ids *a)
{
    if (n == 0)
        return 0;
    int32_t *v;
    size_t k;
    int e = ob_tok_encode(tok, buf, n, false, &v, &k);
    if (e)
        return e;
    e = ids_add(a, v, k);
    free(v);
    return e;
}

int ob_chat_tokenize(const struct ob_tok *tok, const char *tmpl, const struct ob_chat_msg *msgs,
                     size_t n, const struct ob_chat_opts *o, int32_t **ids, size_t *n_ids)
{
    struct tinfo ti;
    struct segs s;
    struct ids a = {0};
    char *buf = NULL;
    int e = build(tmpl, msgs, n, o, &ti, &s);
    if (e)
        goto out;
    size_t total = 0;
    for (size_t i = 0; i < s.n; i++)
        total += s.v[i].n;
    if (!(buf = malloc(total + 1))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    if (ob_tok_add_bos(tok) && ob_tok_bos(tok) >= 0) {
        int32_t bos = ob_tok_bos(tok);
        if ((e = ids_add(&a, &bos, 1)))
            goto out;
    }
    size_t run = 0;                /* bytes of text gathered since the last special token */
    for (size_t i = 0; i < s.n; i++) {
        if (!s.v[i].special) {
            memcpy(buf + run, s.v[i].p, s.v[i].n);
            run += s.v[i].n;
            continue;
        }
        if ((e = flush_text(tok, buf, run, &a)))
            goto out;
        run = 0;
        int32_t id = ob_tok_find(tok, s.v[i].p, s.v[i].n);
        if (id < 0) {
            e = ob_seterr(OB_EFORMAT, "chat template '%s': token '%.*s' is not in the "
                          "vocabulary", ti.name, (int)s.v[i].n, s.v[i].p);
            goto out;
        }
        if ((e = ids_add(&a, &id, 1)))
            goto out;
    }
    if ((e = flush_text(tok, buf, run, &a)))
        goto out;
    if (!a.v && !(a.v = malloc(sizeof *a.v))) {
        e = ob_seterr(OB_ENOMEM, "out of memory");
        goto out;
    }
    *ids = a.v;
    *n_ids = a.n;
    a.v = NULL;
out:
    free(a.v);
    free(buf);
    free(s.v);
    free(ti.defsys);
    return e;
}

int ob_chat_stops(const struct ob_tok *tok, const char *tmpl, int32_t stops[OB_CHAT_MAX_STOPS],
                  size_t *n)
{
    struct tinfo ti = {.name = "none"};
    bool templated = tmpl && *tmpl;        /* else a plain prompt: the EOS only */
    int e = templated ? tinfo_read(tmpl, &ti) : 0;
    free(ti.defsys);
    if (e)
        return e;
    size_t k = 0;
    if (templated) {
        const char *end = ti.fam == FAM_GEMMA ? "<end_of_turn>" : "<|im_end|>";
        int32_t id = ob_tok_find(tok, end, strlen(end));
        if (id < 0)
            return ob_seterr(OB_EFORMAT, "chat template '%s': token '%s' is not in the "
                             "vocabulary", ti.name, end);
        stops[k++] = id;
    }
    int32_t cand[2] = {ob_tok_eos(tok), templated && ti.fam == FAM_QWEN3 ?
                       ob_tok_find(tok, "<|endoftext|>", 13) : -1};
    for (int c = 0; c < 2; c++) {
        bool dup = cand[c] < 0;
        for (size_t j = 0; j < k && !dup; j++)
            dup = stops[j] == cand[c];
        if (!dup)
            stops[k++] = cand[c];
    }
    *n = k;
    return 0;
}
