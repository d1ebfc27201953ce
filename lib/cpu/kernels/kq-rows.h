/*
 * kq-rows.h — the K-quants' row loop (the dot entry) and their GEMV entry, the same at every
 * SIMD level: included by kq-LEVEL.c after that level's kq_block (one block against up to
 * OB_MAXR activation rows, 8 int32 of isum and 8 of msum a row), never elsewhere. The
 * reductions, folds and fp16 loads are avx2.h's (exact at either level).
 */
#ifndef OB_KERNELS_KQ_ROWS_H
#define OB_KERNELS_KQ_ROWS_H

/*
 * NW weight rows (ws bytes apart) against NR activation rows (as apart), NW * NR <= OB_MAXR:
 * out[v * NR + r] = dot(w row v, a row r), each the one-row reference's bits. Block b of a
 * product adds into partial b mod 8 (lane b mod 8 of P), which fold8 folds. Two weight rows
 * at once (the GEMV at R = 1) run two independent chains and share the loop's overhead.
 */
AI void kq_rows_g(const uint8_t *w, size_t ws, const uint8_t *a, size_t as, int k, float *out,
                  int T, int NW, int NR)
{
    const int nb = k / 256, NU = NW * NR;
    const size_t bb = kq_bb(T);
    __m256 P[OB_MAXR];
    UNROLL
    for (int u = 0; u < NU; u++)
        P[u] = _mm256_setzero_ps();
    for (int b0 = 0; b0 < nb; b0 += 8) {
        int m = nb - b0 < 8 ? nb - b0 : 8;
        const uint8_t *a0p = a + (size_t)b0 * QB;
        __m256i iv[8][OB_MAXR], mv[8][OB_MAXR];
#pragma GCC unroll 1
        for (int j = 0; j < m; j++)
            UNROLL
            for (int v = 0; v < NW; v++)
                kq_block(w + v * ws + (size_t)(b0 + j) * bb, a0p + j * QB, as, T, NR,
                         iv[j] + v * NR, mv[j] + v * NR);
        if (m <= 4) {
            /* a short group (K = 1024 has 4 blocks): isum and msum share one reduction
             * (lanes 0..3 isum, 4..7 msum) and the epilogue is 4 lanes wide */
#pragma GCC unroll 1
            for (int j = m; j < 4; j++)
                for (int u = 0; u < NU; u++)
                    iv[j][u] = mv[j][u] = _mm256_setzero_si256();
            __m128 dw[OB_MAXR], dm[OB_MAXR];      /* each weight row's scales, once */
            UNROLL
            for (int v = 0; v < NW; v++) {
                const uint8_t *b0p = w + v * ws + (size_t)b0 * bb;
                dw[v] = f16x4_n(b0p + kq_doff(T), bb, m);
                dm[v] = kq_has_min(T) ? f16x4_n(b0p + kq_doff(T) + 2, bb, m) : _mm_setzero_ps();
            }
            UNROLL
            for (int u = 0; u < NU; u++) {
                __m128 da = _mm_castsi128_ps(i32x4_n(a0p + (u % NR) * as, QB, m));
                __m128 v;
                if (kq_has_min(T)) {
                    __m256i h = hsum8(iv[0][u], iv[1][u], iv[2][u], iv[3][u], mv[0][u], mv[1][u],
                                      mv[2][u], mv[3][u]);
                    __m128i is = _mm256_castsi256_si128(h), ms = _mm256_extracti128_si256(h, 1);
                    v = _mm_mul_ps(_mm_mul_ps(dw[u / NR], da), _mm_cvtepi32_ps(is));
                    v = _mm_sub_ps(v, _mm_mul_ps(_mm_mul_ps(dm[u / NR], da), _mm_cvtepi32_ps(ms)));
                } else {
                    __m128i is = hsum4(iv[0][u], iv[1][u], iv[2][u], iv[3][u]);
                    v = _mm_mul_ps(_mm_mul_ps(dw[u / NR], da), _mm_cvtepi32_ps(is));
                }
                P[u] = add_lanes4(P[u], v, m);
            }
            continue;
        }
#pragma GCC unroll 1
        for (int j = m; j < 8; j++)
            for (int u = 0; u < NU; u++)
                iv[j][u] = mv[j][u] = _mm256_setzero_si256();
        __m256 dw[OB_MAXR], dm[OB_MAXR];
        UNROLL
        for (int v = 0; v < NW; v++) {
            const uint8_t *b0p = w + v * ws + (size_t)b0 * bb;
            dw[v] = f16x8_n(b0p + kq_doff(T), bb, m);
            dm[v] = kq_has_min(T) ? f16x8_n(b0p + kq_doff(T) + 2, bb, m) : _mm256_setzero_ps();
        }
        UNROLL
        for (int u = 0; u < NU; u++) {
            __m256i is = hsum8(iv[0][u], iv[1][u], iv[2][u], iv[3][u], iv[4][u], iv[5][u],
                               iv[6][u], iv[7][u]);
            __m256 da = f32x8_n(a0p + (u % NR) * as, QB, m);
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(dw[u / NR], da), _mm256_cvtepi32_ps(is));
            if (kq_has_min(T)) {
                __m256i ms = hsum8(mv[0][u], mv[1][u], mv[2][u], mv[3][u], mv[4][u], mv[5][u],
                                   mv[6][u], mv[7][u]);
                v = _mm256_sub_ps(v, _mm256_mul_ps(_mm256_mul_ps(dm[u / NR], da),
                                                   _mm256_cvtepi32_ps(ms)));
            }
            P[u] = add_lanes(P[u], v, m);
        }
    }
    UNROLL
    for (int u = 0; u < NU; u++)
        out[u] = fold8(P[u]);
}

