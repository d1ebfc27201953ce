/*
 * a8v-rows.h — the GEMV entries' row loop for the 32-value nibble formats, the same at every
 * SIMD level: included by a8-LEVEL.c after that level's struct a8v, a8v_group and fold8 (the
 * only level-specific parts), never elsewhere.
 */
#ifndef OB_KERNELS_A8V_ROWS_H
#define OB_KERNELS_A8V_ROWS_H

/*
 * NW weight rows (rb bytes apart) against NR prepared rows (gs groups apart), NW * NR <=
 * OB_MAXR: y[r * ldy + v] = dot(weight row v, row r). Each product takes the same groups in
 * the same order whatever NW is; two weight rows at once (R = 1) run two independent chains.
 */
AI void a8v_rows(const uint8_t *w, size_t rb, const struct a8v *g, size_t gs, int nb, float *y,
                 size_t ldy, int kind, int NW, int NR)
{
    const size_t bb = a8_bb(kind);
    __m256 P[OB_MAXR];
    UNROLL
    for (int u = 0; u < NW * NR; u++)
        P[u] = _mm256_setzero_ps();
    int b0 = 0;
    for (; b0 + 8 <= nb; b0 += 8, g++)
        UNROLL
        for (int v = 0; v < NW; v++)
            a8v_group(w + v * rb + b0 * bb, g, gs, P + v * NR, 8, kind, NR);
    if (b0 < nb)                         /* the last 1..7 blocks */
        UNROLL
        for (int v = 0; v < NW; v++)
            a8v_group(w + v * rb + b0 * bb, g, gs, P + v * NR, nb - b0, kind, NR);
    UNROLL
    for (int v = 0; v < NW; v++)
        UNROLL
        for (int r = 0; r < NR; r++)
            y[r * ldy + v] = fold8(P[v * NR + r]);
}

AI void a8v_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr,
                float *y, size_t ldy, void *scratch, int kind)
{
    (void)scratch;
    const int nb = k / 32;
    const size_t gs = (size_t)(nb + 7) / 8;
    const struct a8v *p = pv;
    ob_pf_task(w, rb, n0, n1);           /* the dot path's prefetch (kernels.h) */
    int n = n0;
    /* at R = 1 two weight rows a call for Q4_0 and Q5_0 (bench/kernels R = 1 from memory, an
     * AVX-512 Xeon, interleaved runs: 81-88 -> 88-97 % and 82-89 -> 90-96 % of the streaming
     * read at AVX-512, AVX2 about even); Q4_1 and Q5_1, whose min term takes more registers,
     * ran 3-5 % slower */
    if (nr == 1 && !a8_has_m(kind))
        for (; n + 2 <= n1; n += 2) {
            ob_pf_row(w, rb, n, n1);
            ob_pf_row(w, rb, n + 1, n1);
            a8v_rows((const uint8_t *)w + (size_t)n * rb, rb, p, gs, nb, y + n, ldy, kind, 2, 1);
        }
    for (; n < n1; n++) {
        const uint8_t *wn = (const uint8_t *)w + (size_t)n * rb;
        ob_pf_row(w, rb, n, n1);
        for (int r = 0; r < nr; r += OB_MAXR) {
            const struct a8v *g = p + (size_t)r * gs;
            float *yr = y + (size_t)r * ldy + n;
            switch (nr - r) {
            case 1: a8v_rows(wn, 0, g, gs, nb, yr, ldy, kind, 1, 1); break;
            case 2: a8v_rows(wn, 0, g, gs, nb, yr, ldy, kind, 1, 2); break;
            case 3: a8v_rows(wn, 0, g, gs, nb, yr, ldy, kind, 1, 3); break;
            default: a8v_rows(wn, 0, g, gs, nb, yr, ldy, kind, 1, 4); break;
            }
        }
    }
}

#endif
