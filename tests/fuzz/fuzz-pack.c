/*
 * fuzz-pack.c — libFuzzer harness for the Q4NX pack reader (lib/npu/pack.c): the input is a
 * pack's manifest.json, beside the meta.gguf and weights.q4nx of a real pack (a llama-tiny
 * synthetic model through 1b-requant, made once in a temporary directory). The manifest is
 * opened as 1b-load does (every tensor's tiles touched, dequantised row by row) and as a model
 * (ob_model_open: the shapes against the hyper-parameters). Any out-of-bounds read, leak or
 * crash is a bug in lib/npu/pack.c, lib/model.c or lib/hparams.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "1b.h"
#include "quant.h"

static char dir[64], pack[96], manifest[128];

static void setup(void)
{
    struct ob_synth s;
    struct ob_requant_params p = {.type = "q4nx", .n_threads = 1};
    struct ob_requant_summary sum;
    char model[96];
    snprintf(dir, sizeof dir, "/tmp/fuzz-pack.XXXXXX");
    if (!mkdtemp(dir))
        abort();
    snprintf(model, sizeof model, "%s/m.gguf", dir);
    snprintf(pack, sizeof pack, "%s/pack", dir);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", pack);
    if (ob_synth_preset("llama-tiny", &s) || ob_synth_write(&s, model) ||
        ob_requant(model, pack, &p, &sum))
        abort();
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        setup();
        atexit(cleanup);
    }
    FILE *f = fopen(manifest, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    struct ob_pack *p;
    if (ob_pack_open(pack, &p) == 0) {
        volatile float sink = 0;
        float row[4096];
        for (uint64_t i = 0; i < ob_pack_n_tensors(p); i++) {
            const struct ob_pack_tensor *t = ob_pack_tensor_at(p, i);
            if (ob_pack_tensor(p, t->name) != t)
                abort();
            for (uint64_t r = 0; r < t->n && t->k <= 4096; r += 7) {
                ob_dequant_row(OB_Q4NX, (const char *)t->data + r * (t->k / 32 * 20), row,
                               (int64_t)t->k);
                sink += row[t->k - 1];
            }
        }
        uint64_t nan, inf;
        ob_pack_verify(p, &nan, &inf);
        ob_pack_close(p);
    }
    struct ob_model *m;
    if (ob_model_open(pack, &m) == 0)
        ob_model_close(m);
    return 0;
}
