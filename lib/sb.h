/*
 * sb.h — growing buffers (sb.c): a byte string that is appended to (struct ob_sb: response
 * bodies, log lines, token text, replies being received) and the doubling growth of an array
 * (ob_grow), so that no file writes its own realloc loop.
 *
 * struct ob_sb: zero-initialised it is empty ({0}); every append keeps it NUL-terminated (once
 * anything has been appended, even nothing: ob_sb_add(b, "", 0) makes p "" rather than NULL).
 * An append that runs out of memory sets oom and leaves the content as it was before it; every
 * later append is then ignored, so a builder checks oom once, at the end.
 *
 * Ownership: a struct ob_sb owns its bytes until ob_sb_free or ob_sb_take. Threads: none of its
 * own; one buffer, one thread at a time.
 */
#ifndef OB_SB_H
#define OB_SB_H

#include <stdbool.h>
#include <stddef.h>

struct ob_sb {
    char *p;                       /* NUL-terminated once anything was appended */
    size_t len, cap;               /* bytes held (without the NUL), bytes allocated */
    bool oom;                      /* an append failed: the content is incomplete */
};

void ob_sb_add(struct ob_sb *b, const void *s, size_t n);
void ob_sb_str(struct ob_sb *b, const char *s);
void ob_sb_fmt(struct ob_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of n bytes: quotes, escapes; ill-formed UTF-8 becomes U+FFFD. */
void ob_sb_json(struct ob_sb *b, const char *s, size_t n);
/* A float32 log-probability on the wire: the shortest decimal of its value widened to double
 * (ob_f64_str((double)lp)), which a client reading a double and rounding it to float32 reads
 * back to the same bits; a non-finite value as the string "-Infinity", "Infinity" or "NaN". */
void ob_sb_lp(struct ob_sb *b, float lp);
/* Room for n more bytes and the NUL: the buffer grows to twice its size (256 bytes at first),
 * or to exactly what is needed when that is more. false (and oom) when out of memory. */
bool ob_sb_reserve(struct ob_sb *b, size_t n);
/* Capacity `cap` exactly (the NUL included), for a buffer whose size its owner accounts for;
 * never shrinks. false (and oom) when out of memory. */
bool ob_sb_grow_to(struct ob_sb *b, size_t cap);
void ob_sb_reset(struct ob_sb *b);   /* len = 0; keeps the memory (and oom) */
void ob_sb_free(struct ob_sb *b);
/* The bytes, NUL-terminated ("" when empty), now the caller's (free()); *len (unless NULL)
 * their length. The buffer is left empty. NULL when out of memory (the content is freed). */
char *ob_sb_take(struct ob_sb *b, size_t *len);

/*
 * Room for `need` elements of `elem` bytes in the array *pp of capacity *cap: it grows by
 * doubling (from 16 elements). false when out of memory or the size overflows; *pp and *cap
 * are then as they were. OB_GROW(ptr, cap, need) passes the pointer's address and element
 * size (cap a size_t lvalue).
 */
bool ob_grow(void *pp, size_t *cap, size_t need, size_t elem);
#define OB_GROW(ptr, cap, need) ob_grow(&(ptr), &(cap), (need), sizeof *(ptr))

#endif
