/*
 * q4nx.c — Q4NX matrices times A8 activation rows on the host (the npu-sim route): the scalar
 * row kernel (a loop over ob_dot_q4nx), the per-level table and the threaded driver.
 *
 * The driver splits the n weight rows into chunks that the pool's threads take in any order;
 * a thread computes whole dot products, so the bits depend on neither the thread count nor
 * the number of activation rows (each row is the reference's one-row result).
 */
#include <pthread.h>

#include "1b.h"
#include "host/simd.h"
#include "npu/npu.h"

static void rows_scalar(const void *w, const void *a, size_t as, int nr, int k, float *out)
{
    for (int r = 0; r < nr; r++)
        out[r] = ob_dot_q4nx(w, (const struct ob_act_a8 *)((const char *)a + (size_t)r * as),
                             k / OB_QK4NX);
}

#if !defined(__x86_64__)
ob_q4nx_rows_fn ob_q4nx_rows_avx2(void) { return NULL; }
#endif

ob_q4nx_rows_fn ob_q4nx_rows(int isa)
{
    ob_q4nx_rows_fn f = NULL;
    if (isa >= OB_ISA_AVX2)        /* AVX-512 runs the AVX2 kernel: the bits are the same */
        f = ob_q4nx_rows_avx2();
    return f ? f : rows_scalar;
}

struct job {
    ob_q4nx_rows_fn rows;
    const struct ob_matrix *w;
    const void *x;
    size_t x_stride, ldy;
    int nr, chunk;
    float *y;
};

#define RTILE 64                   /* activation rows kept hot in cache while weights stream */

static void task(void *ctx, int t, int thread)
{
    const struct job *j = ctx;
    const struct ob_matrix *w = j->w;
    int n0 = t * j->chunk, n1 = n0 + j->chunk < w->n ? n0 + j->chunk : w->n;
    float out[OB_Q4NX_MAXR];
    for (int r0 = 0; r0 < j->nr; r0 += RTILE) {
        int r1 = r0 + RTILE < j->nr ? r0 + RTILE : j->nr;
        for (int n = n0; n < n1; n++) {
            const char *wr = (const char *)w->data + (size_t)n * w->row_bytes;
            for (int r = r0; r < r1; r += OB_Q4NX_MAXR) {
                int m = r1 - r < OB_Q4NX_MAXR ? r1 - r : OB_Q4NX_MAXR;
                j->rows(wr, (const char *)j->x + (size_t)r * j->x_stride, j->x_stride, m, w->k,
                        out);
                for (int i = 0; i < m; i++)
                    j->y[(size_t)(r + i) * j->ldy + n] = out[i];
            }
        }
    }
}

int ob_q4nx_matmul(struct ob_pool *pool, int isa, const struct ob_matrix *w, const void *x,
                   size_t x_stride, int nr, float *y, size_t ldy)
{
    if (w->type != OB_Q4NX || w->k % OB_QK4NX)
        return ob_seterr(OB_EUNSUPP, "npu routes multiply Q4NX tiles, not %s weights",
                         ob_type_name(w->type));
    int threads = ob_pool_threads(pool);
    int chunk = w->n / (threads * 8);          /* enough tasks to balance, whole rows each */
    struct job j = {ob_q4nx_rows(isa), w, x, x_stride, ldy, nr, chunk < 4 ? 4 : chunk, y};
    ob_pool_run(pool, task, &j, (w->n + j.chunk - 1) / j.chunk);
    return 0;
}
