/*
 * matrix.h — a weight matrix as every route sees it: n rows of k values of a GGUF type, row
 * by row in the mapped model file (row_bytes apart), or, in the cpu route's copy of the
 * weights, in panels. Internal to lib/.
 *
 * The panel layout (OB_LAYOUT_P8) holds the same bytes as the rows, rearranged so that a SIMD
 * kernel reads the 8 rows of a panel as one stream, one row per 32-bit lane: panel p (rows
 * 8p .. 8p + 7) takes the bytes rows 8p .. 8p + 7 take in the row layout (from data +
 * 8p * row_bytes), block b of the panel the 8 * S bytes from 8 * S * b on (S the type's block
 * bytes), and in it dword d of row r's block b sits at byte 32 * d + 4 * r. A block that is
 * not whole dwords is whole dwords and one fp16 d, first (Q4_0, Q5_0, Q8_0) or last (Q6_K): its
 * other bytes are the dwords, and the d of row r sits after them, at ob_p8_d(S) + 2 * r. In
 * Q5_0's first dword, qh, the bits are rearranged so that the high bits of a qs dword's
 * values sit where a shift puts them (bit 4d + i of qh to bit d of byte i, bit 16 + 4d + i to
 * bit 4 + d of byte i). Those types and the ones with whole-dword blocks have the layout,
 * matrices whose row count is a multiple of 8 (ob_panel_fits); the bits of every product are
 * the same in either layout.
 */
#ifndef OB_MATRIX_H
#define OB_MATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ob_layout { OB_LAYOUT_ROWS = 0, OB_LAYOUT_P8 = 1 };

#define OB_PANEL_ROWS 8

/* where a panel block holds the fp16 d of its row 0, for a type whose S-byte blocks are whole
 * dwords and one fp16 d (Q4_0: 128, Q5_0: 160, Q8_0: 256, Q6_K: 1664) */
static inline size_t ob_p8_d(size_t S)
{
    return 32 * (S / 4);
}

struct ob_matrix {
    uint32_t type;                 /* enum ob_type */
    int k, n;                      /* values per row, rows */
    size_t row_bytes;
    const void *data;
    int layout;                    /* enum ob_layout */
};

/* whether the row-layout matrix m can be held in panels: blocks of whole dwords (or Q4_0, Q5_0,
 * Q8_0, Q6_K), rows of whole blocks back to back, a multiple of 8 rows */
bool ob_panel_fits(const struct ob_matrix *m);

/* the rows of a row-layout matrix m into panels at dst (m->n * m->row_bytes bytes, not
 * overlapping m's data; m must pass ob_panel_fits) */
void ob_panel_pack(const struct ob_matrix *m, void *dst);

/* row i of a panel-layout matrix m into dst (m->row_bytes bytes) */
void ob_panel_row(const struct ob_matrix *m, int i, void *dst);

#endif
