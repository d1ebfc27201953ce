/*
 * matrix.c — the panel layout of weight matrices (matrix.h): packing rows into panels and
 * reading a row back. Byte and bit moves; the kernels that read panels are in lib/cpu/kernels/.
 */
#include <stddef.h>
#include <string.h>

#include "1b.h"
#include "arith/blocks.h"
#include "matrix.h"

/* Q6_K's d is the last 2 bytes of its block, after 52 dwords */
OB_STATIC_ASSERT(offsetof(struct ob_block_q6_k, d) == sizeof(struct ob_block_q6_k) - 2 &&
                 OB_P8_Q6_D == 32 * (sizeof(struct ob_block_q6_k) / 4), "q6_k panel block");

bool ob_panel_fits(const struct ob_matrix *m)
{
    uint32_t blk = ob_type_blck(m->type), size = ob_type_size(m->type);
    return m->layout == OB_LAYOUT_ROWS && blk > 1 && (size % 4 == 0 || m->type == OB_Q5_0 || m->type == OB_Q6_K) &&
           m->k > 0 && m->k % (int)blk == 0 &&
           m->row_bytes == (size_t)(m->k / (int)blk) * size && m->n > 0 &&
           m->n % OB_PANEL_ROWS == 0;
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

/* where dword d of row r's block sits among the panel block's dwords (matrix.h): bytes from
 * their start (the panel block's, or for Q5_0 its qs's) */
static size_t panel_dword(int r, size_t d)
{
    return 32 * d + 4 * (size_t)r;
}

/* block blk (s bytes) of row r into the panel block pb */
static void panel_put(uint32_t type, size_t s, uint8_t *pb, int r, const uint8_t *blk)
{
    if (type == OB_Q5_0) {
        uint32_t h;
        memcpy(&h, blk + 2, 4);
        h = q5_bits_in(h);
        memcpy(pb + 4 * r, &h, 4);
        memcpy(pb + OB_P8_Q5_D + 2 * r, blk, 2);
        for (size_t d = 0; d < 4; d++)
            memcpy(pb + OB_P8_Q5_QS + panel_dword(r, d), blk + 6 + 4 * d, 4);
        return;
    }
    for (size_t d = 0; d < s / 4; d++)
        memcpy(pb + panel_dword(r, d), blk + 4 * d, 4);
    if (type == OB_Q6_K)
        memcpy(pb + OB_P8_Q6_D + 2 * r, blk + s - 2, 2);
}

/* row r's block out of the panel block pb into blk */
static void panel_get(uint32_t type, size_t s, const uint8_t *pb, int r, uint8_t *blk)
{
    if (type == OB_Q5_0) {
        uint32_t h;
        memcpy(&h, pb + 4 * r, 4);
        h = q5_bits_out(h);
        memcpy(blk + 2, &h, 4);
        memcpy(blk, pb + OB_P8_Q5_D + 2 * r, 2);
        for (size_t d = 0; d < 4; d++)
            memcpy(blk + 6 + 4 * d, pb + OB_P8_Q5_QS + panel_dword(r, d), 4);
        return;
    }
    for (size_t d = 0; d < s / 4; d++)
        memcpy(blk + 4 * d, pb + panel_dword(r, d), 4);
    if (type == OB_Q6_K)
        memcpy(blk + s - 2, pb + OB_P8_Q6_D + 2 * r, 2);
}

void ob_panel_pack(const struct ob_matrix *m, void *dst)
{
    size_t s = ob_type_size(m->type), nb = (size_t)m->k / ob_type_blck(m->type);
    for (int i = 0; i < m->n; i++) {
        const uint8_t *row = (const uint8_t *)m->data + (size_t)i * m->row_bytes;
        uint8_t *panel = (uint8_t *)dst + (size_t)(i / OB_PANEL_ROWS) * OB_PANEL_ROWS * m->row_bytes;
        for (size_t b = 0; b < nb; b++)
            panel_put(m->type, s, panel + b * OB_PANEL_ROWS * s, i % OB_PANEL_ROWS, row + b * s);
    }
}

void ob_panel_row(const struct ob_matrix *m, int i, void *dst)
{
    size_t s = ob_type_size(m->type), nb = (size_t)m->k / ob_type_blck(m->type);
    const uint8_t *panel = (const uint8_t *)m->data +
                           (size_t)(i / OB_PANEL_ROWS) * OB_PANEL_ROWS * m->row_bytes;
    for (size_t b = 0; b < nb; b++)
        panel_get(m->type, s, panel + b * OB_PANEL_ROWS * s, i % OB_PANEL_ROWS,
                  (uint8_t *)dst + b * s);
}
