#!/usr/bin/env bash
# 1b-synth: every preset writes a model that 1b-load and the gguf package accept; the same
# options and seed give the same bytes (and the bytes recorded in tests/golden, so that every
# machine writes the same file); a cut vocabulary stays a consistent BPE; errors.
. "$(dirname "$0")/lib.sh"
plan 18
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
cd "$T" || exit 1

for p in qwen3-tiny qwen3-small qwen2-tiny llama-tiny gemma3-tiny; do
    1b-synth --preset "$p" --tokenizer "$TOK" -o "$p.gguf" &&
        1b-load "$p.gguf" | grep -q '"supported":true'
    ok $? "preset $p writes a model 1b-load accepts"
done

1b-synth --preset llama-tiny -o a.gguf && 1b-synth --preset llama-tiny -o b.gguf
check_same "same seed, same bytes" a.gguf b.gguf
1b-synth --preset llama-tiny --seed 2 -o c.gguf
! cmp -s a.gguf c.gguf; ok $? "another seed, other bytes"
while read -r sum name args; do
    # shellcheck disable=SC2086  # the line's options, a word each
    1b-synth $args --tokenizer "$TOK" -o g.gguf
    got=$(sha256sum g.gguf | cut -d' ' -f1)
    [ "$got" = "$sum" ]; ok $? "$name is byte-identical to the recorded sha256 ($got)"
done < "$OB_TOP/tests/golden/synth.sha256"

if need_python gguf; then
    "$PY" - "$T/qwen3-tiny.gguf" <<'PY'
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
tok = r.fields["tokenizer.ggml.tokens"]
names = [bytes(tok.parts[tok.data[i]]).decode() for i in (0, 151643, 151644, 151645, 151667, 151935)]
assert names == ["!", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "[PAD151935]"], names
assert len(r.fields["tokenizer.ggml.merges"].data) == 151387
assert {t.name for t in r.tensors} >= {"token_embd.weight", "blk.1.attn_k_norm.weight", "blk.1.ffn_down.weight"}
PY
    ok $? "the gguf package reads the real Qwen3 vocabulary, merges and tensors"
else
    skip "the gguf package reads the synthetic model" "python gguf package missing"
fi

1b-synth --vocab 3000 --tokenizer "$TOK" -o cut.gguf
out=$(1b-load cut.gguf)
grep -q '"n_tokens":3000' <<<"$out" && grep -q '"eos":2976' <<<"$out"
ok $? "a cut vocabulary keeps the added tokens, renumbered ($(grep -o '"eos":[0-9]*' <<<"$out"))"

# chat templates: qwen3 the real Qwen3 one (tokenizer_config.json beside tokenizer.json), or
# ChatML from a tokenizer.json alone; llama ChatML with its two tokens at the end of the
# vocabulary; gemma3 none (1b's built-in Gemma 3 turn format); --no-chat-template none at all
names() { local f; for f in "$@"; do 1b-load "$f" | jq -r '.chat_template | .name + (if .builtin then "(builtin)" else "" end)'; done | tr '\n' ' '; }
mkdir alone && cp "$TOK" alone/tokenizer.json
1b-synth --tokenizer alone/tokenizer.json --vocab 3000 -o alone.gguf
got=$(names qwen3-tiny.gguf alone.gguf llama-tiny.gguf gemma3-tiny.gguf)
[ "$got" = "qwen3 chatml chatml gemma(builtin) " ]
ok $? "templates: qwen3 real, tokenizer.json alone ChatML, llama ChatML, gemma3 the built-in ($got)"
for p in qwen3-tiny llama-tiny gemma3-tiny; do
    1b-synth --preset "$p" --tokenizer "$TOK" --no-chat-template -o "none-$p.gguf"
done
got=$(names none-qwen3-tiny.gguf none-llama-tiny.gguf none-gemma3-tiny.gguf)
shape() { 1b-load --tensors "$1" | jq -c 'select(.tensor) | [.tensor, .type, .shape, .bytes]'; }
w=$(1b-load llama-tiny.gguf | jq .memory.weights_bytes)
cmp -s <(shape llama-tiny.gguf) <(shape none-llama-tiny.gguf) &&
    cmp -s <(tail -c "$w" llama-tiny.gguf) <(tail -c "$w" none-llama-tiny.gguf) &&
    [ "$got" = "none none gemma(builtin) " ]
ok $? "--no-chat-template: no template (gemma3 keeps the built-in), the same tensors ($got)"

check_exit 2 "qwen3 without a tokenizer" env -u OB_QWEN_TOKENIZER 1b-synth -o x.gguf
check_exit 2 "an unknown weight type" 1b-synth --preset llama-tiny --type q9_9 -o x.gguf
check_exit 2 "an unknown preset" 1b-synth --preset nope -o x.gguf
