#!/usr/bin/env bash
# Promise 5 of the contract (man/1b.7) on hrx-sim, the hrx kernels executed on the host: for
# the contract's requests (tests/data/contract-requests.jsonl: greedy and sampled, shared
# prefixes, cache on and off), hrx-sim gives the cpu route's token ids and float32 bits of
# every logprob and top logprob — 1b-agree exits 0 — on stories260K, a synthetic Qwen3 in
# Q8_0 and in Q4_K_M, llama-tiny and gemma3-tiny (Q4_K_M; the embedding scale, post norms,
# GeGLU, the local rope base and a sliding window of 16 keys on two of its three layers, which
# every request crosses); and hrx-sim keeps promises 1-4 itself: its runs at batch widths 4
# and 16 (arrival orders shuffled), prefill chunks of 1, 7 and 512, a warm prompt cache and 1
# or 2 threads, and speculative decoding (--spec ngram, and a draft model on the cpu route
# drafting for the model on hrx-sim, chunks of 7, width 4) all have the cpu baseline's
# fingerprint (gemma3-tiny, to keep the test short: width 16 shuffled, chunks of 7 across the
# window, the warm cache, 1 thread, speculation). Then the other
# in-process commands on hrx-sim: 1b-logprobs scores the cpu route's tokens to the cpu
# route's bits, 1b-batchrep finds one state for copies batched together.
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
REQ=$OB_TOP/tests/data/contract-requests.jsonl
SHUF=$OB_TOP/tests/data/contract-requests-shuffled.jsonl
cd "$T" || exit 1

1b-synth --preset qwen3-small --vocab 8000 --tokenizer "$TOK" -o qwen3-q8_0.gguf
1b-synth --preset qwen3-small --vocab 8000 --type q4_k_m --tokenizer "$TOK" -o qwen3-q4_k_m.gguf
1b-synth --preset llama-tiny -o llama.gguf
1b-synth --preset gemma3-tiny --type q4_k_m -o gemma3.gguf
cp "$SHARED/models/stories260K.gguf" stories.gguf
models=(qwen3-q8_0 qwen3-q4_k_m llama stories gemma3)

# name: extra arguments of an hrx-sim run (all with -t 2 unless they say otherwise)
configs=(
    "par4:--parallel 4"   "par16shuf:--parallel 16 @shuffled"
    "chunk1:--chunk 1"    "chunk7:--chunk 7 --parallel 4"   "chunk512:--chunk 512 --parallel 2"
    "cache4:--cache-slots 4"   "t1:-t 1"
    "spec:--spec ngram --chunk 7 --parallel 4"
    "draft:--draft @D --draft-device cpu --chunk 7 --parallel 4"
)
gemma_configs=" par16shuf chunk7 cache4 t1 spec draft "   # the configurations gemma3 runs
# the draft model of each model (--draft @D): the Qwen3 files of each other, else itself
declare -A draft_of=([qwen3-q8_0]=qwen3-q4_k_m [qwen3-q4_k_m]=qwen3-q8_0)

plan $(( (${#models[@]} - 1) * (${#configs[@]} + 3) + 6 + 3 + 3 ))
for m in "${models[@]}"; do
    1b-gen -m "$m.gguf" -t 2 < "$REQ" > "$m.cpu.jsonl" 2> err.txt
    1b-gen -m "$m.gguf" -t 2 -d hrx-sim < "$REQ" > "$m.sim.jsonl" 2> err.txt; rc=$?
    [ $rc -eq 0 ] && [ "$(wc -l < "$m.sim.jsonl")" -eq 15 ] &&
        [ "$(jq -r .route "$m.sim.jsonl" | sort -u)" = hrx-sim ]
    ok $? "$m: hrx-sim wrote 15 results, exit $rc ($(head -c 200 err.txt))"
    out=$(1b-agree "$m.cpu.jsonl" "$m.sim.jsonl" 2>&1); rc=$?
    ok $rc "$m: 1b-agree cpu hrx-sim exits 0: $(grep -m1 'A-B' <<<"$out" | tr -s ' ')" ||
        sed 's/^/# /' <<<"$out" | head -12
    for c in "${configs[@]}"; do
        name=${c%%:*}; args=${c#*:}; input=$REQ
        args=${args/@D/${draft_of[$m]:-$m}.gguf}
        [ "$m" = gemma3 ] && [[ $gemma_configs != *" $name "* ]] && continue
        [[ $args == *@shuffled* ]] && input=$SHUF && args=${args/@shuffled/}
        [[ $args == *-t\ 1* ]] || args="-t 2 $args"
        # shellcheck disable=SC2086  # the configuration's options, a word each
        1b-gen -m "$m.gguf" -d hrx-sim $args < "$input" > "$m.$name.jsonl" 2> err.txt
        diff=$("$PY" "$OB_TOP/tests/py/fingerprint.py" --diff "$m.cpu.jsonl" "$m.$name.jsonl" 2>&1)
        ok $? "$m: hrx-sim $args: every fingerprint = cpu's${diff:+ ($diff)}"
    done
    hits=$(jq -s '[.[] | .cached_tokens] | add' "$m.cache4.jsonl")
    [ "$hits" -gt 0 ]; ok $? "$m: the warm hrx-sim runs reused $hits prompt tokens"
done

# 1b-logprobs: the cpu route's tokens scored on hrx-sim, at width 4, give the cpu route's bits
m=qwen3-q4_k_m
1b-logprobs -m $m.gguf -d hrx-sim -t 2 --parallel 4 < $m.cpu.jsonl > scored.jsonl 2> err.txt
out=$(1b-agree $m.cpu.jsonl scored.jsonl 2>&1); rc=$?
ok $rc "1b-logprobs -d hrx-sim scores the cpu route's tokens to its bits ($(grep -m1 'A-B' <<<"$out" | tr -s ' '))" ||
    { sed 's/^/# /' <<<"$out" | head -8; head -3 err.txt | sed 's/^/# /'; }
# 1b-batchrep: 6 copies released together, 2 rounds, one state, equal to the copy alone
1b-batchrep -m $m.gguf -d hrx-sim -t 2 --width 6 --rounds 2 --vs-solo --max-tokens 12 \
    --prompt "the sky is blue because" --json rep.json -q 2> err.txt; rc=$?
[ $rc -eq 0 ] && jq -e '.route == "hrx-sim" and .states == 1 and .vs_solo.identical == 12' rep.json > /dev/null
ok $? "1b-batchrep -d hrx-sim: 6 copies x 2 rounds, one state, the solo one, exit $rc ($(jq -r .verdict rep.json 2>/dev/null))" ||
    head -3 err.txt | sed 's/^/# /'
# every route's name in records: hrx-sim
[ "$(jq -r .route scored.jsonl | sort -u)" = hrx-sim ]
ok $? "records name the route hrx-sim"
