/*
 * matrix.h — a weight matrix as every route sees it: n rows of k values of a GGUF type, row
 * by row in the mapped model file (row_bytes apart). Internal to lib/.
 */
#ifndef OB_MATRIX_H
#define OB_MATRIX_H

#include <stddef.h>
#include <stdint.h>

struct ob_matrix {
    uint32_t type;                 /* enum ob_type */
    int k, n;                      /* values per row, rows */
    size_t row_bytes;
    const void *data;
};

#endif
