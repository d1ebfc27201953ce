/*
 * 1b-synth — write a synthetic model: seeded random weights with the tensor layout, metadata
 * and tokenizer of a real architecture (qwen3, qwen2, llama, gemma3). For tests and benchmarks.
 *
 *   1b-synth [--preset NAME] [shape options] [--type MIX] [--seed N] [--tokenizer FILE]
 *            [--no-chat-template] -o OUT
 *   1b-synth --list-types
 *
 * Exit status as in 1b(7): 0 ok, 2 usage, 3 bad tokenizer file, 5 other failure.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "1b.h"
#include "cli.h"

#define PROG "1b-synth"

enum {
    OPT_PRESET = 256, OPT_ARCH, OPT_VOCAB, OPT_EMBD, OPT_LAYERS, OPT_HEADS, OPT_KV_HEADS,
    OPT_HEAD_DIM, OPT_FF, OPT_CTX, OPT_TYPE, OPT_SEED, OPT_TOKENIZER, OPT_TIED, OPT_UNTIED,
    OPT_NO_CHAT_TEMPLATE, OPT_LIST_TYPES,
};

static const struct ob_option options[] = {
    {"preset", OPT_PRESET, "NAME", "start from a preset: qwen3-tiny (default), qwen3-small, qwen2-tiny, llama-tiny, qwen3-0.6b, gemma3-tiny, gemma3-270m"},
    {"arch", OPT_ARCH, "ARCH", "architecture: qwen3, qwen2, llama, gemma3"},
    {"vocab", OPT_VOCAB, "N", "vocabulary size (a Qwen vocabulary is cut or padded to N)"},
    {"embd", OPT_EMBD, "N", "embedding width"},
    {"layers", OPT_LAYERS, "N", "number of layers"},
    {"heads", OPT_HEADS, "N", "attention heads"},
    {"kv-heads", OPT_KV_HEADS, "N", "key/value heads"},
    {"head-dim", OPT_HEAD_DIM, "N", "dimension of one head"},
    {"ff", OPT_FF, "N", "feed-forward width"},
    {"ctx", OPT_CTX, "N", "training context length written to the metadata"},
    {"type", OPT_TYPE, "MIX", "weight type of the matrices (f32, q8_0, q4_k, ...) or a K-quant mix (q4_k_m, ...), as 1b-requant's (default: the preset's)"},
    {"list-types", OPT_LIST_TYPES, NULL, "list what --type takes, one a line, and exit"},
    {"seed", OPT_SEED, "N", "random seed (default 1)"},
    {"tokenizer", OPT_TOKENIZER, "FILE", "Qwen tokenizer.json for qwen2/qwen3 (default $OB_QWEN_TOKENIZER)"},
    {"tied", OPT_TIED, NULL, "output projection shares the token embedding"},
    {"untied", OPT_UNTIED, NULL, "separate output projection"},
    {"no-chat-template", OPT_NO_CHAT_TEMPLATE, NULL, "write no chat template (chat messages to the model are refused)"},
    {"output", 'o', "FILE", "where to write the model (required)"},
    OB_OPT_ROWS_SHARED,
    {0},
};

int main(int argc, char **argv)
{
    struct ob_synth s;
    const char *out = NULL, *preset = "qwen3-tiny";
    bool list_types = false;
    struct ob_cmdline cl = {PROG, PROG " [options] -o FILE",
                            "Write a synthetic model with seeded random weights and a real "
                            "architecture's layout and tokenizer.",
                            options};
    /* the preset is applied first, whatever its position, then every other option over it */
    struct {
        int c;
        const char *arg;
    } *given = calloc((size_t)argc + 1, sizeof *given);
    if (!given) {
        fprintf(stderr, PROG ": out of memory\n");
        return OB_EXIT_FAILURE;
    }
    int c, n_given = 0;
    while ((c = ob_cmdline_next(&cl, argc, argv)) != -1) {
        if (c == OPT_PRESET)
            preset = optarg;
        else
            given[n_given++] = (typeof(*given)){c, optarg};
    }
    if (!cl.stop && !cl.bad && ob_synth_preset(preset, &s)) {
        fprintf(stderr, PROG ": --preset: %s\n", ob_errmsg());
        cl.bad = true;
    }
    s.tokenizer = getenv("OB_QWEN_TOKENIZER");
    for (int i = 0; i < n_given && !cl.stop && !cl.bad; i++) {
        const char *arg = given[i].arg;
        switch (given[i].c) {
        case OPT_ARCH: s.arch = arg; break;
        case OPT_VOCAB: cl.bad = !ob_opt_u32("vocab", arg, &s.n_vocab); break;
        case OPT_EMBD: cl.bad = !ob_opt_u32("embd", arg, &s.n_embd); break;
        case OPT_LAYERS: cl.bad = !ob_opt_u32("layers", arg, &s.n_layer); break;
        case OPT_HEADS: cl.bad = !ob_opt_u32("heads", arg, &s.n_head); break;
        case OPT_KV_HEADS: cl.bad = !ob_opt_u32("kv-heads", arg, &s.n_head_kv); break;
        case OPT_HEAD_DIM: cl.bad = !ob_opt_u32("head-dim", arg, &s.head_dim); break;
        case OPT_FF: cl.bad = !ob_opt_u32("ff", arg, &s.n_ff); break;
        case OPT_CTX: cl.bad = !ob_opt_u32("ctx", arg, &s.n_ctx); break;
        case OPT_TYPE: s.mix = arg; break;
        case OPT_SEED: cl.bad = !ob_opt_u64("seed", arg, 0, INT64_MAX, &s.seed); break;
        case OPT_TOKENIZER: s.tokenizer = arg; break;
        case OPT_TIED: s.tied = true; break;
        case OPT_UNTIED: s.tied = false; break;
        case OPT_NO_CHAT_TEMPLATE: s.no_chat_template = true; break;
        case OPT_LIST_TYPES: list_types = true; break;
        case 'o': out = arg; break;
        }
    }
    free(given);
    if (cl.stop)
        return cli_answer(&cl);
    if (!cl.bad && list_types)
        return cli_list_types(&cl, false);
    if (!cl.bad && optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        cl.bad = true;
    }
    if (!cl.bad && !out) {
        fprintf(stderr, PROG ": no output file (-o FILE)\n");
        cl.bad = true;
    }
    if (cl.bad) {
        if (cl.msg[0])
            cli_bad(&cl);
        fprintf(stderr, "usage: " PROG " [options] -o FILE  (see " PROG " --help)\n");
        return OB_EXIT_USAGE;
    }
    /* the output's place is checked before the model is made (the writer creates it beside
     * PATH and renames it at the end) */
    struct stat st;
    char *dir = strdup(out);
    int e = dir ? 0 : ob_seterr(OB_ENOMEM, "out of memory");
    if (!e && stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        e = ob_seterr(OB_EIO, "%s: is a directory", out);
    else if (!e && access(dirname(dir), W_OK | X_OK) != 0)
        e = ob_seterr(OB_EIO, "%s: %s", out, strerror(errno));
    free(dir);
    /* the library's messages name the file they are about */
    if (e || (e = ob_synth_write(&s, out))) {
        fprintf(stderr, PROG ": %s\n", ob_errmsg());
        return ob_exit_status(e);
    }
    return 0;
}
