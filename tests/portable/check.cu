/*
 * check.cu — the portable arithmetic check through nvcc (and hipcc, as check.hip): the host
 * side prints the same hash as the C builds; the kernel below makes nvcc compile every
 * OB_INLINE function of lib/arith/ for the GPU (it is compiled, not run: the machine that
 * builds need not have a GPU). tests/t1335-arith-headers.sh checks that it names them all.
 */
#if defined(__HIP__)
#include <hip/hip_runtime.h>        /* threadIdx: hipcc does not include it by itself */
#endif
#include "check.inc"

struct dev_blocks {
    struct ob_block_q4_0 q4_0;
    struct ob_block_q4_1 q4_1;
    struct ob_block_q5_0 q5_0;
    struct ob_block_q5_1 q5_1;
    struct ob_block_q8_0 q8_0;
    struct ob_block_q2_k q2_k;
    struct ob_block_q3_k q3_k;
    struct ob_block_q4_k q4_k;
    struct ob_block_q5_k q5_k;
    struct ob_block_q6_k q6_k;
    struct ob_block_q8_k q8_k;
    struct ob_act_a8 a8;
    struct ob_block_q4nx q4nx;
};

/* x, w: 256 floats; h: 256 halfs (keys and values); out: 1024 floats; scratch: 1024 floats */
__global__ void device_check(float *x, const float *w, uint16_t *h, struct dev_blocks *b,
                             float *out, float *scratch)
{
    int i = threadIdx.x;
    float p32[32], p8[8], m, ll;
    out[i] = ob_expf(x[i]) + ob_logf(x[i] + 2.0f) + ob_silu(x[i]) + ob_rint(x[i]) +
             ob_pow2i(i - 20) + ob_inf() + ob_nan() + ob_fp16_to_f32(h[i]) +
             ob_bf16_to_f32(h[i]) + (float)ob_f32_to_fp16(x[i]) + (float)ob_f32_to_bf16(x[i]) +
             ob_f32_from_bits(ob_f32_bits(x[i])) + ob_attn_scale(i + 1) +
             (float)ob_act_q(x[i], 3.0f) + ob_logprob(x[i], 1.0f, 0.5f) + ob_gelu(x[i]) +
             ob_embd_scale(i + 1) + (float)ob_attn_first_key(i, 7);
    if (i != 0)
        return;
    for (int j = 0; j < 32; j++)
        p32[j] = x[j];
    for (int j = 0; j < 8; j++)
        p8[j] = x[j];
    out[32] = ob_fold32(p32) + ob_fold8(p8);
    out[33] = ob_dot_f32(x, w, 256) + ob_sum_f32(x, 256) + ob_max_f32(x, 256) +
              ob_act_amax(x, 256);
    out[34] = ob_dot_f16(h, x, 256) + ob_dot_bf16(h, x, 256);

    /* rmsnorm whole and in pieces, the add, rope, log-sum-exp, attention */
    ob_rmsnorm(x, w, scratch, 256, 1e-6f);
    ob_rms_apply(x, ob_rms_factor(ob_dot_f32(x, x, 256), 256, 1e-6f), w, scratch + 256, 256);
    ob_add_f32(scratch, scratch + 256, 256);
    ob_geglu(scratch, scratch + 256, 256);
    ob_scale_f32(scratch, ob_embd_scale(640), 256);
    ob_rope(scratch, w, w + 64, 128, 1);
    ob_rope(scratch + 128, w, w + 64, 128, 0);
    ob_logsumexp(scratch, 256, &m, &ll);
    out[35] = m + ll + ob_lse_logl(scratch, 100, m) + ob_lse_sum(scratch, 99, m);
    ob_kv_put(h, scratch, 256);
    ob_attn_head(x, h, h + 64, 128, 2, 64, ob_attn_scale(64), scratch, scratch + 256, out + 64);

    /* scale helpers, dequantisers, activation quantisers, every dot */
    uint8_t sc[8], mn[8], q[12];
    int8_t s3[16];
    for (int j = 0; j < 8; j++)
        ob_k4_scale_min(j, b->q4_k.scales, &sc[j], &mn[j]);
    ob_k4_pack_scales(sc, mn, q);
    for (int k = 0; k < 16; k++)
        s3[k] = (int8_t)ob_q3k_scale(k, b->q3_k.scales);
    ob_q3k_pack_scales(s3, q);
    out[36] = (float)(ob_q5_qh(b->q5_0.qh) & 0xffff) + (float)ob_q4_nib(b->q4_0.qs, 3) +
              (float)ob_q5_bit(b->q5_0.qh, 7) + (float)q[5];
    ob_dequant_f32(x, out + 128);
    ob_dequant_f16(h, out + 129);
    ob_dequant_bf16(h, out + 130);
    ob_dequant_q4_0(&b->q4_0, out + 160);
    ob_dequant_q4_1(&b->q4_1, out + 192);
    ob_dequant_q5_0(&b->q5_0, out + 224);
    ob_dequant_q5_1(&b->q5_1, out + 256);
    ob_dequant_q8_0(&b->q8_0, out + 288);
    ob_dequant_q2_k(&b->q2_k, out + 320);
    ob_dequant_q3_k(&b->q3_k, out + 320);
    ob_dequant_q4_k(&b->q4_k, out + 320);
    ob_dequant_q5_k(&b->q5_k, out + 320);
    ob_dequant_q6_k(&b->q6_k, out + 320);
    ob_dequant_q8_k(&b->q8_k, out + 576);
    ob_quantize_q8k(x, &b->q8_k, 256);
    ob_quantize_a8(x, &b->a8, 32);
    out[40] = ob_blk_q4_0(&b->q4_0, &b->a8) + ob_blk_q4_1(&b->q4_1, &b->a8) +
              ob_blk_q5_0(&b->q5_0, &b->a8) + ob_blk_q5_1(&b->q5_1, &b->a8) +
              ob_blk_q8_0(&b->q8_0, &b->a8);
    out[41] = ob_blk_q2_k(&b->q2_k, &b->q8_k) + ob_blk_q3_k(&b->q3_k, &b->q8_k) +
              ob_blk_q4_k(&b->q4_k, &b->q8_k) + ob_blk_q5_k(&b->q5_k, &b->q8_k) +
              ob_blk_q6_k(&b->q6_k, &b->q8_k);
    out[42] = ob_dot_q4_0(&b->q4_0, &b->a8, 1) + ob_dot_q4_1(&b->q4_1, &b->a8, 1) +
              ob_dot_q5_0(&b->q5_0, &b->a8, 1) + ob_dot_q5_1(&b->q5_1, &b->a8, 1) +
              ob_dot_q8_0(&b->q8_0, &b->a8, 1);
    ob_dequant_q4nx(&b->q4nx, out + 608);
    out[44] = ob_blk_q4nx(&b->q4nx, &b->a8) + ob_dot_q4nx(&b->q4nx, &b->a8, 1);
    out[43] = ob_dot_q2_k(&b->q2_k, &b->q8_k, 1) + ob_dot_q3_k(&b->q3_k, &b->q8_k, 1) +
              ob_dot_q4_k(&b->q4_k, &b->q8_k, 1) + ob_dot_q5_k(&b->q5_k, &b->q8_k, 1) +
              ob_dot_q6_k(&b->q6_k, &b->q8_k, 1);
}

int main(void)
{
    printf("%016llx\n", (unsigned long long)run_checks());
    return 0;
}
