#!/usr/bin/env bash
# GGUF values 1b must refuse: each out-of-range hyper-parameter, special-token id, alignment
# or unsupported feature, written into a copy of stories260K by tests/unit/gguf-edit, makes
# 1b-load (and 1b-gen, which opens the model for inference) exit 3 with one line that names the
# key or tensor. Values that are merely unusual still load, and so do the real models.
. "$(dirname "$0")/lib.sh"
plan 59
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1

# refused: EDIT... | substring of the message
refused() {
    local want=$1; shift
    "$UNIT/gguf-edit" "${SRC:-$S}" bad.gguf "$@" || { ok 1 "gguf-edit $*"; return; }
    local out rc
    out=$(1b-load bad.gguf 2>&1 >/dev/null); rc=$?
    [ $rc -eq 3 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -qF -- "$want" <<<"$out" &&
        grep -q '^1b-load: bad.gguf: ' <<<"$out"
    ok $? "$* refused, exit 3, naming $want ($rc: $out)"
}

refused "general.alignment = 1" general.alignment=u32:1
refused "general.alignment = 2" general.alignment=u32:2
refused "tokenizer.ggml.bos_token_id = 600" tokenizer.ggml.bos_token_id=u32:600
refused "tokenizer.ggml.eos_token_id = 512" tokenizer.ggml.eos_token_id=u32:512
refused "tokenizer.ggml.unknown_token_id = 1000" tokenizer.ggml.unknown_token_id=u32:1000
refused "tokenizer.ggml.padding_token_id = 512" tokenizer.ggml.padding_token_id=i32:512
refused "tokenizer.ggml.seperator_token_id = 4000000000" tokenizer.ggml.seperator_token_id=u32:4000000000
refused "tokenizer.ggml.eot_token_id = 70000" tokenizer.ggml.eot_token_id=u32:70000
refused "tokenizer.ggml.fim_pre_token_id = 512" tokenizer.ggml.fim_pre_token_id=u64:512
refused "tokenizer.ggml.eom_token_id is string" tokenizer.ggml.eom_token_id=str:2
refused "tokenizer.ggml.bos_token_id is missing" -tokenizer.ggml.bos_token_id
refused "tokenizer.ggml.add_eos_token = true" tokenizer.ggml.add_eos_token=bool:1
refused "llama.rope.dimension_count = 0" llama.rope.dimension_count=u32:0
refused "llama.rope.dimension_count = 7" llama.rope.dimension_count=u32:7
refused "llama.rope.dimension_count = 16" llama.rope.dimension_count=u32:16
refused "llama.attention.layer_norm_rms_epsilon = inf" llama.attention.layer_norm_rms_epsilon=f32:inf
refused "llama.attention.layer_norm_rms_epsilon = 1e+30" llama.attention.layer_norm_rms_epsilon=f32:1e30
refused "llama.attention.layer_norm_rms_epsilon = nan" llama.attention.layer_norm_rms_epsilon=f32:nan
refused "llama.rope.freq_base = inf" llama.rope.freq_base=f32:inf
refused "llama.rope.freq_base = inf" llama.rope.freq_base=f64:1e300
refused "llama.rope.freq_base = 0.5" llama.rope.freq_base=f32:0.5
refused "llama.rope.scaling.type = 'yarn'" llama.rope.scaling.type=str:yarn
refused "llama.rope.scaling.factor = 4" llama.rope.scaling.type=str:linear llama.rope.scaling.factor=f32:4
refused "llama.rope.scale_linear = 2" llama.rope.scale_linear=f32:2
refused "tensor 'rope_freqs.weight'" +@rope_freqs.weight=output_norm.weight
refused "tensor 'blk.0.attn_output.bias' has no part in" +@blk.0.attn_output.bias=output_norm.weight
refused "llama.expert_count = 8" llama.expert_count=u32:8
refused "llama.attention.causal = false" llama.attention.causal=bool:0
refused "llama.context_length = 0" llama.context_length=u32:0
refused "llama.attention.head_count_kv = 16" llama.attention.head_count_kv=u32:16
refused "llama.attention.head_count_kv = 0" llama.attention.head_count_kv=u32:0
refused "llama.attention.head_count_kv = 3 does not divide llama.attention.head_count = 8" llama.attention.head_count_kv=u32:3
refused "llama.embedding_length = 65 is not a multiple of llama.attention.head_count" llama.embedding_length=u32:65
refused "llama.attention.key_length: head dimension 512" llama.attention.key_length=u32:512
refused "llama.attention.value_length = 4" llama.attention.value_length=u32:4
refused "llama.feed_forward_length" llama.feed_forward_length=u32:171
refused "tensor 'blk.4.attn_q.weight' is in layer 4 but llama.block_count = 4" llama.block_count=u32:4
refused "tensor 'blk.5.attn_norm.weight' is missing" llama.block_count=u32:6
refused "llama.vocab_size = 511" llama.vocab_size=u32:511
refused "general.architecture is not a short name" general.architecture=str:$'ll\xffama'

# gemma3 (a synthetic one: window 16, layer pattern 3): soft-capping is not implemented; the
# local rope base is checked like the global one; the post norms are in every layer, and no
# other architecture may carry them
1b-synth --preset gemma3-tiny -o g.gguf
SRC=g.gguf refused "gemma3.final_logit_softcapping = 30: logit soft-capping" gemma3.final_logit_softcapping=f32:30
SRC=g.gguf refused "gemma3.attn_logit_softcapping = 50" gemma3.attn_logit_softcapping=f32:50
SRC=g.gguf refused "gemma3.rope.freq_base_swa = 0.5" gemma3.rope.freq_base_swa=f32:0.5
SRC=g.gguf refused "gemma3.attention.sliding_window" gemma3.attention.sliding_window=str:16
SRC=g.gguf refused "tensor 'blk.1.post_ffw_norm.weight' is missing" -@blk.1.post_ffw_norm.weight
SRC=g.gguf refused "tensor 'blk.0.attn_q_norm.weight' is missing (gemma3 normalises q and k)" \
    -@blk.0.attn_q_norm.weight -@blk.1.attn_q_norm.weight -@blk.2.attn_q_norm.weight \
    -@blk.0.attn_k_norm.weight -@blk.1.attn_k_norm.weight -@blk.2.attn_k_norm.weight
refused "tensor 'blk.0.post_attention_norm.weight' has no part in 1b's llama forward pass" \
    +@blk.0.post_attention_norm.weight=blk.0.attn_norm.weight
out=$(1b-load g.gguf | jq -c '.hparams | [.sliding_window, .global_layers, .rope_base_swa, .ffn_act]')
[ "$out" = '[16,[2],10000,"gelu"]' ]; ok $? "gemma3: window 16, layer 2 global (pattern 3), local rope base 10000 by default ($out)"
"$UNIT/gguf-edit" g.gguf g2.gguf -gemma3.attention.sliding_window_pattern gemma3.rope.freq_base_swa=f32:20000 gemma3.block_count=u32:3
out=$(1b-load g2.gguf | jq -c '.hparams | [.global_layers, .rope_base_swa]')
[ "$out" = '[[],20000]' ]; ok $? "gemma3: default pattern 6 (no global layer among 3), rope.freq_base_swa read ($out)"
"$UNIT/gguf-edit" g.gguf g3.gguf gemma3.attention.sliding_window=u32:0 gemma3.final_logit_softcapping=f32:0
out=$(1b-load g3.gguf | jq -c '.hparams | [.sliding_window, .global_layers]')
[ "$out" = '[0,[0,1,2]]' ] && echo '{"id":"a","prompt":"Once","max_tokens":2}' | 1b-gen -m g3.gguf > /dev/null
ok $? "gemma3: sliding_window 0 is no window (every layer global), soft-capping 0 is none: loads and runs ($out)"

# the same refusals from 1b-gen, which opens the model for inference (1b-gen used to run these:
# misaligned loads, every prompt without BOS, epsilon inf, no yarn)
for ed in general.alignment=u32:1 tokenizer.ggml.bos_token_id=u32:600 \
          llama.attention.layer_norm_rms_epsilon=f32:inf llama.rope.scaling.type=str:yarn; do
    "$UNIT/gguf-edit" "$S" bad.gguf "$ed"
    out=$(echo '{"id":"a","prompt":"Once","max_tokens":2}' | 1b-gen -m bad.gguf 2>&1 >/dev/null); rc=$?
    [ $rc -eq 3 ] && grep -q "^1b-gen: bad.gguf: .*${ed%%=*}" <<<"$out"
    ok $? "1b-gen refuses $ed (exit $rc: $out)"
done

# unusual but valid: loads and runs
accepted() {
    "$UNIT/gguf-edit" "$S" good.gguf "$@" &&
        echo '{"id":"a","prompt":"Once","max_tokens":2}' | 1b-gen -m good.gguf > /dev/null
    ok $? "$* accepted"
}
accepted general.alignment=u32:4
accepted tokenizer.ggml.padding_token_id=i32:-1 tokenizer.ggml.eot_token_id=u32:4294967295
accepted llama.rope.scaling.type=str:none llama.rope.scaling.factor=f32:8
accepted llama.rope.scaling.type=str:linear llama.rope.scaling.factor=f32:1 llama.context_length=u32:4000000000

# real and synthetic models still load
models="$S"
for p in qwen3-tiny qwen2-tiny llama-tiny; do
    1b-synth --preset "$p" --vocab 2000 --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" -o "$p.gguf"
    models="$models $p.gguf"
done
for m in "$OB_TOP"/.cache/models/*.gguf; do [ -f "$m" ] && models="$models $m"; done
bad=""
for m in $models; do 1b-load "$m" > /dev/null || bad="$bad $m"; done
[ -z "$bad" ]; ok $? "every model loads:$(for m in $models; do printf ' %s' "${m##*/}"; done)${bad:+ (refused:$bad)}"
