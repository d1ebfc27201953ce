/*
 * check.cu — the portable arithmetic check through nvcc (and hipcc, as check.hip): the host
 * side prints the same hash as the C builds; the kernel below makes nvcc compile the same
 * functions for the GPU (it is compiled, not run: the machine that builds need not have a GPU).
 */
#if defined(__HIP__)
#include <hip/hip_runtime.h>        /* threadIdx: hipcc does not include it by itself */
#endif
#include "check.inc"

__global__ void device_check(const float *x, const struct ob_block_q4_k *w,
                             const struct ob_block_q8_k *a, float *out)
{
    int i = threadIdx.x;
    out[i] = ob_expf(x[i]) + ob_logf(x[i] + 2.0f) + ob_silu(x[i]);
    if (i == 0) {
        out[32] = ob_dot_q4_k(w, a, 1);
        out[33] = ob_dot_f32(x, x, 32);
    }
}

int main(void)
{
    printf("%016llx\n", (unsigned long long)run_checks());
    return 0;
}
