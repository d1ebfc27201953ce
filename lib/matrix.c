/*
 * matrix.c — the panel layout of weight matrices (matrix.h): packing rows into panels and
 * reading a row back. Byte and bit moves; the kernels that read panels are in lib/cpu/kernels/.
 */
#include <stddef.h>
#include <string.h>

#include "1b.h"
#include "arith/blocks.h"
#include "matrix.h"

/* where the fp16 d sits in a block of s bytes that is not whole dwords (matrix.h): first, or
 * last; -1: the type has no panel layout */
static long d_at(uint32_t type, size_t s)
{
    switch (type) {
    case OB_Q4_0: case OB_Q5_0: case OB_Q8_0: return 0;
    case OB_Q6_K: return (long)s - 2;
    }
    return -1;
}

OB_STATIC_ASSERT(offsetof(struct ob_block_q4_0, d) == 0 && offsetof(struct ob_block_q5_0, d) == 0 &&
                 offsetof(struct ob_block_q8_0, d) == 0 &&
                 offsetof(struct ob_block_q6_k, d) == sizeof(struct ob_block_q6_k) - 2,
                 "the fp16 d first or last");

bool ob_panel_fits(const struct ob_matrix *m)
{
    uint32_t blk = ob_type_blck(m->type), size = ob_type_size(m->type);
    return m->layout == OB_LAYOUT_ROWS && blk > 1 &&
           (size % 4 == 0 || (size % 4 == 2 && d_at(m->type, size) >= 0)) && m->k > 0 &&
           m->k % (int)blk == 0 && m->row_bytes == (size_t)(m->k / (int)blk) * size &&
           m->n > 0 && m->n % OB_PANEL_ROWS == 0;
}

/* Q5_0's high bits: bit 4d + i of qh (value 4d + i) to bit d of byte i, bit 16 + 4d + i to
 * bit 4 + d of byte i (i, d < 4); and back */
static uint32_t q5_bits_in(uint32_t h)
{
    uint32_t o = 0;
    for (int i = 0; i < 4; i++)
        for (int d = 0; d < 4; d++)
            o |= (h >> (4 * d + i) & 1) << (8 * i + d) | (h >> (16 + 4 * d + i) & 1) << (8 * i + 4 + d);
    return o;
}

static uint32_t q5_bits_out(uint32_t o)
{
    uint32_t h = 0;
    for (int i = 0; i < 4; i++)
        for (int d = 0; d < 4; d++)
            h |= (o >> (8 * i + d) & 1) << (4 * d + i) | (o >> (8 * i + 4 + d) & 1) << (16 + 4 * d + i);
    return h;
}

/* block blk (s bytes) of row r into the panel block pb, or (out) back out of it: only the
 * destination is written */
static void panel_move(uint32_t type, size_t s, uint8_t *pb, int r, uint8_t *blk, bool out)
{
    uint8_t *body = blk;                     /* the dwords */
    if (s % 4) {
        long at = d_at(type, s);
        uint8_t *d = blk + at, *pd = pb + ob_p8_d(s) + 2 * (size_t)r;
        memcpy(out ? d : pd, out ? pd : d, 2);
        body += at == 0 ? 2 : 0;
    }
    for (size_t i = 0; i < s / 4; i++) {
        uint8_t *pw = pb + 32 * i + 4 * (size_t)r;
        uint32_t v;
        memcpy(&v, out ? pw : body + 4 * i, 4);
        if (type == OB_Q5_0 && i == 0)
            v = out ? q5_bits_out(v) : q5_bits_in(v);
        memcpy(out ? body + 4 * i : pw, &v, 4);
    }
}

void ob_panel_pack(const struct ob_matrix *m, void *dst)
{
    size_t s = ob_type_size(m->type), nb = (size_t)m->k / ob_type_blck(m->type);
    for (int i = 0; i < m->n; i++) {
        const uint8_t *row = (const uint8_t *)m->data + (size_t)i * m->row_bytes;
        uint8_t *panel = (uint8_t *)dst + (size_t)(i / OB_PANEL_ROWS) * OB_PANEL_ROWS * m->row_bytes;
        for (size_t b = 0; b < nb; b++)
            panel_move(m->type, s, panel + b * OB_PANEL_ROWS * s, i % OB_PANEL_ROWS,
                       (uint8_t *)row + b * s, false);
    }
}

void ob_panel_row(const struct ob_matrix *m, int i, void *dst)
{
    size_t s = ob_type_size(m->type), nb = (size_t)m->k / ob_type_blck(m->type);
    const uint8_t *panel = (const uint8_t *)m->data +
                           (size_t)(i / OB_PANEL_ROWS) * OB_PANEL_ROWS * m->row_bytes;
    for (size_t b = 0; b < nb; b++)
        panel_move(m->type, s, (uint8_t *)panel + b * OB_PANEL_ROWS * s, i % OB_PANEL_ROWS,
                   (uint8_t *)dst + b * s, true);
}
