/*
 * tok.h — the tokenizer: text bytes <-> token ids for the two vocabulary kinds GGUF models
 * carry (to be folded into 1b.h; the conventions of 1b.h hold here too).
 *
 * Kinds (GGUF key tokenizer.ggml.model):
 * - "gpt2": byte-level BPE. Text is split by the pre-tokenizer named by tokenizer.ggml.pre
 *   (a sequence of PCRE2 regexes, see tok.c), each piece's bytes are spelled with the GPT-2
 *   byte-to-unicode alphabet and merged pair by pair in the order of tokenizer.ggml.merges
 *   (lowest rank first, leftmost first among equal ranks), as the Hugging Face `tokenizers`
 *   BPE model does.
 * - "llama": SentencePiece-style BPE by score. Spaces become U+2581 "▁", a space is put in
 *   front of the text when add_space_prefix is set, USER_DEFINED pieces are cut out of that
 *   escaped text wherever they occur (leftmost, then longest; a piece's spaces, which llama.cpp's
 *   converter writes for Gemma's "▁", match "▁"), adjacent symbols between them are merged into
 *   the vocabulary piece with the highest score (leftmost first among equal scores), and
 *   symbols left outside the vocabulary fall back to <0xNN> byte tokens. This is what
 *   sentencepiece does with its user_defined_symbols (Gemma's whitespace runs, newline runs
 *   and HTML tags): tests/t4100-tok.sh compares it on the real Gemma 3 vocabulary.
 *
 * Special tokens are those of type CONTROL or USER_DEFINED. With parse_special the CONTROL
 * ones (and, in a gpt2 vocabulary, the USER_DEFINED ones) are found in the text (leftmost,
 * then longest match) and emitted as their ids, each stretch between them tokenized on its
 * own; without it no CONTROL token comes out of the text (except, in a llama vocabulary, the
 * unknown token for a byte without a <0xNN> token). USER_DEFINED tokens of a llama vocabulary
 * come out with or without parse_special, as described above; those of a gpt2 vocabulary only
 * with it.
 *
 * Ownership and threads: a struct ob_tok is immutable after construction; any number of
 * threads may encode and decode with one tokenizer at the same time. Arrays returned through
 * out-pointers are malloc'd and belong to the caller (free()); pointers returned by accessors
 * point into the tokenizer and live until ob_tok_free.
 */
#ifndef OB_TOK_H
#define OB_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "1b.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Token types as stored in tokenizer.ggml.token_type. */
enum ob_tok_type {
    OB_TOK_UNDEFINED = 0,          /* treated as NORMAL */
    OB_TOK_NORMAL = 1,
    OB_TOK_UNKNOWN = 2,
    OB_TOK_CONTROL = 3,            /* special: <|im_start|>, <s> */
    OB_TOK_USER_DEFINED = 4,       /* special: <think>, added tokens */
    OB_TOK_UNUSED = 5,
    OB_TOK_BYTE = 6,               /* <0xNN> byte-fallback token (SPM) */
};

/* A byte string that is not NUL-terminated (token texts may hold any byte, NUL included). */
struct ob_tok_str {
    const char *ptr;
    size_t len;
};

/*
 * Everything a tokenizer is built from, as plain arrays (the GGUF loader fills one from the
 * tokenizer.ggml.* keys; tests fill one from a tokenizer.json). Everything is copied.
 */
struct ob_tok_spec {
    const char *model;             /* "gpt2" or "llama" */
    const char *pre;               /* gpt2: "qwen2", "llama3" = "llama-bpe", "smollm",
                                      "gpt2" = "gpt-2" = "default"; NULL means "default";
                                      ignored for llama */
    uint32_t n_vocab;
    const struct ob_tok_str *tokens;       /* [n_vocab] token texts */
    const int32_t *types;          /* [n_vocab] enum ob_tok_type, or NULL: all NORMAL */
    const float *scores;           /* [n_vocab] merge priority (llama), or NULL: all 0 */
    uint32_t n_merges;             /* gpt2: merge rules, rank = index */
    const struct ob_tok_str *merges;       /* [n_merges] "left right" (GGUF form), or NULL */
    const struct ob_tok_str *merge_pairs;  /* or [2*n_merges] left, right, left, right, ... */
    int64_t bos, eos, unk, pad;    /* token ids; -1 (or any id outside the vocab) = none */
    int add_bos;                   /* 1 yes, 0 no, -1 the kind's default (llama yes, gpt2 no) */
    int add_space_prefix;          /* 1, 0, -1 default (llama yes, gpt2 no) */
};

