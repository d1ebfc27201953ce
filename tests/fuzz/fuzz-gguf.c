/*
 * fuzz-gguf.c — libFuzzer harness for the GGUF reader: parse a buffer, then touch everything a
 * command would touch (every metadata value as JSON, every tensor's bytes, typed getters), read
 * the hyper-parameters and their checks as 1b-load does, and decode the first row of every
 * tensor with the kernels' block layouts, so that UBSan sees a tensor the reader let through
 * misaligned (general.alignment = 1 once did). Any out-of-bounds read, misaligned load, leak
 * or crash is a bug in lib/gguf.c or lib/hparams.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "1b.h"
#include "quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ob_gguf *g;
    /* copy so that ASan sees reads past the end of exactly `size` bytes */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    if (ob_gguf_open_mem(buf, size, &g) == 0) {
        volatile uint64_t sink = 0;
        for (uint64_t i = 0; i < ob_gguf_n_kv(g); i++) {
            const struct ob_gguf_kv *kv = ob_gguf_kv_at(g, i);
            cJSON *j = ob_gguf_value_json(&kv->val);
            char *s = j ? cJSON_PrintUnformatted(j) : NULL;
            if (s)
                sink += strlen(s);
            free(s);
            cJSON_Delete(j);
            if (ob_gguf_get(g, kv->key) != &kv->val)
                abort();
            uint64_t u;
            char *str;
            if (ob_gguf_get_u64(g, kv->key, &u) == 0)
                sink += u;
            if (ob_gguf_get_str(g, kv->key, &str) == 0)
                free(str);
        }
        for (uint64_t i = 0; i < ob_gguf_n_tensors(g); i++) {
            const struct ob_gguf_tensor *t = ob_gguf_tensor_at(g, i);
            const uint8_t *p = t->data;
            for (uint64_t k = 0; k < t->nbytes; k += 61)
                sink += p[k];
            if (t->nbytes)
                sink += p[t->nbytes - 1];
            if (ob_gguf_tensor(g, t->name) != t)
                abort();
            /* the reader promises each tensor aligned to its blocks (malloc'd buf: 16) */
            uint32_t bs = ob_type_size(t->type), align = bs & -bs;
            if ((uintptr_t)p % (align > 8 ? 8 : align))
                abort();
            if (ob_dequant_supported(t->type) && t->ne[0] <= 4096) {
                float row[4096];
                ob_dequant_row(t->type, p, row, (int64_t)t->ne[0]);
            }
        }
        struct ob_hparams hp;
        ob_hparams_read(g, &hp);
        (void)sink;
        ob_gguf_close(g);
    }
    free(buf);
    return 0;
}
