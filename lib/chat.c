/*
 * chat.c — chat templates, recognised by what they contain (1b has no Jinja engine: it knows
 * a few template families and renders them in C; anything else is reported by name).
 */
#include <string.h>

#include "1b.h"

static bool has(const char *s, const char *needle)
{
    return strstr(s, needle) != NULL;
}

const char *ob_chat_detect(const char *t)
{
    if (!t || !*t)
        return "none";
    if (has(t, "<|im_start|>")) {
        /* Qwen3: ChatML whose assistant turns may carry a <think> block, switched by the
         * enable_thinking variable */
        if (has(t, "<think>") && has(t, "enable_thinking"))
            return "qwen3";
        return "chatml";
    }
    if (has(t, "<|start_header_id|>") && has(t, "<|eot_id|>"))
        return "llama3";
    if (has(t, "<start_of_turn>"))
        return "gemma";
    if (has(t, "<|user|>") && has(t, "<|end|>"))
        return "phi3";
    if (has(t, "[INST]"))
        return "llama2";
    return "unknown";
}
