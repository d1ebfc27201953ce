/*
 * matrix.c — the panel layout of weight matrices (matrix.h): packing rows into panels and
 * reading a row back. Plain byte moves; the kernels that read panels are in lib/cpu/kernels/.
 */
#include <string.h>

#include "1b.h"
#include "matrix.h"

bool ob_panel_fits(const struct ob_matrix *m)
{
    uint32_t blk = ob_type_blck(m->type), size = ob_type_size(m->type);
    return m->layout == OB_LAYOUT_ROWS && blk > 1 && size % 4 == 0 && m->k > 0 &&
           m->k % (int)blk == 0 && m->row_bytes == (size_t)(m->k / (int)blk) * size &&
           m->n > 0 && m->n % OB_PANEL_ROWS == 0;
}

/*
 * Row i's block b in the panel layout: its dword d at the returned offset (from the matrix's
 * data) + 32 * d. s: the type's block bytes.
 */
static size_t panel_block(const struct ob_matrix *m, size_t s, int i, size_t b)
{
    size_t p = (size_t)(i / OB_PANEL_ROWS);
    return p * OB_PANEL_ROWS * m->row_bytes + b * OB_PANEL_ROWS * s +
           4 * (size_t)(i % OB_PANEL_ROWS);
}

void ob_panel_pack(const struct ob_matrix *m, void *dst)
{
    size_t s = ob_type_size(m->type), nb = (size_t)m->k / ob_type_blck(m->type);
    for (int i = 0; i < m->n; i++) {
        const char *row = (const char *)m->data + (size_t)i * m->row_bytes;
        for (size_t b = 0; b < nb; b++) {
            char *o = (char *)dst + panel_block(m, s, i, b);
            for (size_t d = 0; d < s / 4; d++)
                memcpy(o + 32 * d, row + b * s + 4 * d, 4);
        }
    }
}

void ob_panel_row(const struct ob_matrix *m, int i, void *dst)
{
    size_t s = ob_type_size(m->type), nb = (size_t)m->k / ob_type_blck(m->type);
    for (size_t b = 0; b < nb; b++) {
        const char *o = (const char *)m->data + panel_block(m, s, i, b);
        for (size_t d = 0; d < s / 4; d++)
            memcpy((char *)dst + b * s + 4 * d, o + 32 * d, 4);
    }
}
