/*
 * forward.c — the transformer forward pass, written once against the backend ops (backend.h).
 *
 * Per layer (llama, qwen2, qwen3):
 *   XN = rmsnorm(X) * attn_norm
 *   Q, K, V = Wq XN (+bq), Wk XN (+bk), Wv XN (+bv)
 *   Q, K = rope(qk_norm(Q, K))           (qk_norm only where the model has it: qwen3)
 *   cache[seq][pos] = K, V
 *   ATT = attention(Q, cache[seq][0..pos])   (grouped: query head h uses kv head h / group)
 *   X += Wo ATT
 *   XN = rmsnorm(X) * ffn_norm
 *   X += Wdown (silu(Wgate XN) * (Wup XN))
 * then logits = Woutput (rmsnorm(X) * output_norm) for the rows that ask for them.
 *
 * Gemma 3 (hparams.c gives the sources), where it differs:
 *   X = embedding * sqrt(n_embd)                                        (embed)
 *   Q, K = rope(qk_norm(Q, K)), the rope base of the layer's kind        (qk_rope)
 *   ATT = attention over the sliding window on local layers             (attention)
 *   X += rmsnorm(Wo ATT) * post_attention_norm
 *   X += rmsnorm(Wdown (gelu(Wgate XN) * (Wup XN))) * post_ffw_norm    (geglu)
 * and the output projection is the token embedding (tied).
 */
#include "backend.h"

int ob_forward_layer(const struct ob_be_ops *o, struct ob_be *be, const struct ob_hparams *hp,
                     int l)
{
    int e;
    if ((e = o->rmsnorm(be, l, OB_W_ATTN_NORM, OB_BX, OB_BXN)) ||
        (e = o->matmul(be, l, OB_W_Q, OB_BXN, OB_BQ)) ||
        (e = o->matmul(be, l, OB_W_K, OB_BXN, OB_BK)) ||
        (e = o->matmul(be, l, OB_W_V, OB_BXN, OB_BV)) ||
        (e = o->qk_rope(be, l)) ||
        (e = o->kv_store(be, l)) ||
        (e = o->attention(be, l)) ||
        (e = o->matmul(be, l, OB_W_O, OB_BATT, OB_BOUT)) ||
        (hp->post_norms && (e = o->rmsnorm(be, l, OB_W_POST_ATTN_NORM, OB_BOUT, OB_BOUT))) ||
        (e = o->add(be, OB_BX, OB_BOUT)) ||
        (e = o->rmsnorm(be, l, OB_W_FFN_NORM, OB_BX, OB_BXN)) ||
        (e = o->matmul(be, l, OB_W_GATE, OB_BXN, OB_BGATE)) ||
        (e = o->matmul(be, l, OB_W_UP, OB_BXN, OB_BUP)) ||
        (e = hp->ffn_act == OB_ACT_GELU ? o->geglu(be) : o->swiglu(be)) ||
        (e = o->matmul(be, l, OB_W_DOWN, OB_BGATE, OB_BOUT)) ||
        (hp->post_norms && (e = o->rmsnorm(be, l, OB_W_POST_FFN_NORM, OB_BOUT, OB_BOUT))) ||
        (e = o->add(be, OB_BX, OB_BOUT)))
        return e;
    return 0;
}

int ob_forward(const struct ob_be_ops *o, struct ob_be *be, const struct ob_model *m,
               const struct ob_batch *b, const int32_t *rows, int nrows, float *out32,
               double *out64)
{
    const struct ob_hparams *hp = &m->hp;
    int e;
    if ((e = o->begin(be, b)) || (e = o->embed(be)))
        return e;
    for (int l = 0; l < (int)hp->n_layer; l++)
        if ((e = o->layer ? o->layer(be, l) : ob_forward_layer(o, be, hp, l)))
            return e;
    return nrows > 0 ? o->logits(be, rows, nrows, out32, out64) : 0;
}
