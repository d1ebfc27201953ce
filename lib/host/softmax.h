/*
 * softmax.h — the host's kernels over a row of logits, with their ISA dispatch: the
 * exponentials, the log-sum-exp's sum, the row's maximum and the tempered logits that sampling
 * (lib/sample.c) runs,
 * whichever route computed the logits. References: ob_expf, ob_lse_sum and ob_max_f32 in
 * lib/arith/arith.h; every version here must equal them bit for bit (tests/unit/ops.c checks
 * them, and tests/unit/sample.c compares the levels through the samplers). Internal to lib/.
 *
 * Thread safety: the kernels are pure functions of their arguments; ob_softmax may be called
 * from any thread.
 */
#ifndef OB_HOST_SOFTMAX_H
#define OB_HOST_SOFTMAX_H

#include <stddef.h>

struct ob_softmax {
    /* y[i] = ob_expf(x[i]) (y may alias x) */
    void (*exp)(const float *x, float *y, size_t n);
    /* ob_lse_sum(z, n, m): the sum of ob_expf(z[i] - m) in the 32-partial shape */
    float (*expsum)(const float *z, size_t n, float m);
    /* ob_max_f32(z, n), n >= 1 (of equal zeros the first); 1 in *bad if some z[i] is NaN or
     * +Inf (the value is then any) */
    float (*row_max)(const float *z, size_t n, int *bad);
    /* y[i] = (z[i] - m) / T, two correctly rounded operations a value (y may alias z): the
     * sampler's tempered logits */
    void (*scale)(const float *z, size_t n, float m, float T, float *y);
};

/* the SIMD row_max's last step: a largest value r of zero (no NaN or +Inf seen) is the row's
 * first zero, its sign ob_max_f32's, found again; any other r is the maximum's one pattern */
static inline float ob_row_max_zero(const float *z, size_t n, float r, int bad)
{
    if (r == 0.0f && !bad)
        for (size_t i = 0; i < n; i++)
            if (z[i] == 0.0f)
                return z[i];
    return r;
}

/* the table of an ISA level (enum ob_isa, host/simd.h); levels without their own entry take
 * the one below */
const struct ob_softmax *ob_softmax(int isa);
void ob_softmax_avx2(struct ob_softmax *t);
void ob_softmax_avx512(struct ob_softmax *t);

#endif
