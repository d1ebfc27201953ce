/*
 * weights.h — the cpu route's view of a model's weights: a copy on 2 MB pages, the matrices
 * its kernels read faster so held in panels. Kept with the model (model.h struct
 * ob_model_att), shared by every cpu context of it (and the npu routes' cpu instances).
 */
#ifndef OB_CPU_WEIGHTS_H
#define OB_CPU_WEIGHTS_H

#include "model.h"

/*
 * Where a route reads the matrices: the bytes [lo, lo + len) of the mapping are read at at
 * instead (ob_weights_at); len 0 reads every matrix in place. The matrices whose data (their
 * address in the mapping) is one of panels[0 .. n_panels) (ascending) are held in panels there
 * (matrix.h OB_LAYOUT_P8; ob_weights_layout).
 */
struct ob_weights {
    const char *lo, *at;
    size_t len;
    const uintptr_t *panels;
    size_t n_panels;
};

/*
 * The cpu route's view of the weights. Decode streams every matrix once a token, and read
 * through the file mapping's 4 KB pages that stream ran at two thirds of the memory's speed (a
 * TLB miss every 64 lines; 20.5 against 30 tok/s at one thread on an AVX-512 Xeon when the
 * same file sat on 2 MB pages). So on the first call the GGUF's tensor data is copied into
 * anonymous memory advised to 2 MB pages (read-only from then on) and every later call shares
 * that copy, until ob_model_close. OB_WEIGHTS chooses: auto (unset; the default) copies when
 * transparent huge pages are not off and the data takes at most half the available memory,
 * copy always does, map never does (*v then reads in place). The copy holds the matrices of
 * the types in panels (bit 1 << type: the types the caller's kernels read faster so; struct
 * ob_kernel_table's panels) in panels where their shape allows (ob_panel_fits): the layer
 * matrices and the output matrix, and so the token embeddings where they are tied to it (a
 * lookup then reads its row back with ob_panel_row); untied embeddings, only ever looked up,
 * stay rows. The first call decides, later ones share its copy whatever they ask, and read
 * each matrix's layout with ob_weights_layout. The bits are the same either way. Fails with
 * OB_EUSAGE for another OB_WEIGHTS value, OB_ENOMEM when a forced copy does not fit (or there
 * is no memory to rearrange it).
 */
int ob_model_weights(const struct ob_model *m, uint64_t panels, struct ob_weights *v);

/* where the view reads p, a pointer into the model's mapping */
static inline const void *ob_weights_at(const struct ob_weights *v, const void *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)v->lo;
    return a - lo < v->len ? v->at + (a - lo) : p;
}

/* the layout the view holds the matrix whose data (in the mapping) is p in */
int ob_weights_layout(const struct ob_weights *v, const void *p);

#endif
