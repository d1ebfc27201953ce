/*
 * npu.h — the npu routes' compute (internal to lib/): Q4NX tiles against A8 activations.
 *
 * The reference is ob_dot_q4nx (lib/arith/q4nx.h): every version here (scalar q4nx.c, AVX2
 * q4nx-avx2.c, chosen by the cpu route's ISA level, OB_SIMD) is bitwise equal to it, which
 * tests/unit/q4nx.c checks. An NPU kernel design is held to the same reference.
 */
#ifndef OB_NPU_H
#define OB_NPU_H

#include <stddef.h>

#include "arith/q4nx.h"
#include "host/pool.h"
#include "matrix.h"

#define OB_Q4NX_MAXR 4             /* activation rows one row call takes (weight reuse) */

/* one weight row w (k values, k/32 tiles) against nr <= OB_Q4NX_MAXR rows of A8 blocks
 * starting at a, a_stride bytes apart: out[r] = ob_dot_q4nx(w, a_r, k / 32) */
typedef void (*ob_q4nx_rows_fn)(const void *w, const void *a, size_t a_stride, int nr, int k,
                                float *out);

/* the level's version (enum ob_isa), or the one below where it has none */
ob_q4nx_rows_fn ob_q4nx_rows(int isa);
ob_q4nx_rows_fn ob_q4nx_rows_avx2(void);          /* NULL where not built (not x86-64) */

/*
 * y[r * ldy + i] = ob_dot_q4nx(row i of w, row r of x) for r < nr, i < w->n: w OB_Q4NX, x rows
 * of w->k / 32 A8 blocks, x_stride bytes apart. Threads take whole weight rows; no result
 * depends on the thread count or on nr.
 */
int ob_q4nx_matmul(struct ob_pool *pool, int isa, const struct ob_matrix *w, const void *x,
                   size_t x_stride, int nr, float *y, size_t ldy);

/* ---- the XRT side (xrt.c; built with make XRT=1) ---------------------------------------------- */

struct ob_device_opts;
struct ob_device_info;
/* Is there an NPU XRT can drive? 0 and its name, or OB_EDEVICE saying what was looked for. */
int ob_npu_xrt_probe(const struct ob_device_opts *d, struct ob_device_info *info);
/* Open device d->index for the npu route: OB_EDEVICE when it cannot run Q4NX tiles. */
int ob_npu_xrt_open(const struct ob_device_opts *d, void **dev);
void ob_npu_xrt_close(void *dev);

#endif
