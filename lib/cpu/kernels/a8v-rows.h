/*
 * a8v-rows.h — the GEMV entries' row loop for the 32-value nibble formats, the same at every
 * SIMD level: included by a8-LEVEL.c after that level's struct a8v, a8v_group and fold8 (the
 * only level-specific parts), never elsewhere.
 */
#ifndef OB_KERNELS_A8V_ROWS_H
#define OB_KERNELS_A8V_ROWS_H

/* one weight row against NR prepared rows (gs groups apart): y[r * ldy] */
AI void a8v_row(const uint8_t *w, const struct a8v *g, size_t gs, int nb, float *y, size_t ldy,
                int kind, int NR)
{
    const size_t bb = a8_bb(kind);
    __m256 P[OB_MAXR];
    UNROLL
    for (int r = 0; r < NR; r++)
        P[r] = _mm256_setzero_ps();
    int b0 = 0;
    for (; b0 + 8 <= nb; b0 += 8, g++)
        a8v_group(w + b0 * bb, g, gs, P, 8, kind, NR);
    if (b0 < nb)                         /* the last 1..7 blocks */
        a8v_group(w + b0 * bb, g, gs, P, nb - b0, kind, NR);
    UNROLL
    for (int r = 0; r < NR; r++)
        y[r * ldy] = fold8(P[r]);
}

AI void a8v_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                float *y, size_t ldy, void *scratch, int kind)
{
    (void)scratch;
    const int nb = k / 32;
    const size_t gs = (size_t)(nb + 7) / 8;
    const struct a8v *p = pv;
    ob_pf_task(w, rb, n0, n1);           /* the dot path's prefetch (kernels.h) */
    for (int n = n0; n < n1; n++) {
        const uint8_t *wn = (const uint8_t *)w + (size_t)n * rb;
        ob_pf_row(w, rb, n, n1);
        for (int r = 0; r < nr; r += OB_MAXR) {
            const struct a8v *g = p + (size_t)r * gs;
            float *yr = y + (size_t)r * ldy + n;
            switch (nr - r) {
            case 1: a8v_row(wn, g, gs, nb, yr, ldy, kind, 1); break;
            case 2: a8v_row(wn, g, gs, nb, yr, ldy, kind, 2); break;
            case 3: a8v_row(wn, g, gs, nb, yr, ldy, kind, 3); break;
            default: a8v_row(wn, g, gs, nb, yr, ldy, kind, 4); break;
            }
        }
    }
}

#endif
