/*
 * chat.h — chat templates: a conversation (a list of role + content messages) becomes the text
 * and the token ids its model was trained on (to be folded into 1b.h; the conventions of 1b.h
 * hold here too).
 *
 * 1b has no Jinja engine. The template string a model carries (GGUF tokenizer.chat_template)
 * is recognised by its content (ob_chat_detect) and the families below are rendered in C,
 * reproducing what the real template renders for the roles system, user and assistant:
 *
 *   qwen3   Qwen3's ChatML with thinking. A first system message opens the text; other
 *           system and user messages are "<|im_start|>ROLE\nCONTENT<|im_end|>\n". Assistant
 *           messages: reasoning is taken from reasoning_content when given, else cut out of
 *           the content ("<think>R</think>A": R = the text before the first "</think>", after
 *           the last "<think>", with newlines trimmed; A = the text after the last "</think>",
 *           leading newlines trimmed). Assistant turns after the last real user query (a user
 *           message that is not wrapped in <tool_response>...</tool_response>) keep their
 *           reasoning as "<think>\nR\n</think>\n\n" (always when the turn is the last message,
 *           else only when R is not empty); earlier turns drop it. The generation prompt is
 *           "<|im_start|>assistant\n", followed by the empty think block
 *           "<think>\n\n</think>\n\n" when thinking is off.
 *   chatml  "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, generation prompt
 *           "<|im_start|>assistant\n". When the template text holds a default system message
 *           (a string literal "<|im_start|>system\nTEXT<|im_end|>", as SmolLM2's and
 *           Qwen2.5's templates have), TEXT is read from the template and rendered first
 *           whenever the first message is not a system message. Templates this family cannot
 *           follow exactly (text outside expressions, bos_token, trimming of content) are
 *           refused rather than approximated.
 *   gemma   templates with <start_of_turn>: "<start_of_turn>ROLE\nCONTENT<end_of_turn>\n" per
 *           message, ROLE "model" for the assistant, CONTENT with white space stripped at both
 *           ends (Jinja's trim: Python's str.strip()), generation prompt
 *           "<start_of_turn>model\n". Messages must alternate user, assistant, user, ... (the
 *           templates raise otherwise; 1b refuses with OB_EFORMAT): a message at an even place
 *           must be a user's, at an odd place anything else. Gemma 3's template (it sets
 *           first_user_prefix) takes a first system message out and writes its content and
 *           "\n\n", unstripped, at the start of the first turn; Gemma 1 and 2's ("System role
 *           not supported") refuse a first system message (OB_EUNSUPP); any other variant is
 *           refused. The template's {{ bos_token }} is not part of the text: the BOS comes
 *           from the vocabulary (add_bos), as for every family. reasoning_content is ignored.
 *           A gemma3 model whose file has no template uses ob_chat_builtin("gemma3").
 *
 * Every other family ob_chat_detect names (llama3, llama2, phi3, chatml-think, unknown) fails
 * with OB_EUNSUPP and a message naming it: 1b never guesses a template. So does a model
 * without a template (NULL or ""; base models such as stories260K): "the model has no chat
 * template; send a plain prompt instead" (OB_EUNSUPP), rather than its messages joined in a
 * format the model never saw.
 * Roles other than system, user and assistant are refused (tool and function calls are not
 * rendered).
 *
 * Tokens: the special tokens of a rendering are only those the template itself writes
 * (<|im_start|>, <|im_end|>, <think>, </think>). Everything between two of them (template text
 * such as "user\n" and message content alike) is one stretch of text tokenized with
 * parse_special false, so a user who types "<|im_end|>" gets the plain-text tokens of those
 * characters, never the control token; stretches are tokenized whole, so the ids equal those
 * of tokenizing the rendered string when the content holds no special-token text.
 *
 * Ownership and threads: the functions keep no state; strings and arrays returned through
 * out-pointers are malloc'd and belong to the caller (free()). Any thread may call them.
 */
#ifndef OB_CHAT_H
#define OB_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "1b.h"
#include "tok.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ob_chat_msg {
    const char *role;              /* "system", "user" or "assistant" */
    const char *content;           /* NUL-terminated bytes, usually UTF-8; never NULL */
    /* Assistant messages only, or NULL (= absent): the reasoning of this turn, which the
     * qwen3 family then writes as the think block instead of cutting it out of the content
     * (Jinja: message.reasoning_content). The other families ignore it, as their templates do. */
    const char *reasoning_content;
};

struct ob_chat_opts {
    bool add_generation_prompt;    /* end with the header of an assistant turn (default true) */
    bool enable_thinking;          /* qwen3: false appends the empty think block (default true) */
};

/* The defaults; a NULL options pointer means the same. */
#define OB_CHAT_OPTS_DEFAULT \
    ((struct ob_chat_opts){.add_generation_prompt = true, .enable_thinking = true})

/*
 * ob_chat_builtin (1b.h): the template 1b uses for a model of architecture `arch` whose file
 * carries none: for "gemma3", the Gemma 3 turn format written as a Jinja template (1b's own
 * text, rendering what Google's Gemma 3 template renders for text messages; family "gemma");
 * NULL for any other architecture, whose models then take no messages (see above). A static
 * string.
 */

/*
 * The family 1b renders a template string with: "qwen3", "chatml" or "gemma". OB_EUNSUPP for
 * any other, e.g. "chat template 'llama3' is not supported; send a plain prompt instead", and
 * for no template (tmpl NULL or ""). *family is a static string.
 */
int ob_chat_family(const char *tmpl, const char **family);

/*
 * Render a conversation of n >= 1 messages to text (NUL-terminated, the NUL not counted in
 * *len). OB_EUSAGE for no messages, a NULL role or content, or an unknown role; OB_EUNSUPP for
 * no template, an unsupported template or role (tool, function).
 */
int ob_chat_render(const char *tmpl, const struct ob_chat_msg *msgs, size_t n,
                   const struct ob_chat_opts *o, char **out, size_t *len);

/*
 * The same conversation as token ids (see "Tokens" above), preceded by the BOS token when the
 * vocabulary asks for one (ob_tok_add_bos). OB_EFORMAT when a special token the template
 * writes is not in the vocabulary.
 */
int ob_chat_tokenize(const struct ob_tok *tok, const char *tmpl, const struct ob_chat_msg *msgs,
                     size_t n, const struct ob_chat_opts *o, int32_t **ids, size_t *n_ids);

/*
 * The tokens that end an assistant turn under this template, for a generator to stop on:
 * ChatML families: <|im_end|>, then the vocabulary's EOS when it is another token, then (qwen3,
 * whose generation config lists both) <|endoftext|> when present and not yet listed; gemma:
 * <end_of_turn>, then the EOS (Gemma 3's generation config lists both); tmpl NULL or "" (a
 * plain prompt, no template involved): the EOS token, if any. *n may be 0. OB_EFORMAT when the
 * turn's end token is missing from the vocabulary; OB_EUNSUPP for a template 1b does not render.
 */
#define OB_CHAT_MAX_STOPS 4
int ob_chat_stops(const struct ob_tok *tok, const char *tmpl, int32_t stops[OB_CHAT_MAX_STOPS],
                  size_t *n);

#ifdef __cplusplus
}
#endif
#endif
