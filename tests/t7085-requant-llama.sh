#!/usr/bin/env bash
# 1b-requant against a real llama.cpp llama-quantize (optional: OB_LLAMA_QUANTIZE names a
# llama-quantize binary built by hand; none is ever part of 1b):
#  - the mixes (q3_k_s .. q5_k_m) choose, tensor by tensor, the types llama-quantize chooses
#    for the file types of those names, on a tied qwen3, an untied llama and one whose rows
#    are 64 wide (every fallback), and on SmolLM2 (rows of 576) where it is present; the plain
#    types equal llama-quantize --pure's;
#  - where ggml's quantiser is the classic one (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) every tensor's
#    bytes are llama-quantize's;
#  - on SmolLM2, q4_k_m and q8_0 from both, scored teacher-forced on the cpu route against the
#    float64 ref route of the original: the distances are printed, and 1b's mean |dlogp| is at
#    most 1.25 times llama-quantize's.
. "$(dirname "$0")/lib.sh"
LQ=${OB_LLAMA_QUANTIZE:-}
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
SMOL=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -z "$LQ" ] || [ ! -x "$LQ" ]; then
    plan 1
    skip "llama-quantize comparison" "optional toolchain: set OB_LLAMA_QUANTIZE to a llama-quantize binary"
    exit 0
fi
MIXES="q3_k_s q3_k_m q3_k_l q4_k_s q4_k_m q5_k_s q5_k_m"
PURE="q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k f16"
plan 7
cd "$T" || exit 1

1b-synth --preset qwen3-small --layers 8 --vocab 4000 --type f32 --tokenizer "$TOK" -o qwen3.gguf
1b-synth --preset llama-tiny --layers 8 --embd 256 --ff 512 -o llama.gguf
1b-synth --preset llama-tiny --layers 3 -o narrow.gguf

types_of() { 1b-load --tensors "$1" | jq -r 'select(.tensor) | "\(.tensor) \(.type)"' | sort; }
# llama-quantize's name of a type: K types alone are Q2_K..Q6_K (q3_k, q4_k, q5_k are its
# aliases of the _M mixes, so --pure makes them plain)
same_types() {   # MODEL: every mix and type, 1b's choices against llama-quantize's
    local m=$1 t bad=""
    for t in $MIXES $PURE; do
        local pure=""; [[ " $PURE " == *" $t "* ]] && pure=--pure
        "$LQ" --allow-requantize $pure "$m" "l-$t.gguf" "${t^^}" 2 > "l-$t.log" 2>&1 ||
            { bad+="$t(llama-quantize failed) "; continue; }
        1b-requant --force --type "$t" -o "o-$t.gguf" "$m" > /dev/null 2> "o-$t.err" ||
            { bad+="$t(1b-requant: $(head -c 100 "o-$t.err")) "; continue; }
        diff <(types_of "l-$t.gguf") <(types_of "o-$t.gguf") > "d-$t.txt" || bad+="$t($(grep '^[<>]' "d-$t.txt" | head -2 | tr '\n' ' ')) "
    done
    [ -z "$bad" ]; ok $? "$(basename "$m"): every tensor's type equals llama-quantize's for $MIXES and --pure $PURE${bad:+: $bad}"
}
same_types qwen3.gguf
same_types llama.gguf
same_types narrow.gguf

# the classic quantisers write llama-quantize's bytes
bad=""
for t in q8_0 q4_0 q4_1 q5_0 q5_1; do
    "$LQ" --pure qwen3.gguf "c-$t.gguf" "${t^^}" 2 > /dev/null 2>&1 &&
        1b-requant --type "$t" -o "p-$t.gguf" qwen3.gguf > /dev/null &&
        "$PY" - "c-$t.gguf" "p-$t.gguf" <<'EOF' || bad+="$t "
import sys
import numpy as np
from gguf import GGUFReader
a = {t.name: t for t in GGUFReader(sys.argv[1]).tensors}
b = {t.name: t for t in GGUFReader(sys.argv[2]).tensors}
sys.exit(0 if a.keys() == b.keys() and all(np.array_equal(np.asarray(a[n].data).view(np.uint8),
         np.asarray(b[n].data).view(np.uint8)) for n in a) else 1)
EOF
done
[ -z "$bad" ]; ok $? "q8_0 q4_0 q4_1 q5_0 q5_1: every tensor's bytes are llama-quantize --pure's${bad:+ (not: $bad)}"

if [ ! -f "$SMOL" ]; then
    skip "SmolLM2: types equal llama-quantize's" "model missing (scripts/models smollm2)"
    skip "SmolLM2 q4_k_m: distance to ref" "model missing (scripts/models smollm2)"
    skip "SmolLM2 q8_0: distance to ref" "model missing (scripts/models smollm2)"
    exit 0
fi
MIXES="q4_k_m q5_k_s" PURE="q8_0" same_types "$SMOL"
head -4 "$OB_TOP/contrib/prompts.jsonl" | sed 's/"max_tokens":64/"max_tokens":32/' > p.jsonl
1b-gen -m "$SMOL" -t 2 < p.jsonl > cpu.jsonl && 1b-logprobs -m "$SMOL" -d ref -t 2 < cpu.jsonl > ref.jsonl
for t in q4_k_m q8_0; do
    1b-logprobs -m "o-$t.gguf" -t 2 < cpu.jsonl > "ours-$t.jsonl" &&
        1b-logprobs -m "l-$t.gguf" -t 2 < cpu.jsonl > "llama-$t.jsonl"
    read -r om on < <(1b-agree --json - ref.jsonl "ours-$t.jsonl" | jq -r '.pairs[0] | "\(.max_abs_dlogp) \(.mean_abs_dlogp)"')
    read -r lm ln < <(1b-agree --json - ref.jsonl "llama-$t.jsonl" | jq -r '.pairs[0] | "\(.max_abs_dlogp) \(.mean_abs_dlogp)"')
    echo "# SmolLM2 $t, teacher-forced against ref on the original: 1b-requant max $om mean $on; llama-quantize max $lm mean $ln"
    awk -v a="$on" -v b="$ln" 'BEGIN { exit !(a <= 1.25 * b) }'
    ok $? "SmolLM2 $t: 1b-requant's mean |dlogp| $on is at most 1.25 x llama-quantize's $ln"
done