struct ob_tok;

/*
 * Build a tokenizer. A hostile vocabulary never crashes it: duplicate texts resolve to the
 * lowest id, merges that name absent tokens (or whose result is absent) are ignored, empty
 * texts are never produced by encoding, a type outside 0..6 counts as NORMAL. OB_EUNSUPP for
 * an unknown model or pre-tokenizer name (named in the message), OB_EFORMAT for a spec that is
 * not self-consistent (missing arrays, a merge without a separator).
 */
int ob_tok_new(const struct ob_tok_spec *spec, struct ob_tok **out);
/* Read the tokenizer.ggml.* keys of a GGUF file (see tok.c for the defaults). A special-token
 * id outside the vocabulary is OB_EFORMAT naming the key (-1 and 0xffffffff mean none). */
int ob_tok_from_gguf(const struct ob_gguf *g, struct ob_tok **out);
void ob_tok_free(struct ob_tok *tok);

/*
 * Text -> ids. `text` is any bytes, invalid UTF-8 included: decoding the ids gives the text
 * back, except that llama vocabularies add their space prefix and read U+2581 as a space, and
 * a byte the vocabulary has no token for is dropped (gpt2: its byte-level character is not a
 * token, e.g. 0xff in SmolLM2; llama: no <0xNN> token and no unknown token). No BOS is added;
 * callers ask ob_tok_add_bos(). *ids is malloc'd (non-NULL even when *n is 0), freed by the
 * caller.
 */
int ob_tok_encode(const struct ob_tok *tok, const char *text, size_t len, bool parse_special,
                  int32_t **ids, size_t *n);

/*
 * The bytes token `id` contributes to output text: gpt2 tokens with the byte-level alphabet
 * undone (so a piece may be part of a UTF-8 sequence), llama pieces with "▁" as a space and
 * <0xNN> as that byte, special and unknown tokens as their text. OB_ERANGE for a bad id.
 */
int ob_tok_piece(const struct ob_tok *tok, int32_t id, const char **bytes, size_t *len);
/* The concatenated pieces, NUL-terminated (the NUL is not counted in *len); caller frees. */
int ob_tok_decode(const struct ob_tok *tok, const int32_t *ids, size_t n, char **out,
                  size_t *len);
/* The token's stored text, as in the vocabulary. OB_ERANGE for a bad id. */
int ob_tok_text(const struct ob_tok *tok, int32_t id, const char **text, size_t *len);

uint32_t ob_tok_n_vocab(const struct ob_tok *tok);
const char *ob_tok_model(const struct ob_tok *tok);      /* "gpt2" or "llama" */
const char *ob_tok_pre(const struct ob_tok *tok);        /* canonical pre name; "" for llama */
int32_t ob_tok_bos(const struct ob_tok *tok);            /* -1 when none */
int32_t ob_tok_eos(const struct ob_tok *tok);
int32_t ob_tok_unk(const struct ob_tok *tok);
int32_t ob_tok_pad(const struct ob_tok *tok);
bool ob_tok_add_bos(const struct ob_tok *tok);
bool ob_tok_add_space_prefix(const struct ob_tok *tok);
int ob_tok_type(const struct ob_tok *tok, int32_t id);   /* enum ob_tok_type; -1 bad id */
bool ob_tok_is_special(const struct ob_tok *tok, int32_t id);   /* CONTROL or USER_DEFINED */
/* The lowest id whose text is exactly these bytes (any type), or -1 (always for ""). */
int32_t ob_tok_find(const struct ob_tok *tok, const char *text, size_t len);
/* The reverse of ob_tok_piece: an id whose piece is exactly these bytes, or -1 (always for no
 * bytes). Normal tokens (NORMAL, UNDEFINED) come first, then any other type; the lowest id
 * among several. (For a token reported only by its text, as a server may: see 1b-logprobs.) */
int32_t ob_tok_find_piece(const struct ob_tok *tok, const char *bytes, size_t len);

#ifdef __cplusplus
}
#endif
#endif
