#!/usr/bin/env bash
# The contract on the npu-sim route (the Q4NX arithmetic on the host, man/1b.7): for a fixed set
# of requests, the fingerprint of every result (token ids and the float32 bits of every logprob
# and top logprob) is identical across repetition, --parallel 1..16 with the requests in
# different orders, prefill chunk sizes, a cold, warm and partially matching prompt cache,
# thread counts and SIMD levels, as tests/t5000-contract.sh checks for the cpu route. The
# models are Q4NX packs made by 1b-requant from a Q4_K_M qwen3, an f32 llama and a qwen2 with
# q/k/v biases (the bias add after the tile products).
. "$(dirname "$0")/lib.sh"
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
REQ=$OB_TOP/tests/data/contract-requests.jsonl
SHUF=$OB_TOP/tests/data/contract-requests-shuffled.jsonl
cd "$T" || exit 1

1b-synth --preset qwen3-small --vocab 8000 --type q4_k_m --tokenizer "$TOK" -o qwen3.gguf &&
    1b-requant --type q4nx -o qwen3-q4nx qwen3.gguf > /dev/null
1b-synth --preset llama-tiny -o llama.gguf && 1b-requant --type q4nx -o llama-q4nx llama.gguf > /dev/null
1b-synth --preset qwen2-tiny --vocab 8000 --tokenizer "$TOK" -o qwen2.gguf &&
    1b-requant --type q4nx -o qwen2-q4nx qwen2.gguf > /dev/null
models=(qwen3-q4nx llama-q4nx qwen2-q4nx)

isas=(scalar)
best=$("$UNIT/kernels" --best-isa)
[ "$best" = avx2 ] || [ "$best" = avx512 ] && isas+=(avx2)
[ "$best" = avx512 ] && isas+=(avx512)

configs=(
    "rep1:"           "rep2:"
    "par2:--parallel 2"   "par4:--parallel 4"   "par16:--parallel 16"
    "par4shuf:--parallel 4 @shuffled"   "par16shuf:--parallel 16 @shuffled"
    "par3unord:--parallel 3 --unordered"
    "chunk1:--chunk 1"    "chunk7:--chunk 7 --parallel 4"   "chunk64:--chunk 64 --parallel 2"
    "chunkwhole:--chunk 0 --parallel 8"
    "cache4:--cache-slots 4"   "cache8par4:--cache-slots 8 --parallel 4 @shuffled"
    "t1:-t 1"   "t3:-t 3 --parallel 4"
)
for isa in "${isas[@]}"; do configs+=("simd-$isa:%OB_SIMD=$isa --parallel 3"); done

plan $(( ${#models[@]} * (${#configs[@]} + 3) ))
for m in "${models[@]}"; do
    1b-gen -m "$m" -d npu-sim -t 2 < "$REQ" > "$m.base.jsonl" 2> err.txt
    n=$(wc -l < "$m.base.jsonl")
    [ "$n" -eq 15 ] && jq -e -s 'all(.[]; .route == "npu-sim")' "$m.base.jsonl" > /dev/null
    ok $? "$m: baseline run on npu-sim wrote 15 results ($(head -c 200 err.txt))"
    for c in "${configs[@]}"; do
        name=${c%%:*}; args=${c#*:}
        input=$REQ; envs=()
        [[ $args == *@shuffled* ]] && input=$SHUF && args=${args/@shuffled/}
        if [[ $args == %* ]]; then envs=("${args%% *}"); envs=("${envs[0]#%}"); args=${args#* }; fi
        # shellcheck disable=SC2086  # the configuration's options, a word each
        env "${envs[@]}" 1b-gen -m "$m" -d npu-sim -t 2 $args < "$input" > "$m.$name.jsonl" 2> err.txt
        diff=$("$PY" "$OB_TOP/tests/py/fingerprint.py" --diff "$m.base.jsonl" "$m.$name.jsonl" 2>&1)
        ok $? "$m: $name ${envs[*]} $args: every fingerprint identical${diff:+ ($diff)}"
    done
    hits=$(jq -s '[.[] | .cached_tokens] | add' "$m.cache4.jsonl")
    [ "$hits" -gt 0 ]; ok $? "$m: the cache runs reused $hits prompt tokens"
    # a different route: the pack's arithmetic is not the GGUF's (a requantisation apart)
    src=${m%-q4nx}.gguf
    1b-gen -m "$src" -t 2 < "$REQ" > "$m.cpu.jsonl" 2> err.txt
    ! "$PY" "$OB_TOP/tests/py/fingerprint.py" --diff "$m.base.jsonl" "$m.cpu.jsonl" > /dev/null 2>&1
    ok $? "$m: npu-sim on the pack and cpu on its GGUF differ (pack vs GGUF)"
done
