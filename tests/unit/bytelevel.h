/*
 * bytelevel.h — the GPT-2 byte-level alphabet for the tests that build vocabularies by hand
 * (tests/unit, tests/fuzz), written out independently of lib/tok.c so that they check it.
 *
 * Bytes that print (! .. ~, ¡ .. ¬, ® .. ÿ) stand for themselves; the others, in byte order,
 * take the code points from U+0100 on.
 */
#ifndef OB_TEST_BYTELEVEL_H
#define OB_TEST_BYTELEVEL_H

#include <stddef.h>

static inline int bl_printable(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* UTF-8 of the byte-level character for byte b into o (2 bytes at most); returns its length */
static inline size_t bl_char(unsigned b, char *o)
{
    unsigned cp = b;
    if (!bl_printable(b)) {
        cp = 256;
        for (unsigned x = 0; x < b; x++)
            cp += !bl_printable(x);
    }
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
}

#ifdef OB_TOK_H
/* the 256 byte tokens in byte order, NORMAL: t[b] and ty[b] for b = 0..255, their text in
 * pool (512 bytes at most); returns 256, the count */
static inline uint32_t bl_byte_tokens(struct ob_tok_str *t, int32_t *ty, char *pool)
{
    size_t used = 0;
    for (unsigned b = 0; b < 256; b++) {
        size_t k = bl_char(b, pool + used);
        t[b] = (struct ob_tok_str){pool + used, k};
        ty[b] = OB_TOK_NORMAL;
        used += k;
    }
    return 256;
}
#endif

#endif