/* the dot entry: one weight row against NR activation rows */
AI void kq_rows(const void *w, const void *a, size_t as, int k, float *out, int T, int NR)
{
    kq_rows_g(w, 0, a, as, k, out, T, 1, NR);
}

/*
 * The GEMV entry (struct ob_kernel_table's gemv): the dot entry's arithmetic over a range of
 * weight rows, two a call at R = 1 (which the dot entry, one row a call, cannot do), one a call
 * against up to OB_MAXR activation rows from R = 2 on. The activations are the Q8_K rows as
 * they are (prep copies them; no scratch); the weights are prefetched as the dot driver does
 * (kernels.h).
 */
static size_t kqv_prep_bytes(int k, int nr)
{
    return (size_t)nr * (size_t)(k / 256) * QB;
}

static size_t kqv_scratch_bytes(int k)
{
    (void)k;
    return 0;
}

AI void kqv_prep(const void *x, size_t xs, int nr, int k, void *pv, int T)
{
    (void)T;
    size_t rowb = (size_t)(k / 256) * QB;
    for (int r = 0; r < nr; r++)
        memcpy((char *)pv + r * rowb, (const char *)x + r * xs, rowb);
}

AI void kqv_run(const void *w, size_t rb, int n0, int n1, int k, const void *pv, int nr, float *y,
                size_t ldy, void *scratch, int T)
{
    (void)scratch;
    const size_t ast = (size_t)(k / 256) * QB;
    const uint8_t *p = pv;
    ob_pf_task(w, rb, n0, n1);
    int n = n0;
    if (nr == 1)
        for (; n + 2 <= n1; n += 2) {
            ob_pf_row(w, rb, n, n1);
            ob_pf_row(w, rb, n + 1, n1);
            kq_rows_g((const uint8_t *)w + (size_t)n * rb, rb, p, ast, k, y + n, T, 2, 1);
        }
    for (; n < n1; n++) {
        const uint8_t *wn = (const uint8_t *)w + (size_t)n * rb;
        ob_pf_row(w, rb, n, n1);
        for (int r = 0; r < nr; r += OB_MAXR) {
            float out[OB_MAXR];
            int m = nr - r < OB_MAXR ? nr - r : OB_MAXR;
            const uint8_t *a = p + r * ast;
            switch (m) {
            case 1: kq_rows_g(wn, 0, a, ast, k, out, T, 1, 1); break;
            case 2: kq_rows_g(wn, 0, a, ast, k, out, T, 1, 2); break;
            case 3: kq_rows_g(wn, 0, a, ast, k, out, T, 1, 3); break;
            default: kq_rows_g(wn, 0, a, ast, k, out, T, 1, 4); break;
            }
            for (int i = 0; i < m; i++)
                y[(size_t)(r + i) * ldy + n] = out[i];
        }
    }
}

/* the five GEMV entries into a level's table, once it has made them (its GEMM_ENTRIES macro
 * over kqv, names v_q2_k .. v_q6_k) */
#define KQV_SET(t)                                                                              \
    do {                                                                                        \
        GEMV_SET(t, OB_Q2_K, kqv, v_q2_k);                                                      \
        GEMV_SET(t, OB_Q3_K, kqv, v_q3_k);                                                      \
        GEMV_SET(t, OB_Q4_K, kqv, v_q4_k);                                                      \
        GEMV_SET(t, OB_Q5_K, kqv, v_q5_k);                                                      \
        GEMV_SET(t, OB_Q6_K, kqv, v_q6_k);                                                      \
    } while (0)

#endif
