#!/usr/bin/env bash
# The contract (DESIGN.md, man/1b.7): for a fixed set of requests, the fingerprint of every
# result (token ids and the float32 bits of every logprob and top logprob) is identical across
# repetition, --parallel 1..16 with the requests arriving in different orders (so every
# sequence is decoded at many batch widths and positions in the batch), prefill chunk sizes,
# a cold, warm and partially matching prompt cache, thread counts, and SIMD levels. Greedy and
# sampled requests alike. Any difference prints the first differing token. The models: Qwen3-
# and llama-shaped synthetic ones, the trained stories260K, and a Gemma 3-shaped one (Q4_K_M:
# sliding window of 16 keys on two of its three layers, which every request crosses, the
# built-in Gemma turn format for the chat requests). With speculative decoding, by prompt
# lookup (--spec ngram) and by a draft model (--draft: the two synthetic Qwen3 files draft for
# each other, the others for themselves), in the same configurations the whole result records
# are those of plain decoding, and drafts were both accepted and rejected; and so on SmolLM2, a
# real model, editing code.
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

isas=(scalar)
best=$("$UNIT/kernels" --best-isa)
[ "$best" = avx2 ] || [ "$best" = avx512 ] && isas+=(avx2)
[ "$best" = avx512 ] && isas+=(avx512)

# name: extra arguments (and environment) of one configuration
configs=(
    "rep1:"           "rep2:"          "rep3:"          "rep4:"         "rep5:"
    "par2:--parallel 2"   "par3:--parallel 3"   "par4:--parallel 4"
    "par8:--parallel 8"   "par16:--parallel 16"
    "par4shuf:--parallel 4 @shuffled"   "par16shuf:--parallel 16 @shuffled"
    "par3unord:--parallel 3 --unordered"
    "chunk1:--chunk 1"    "chunk7:--chunk 7 --parallel 4"   "chunk64:--chunk 64 --parallel 2"
    "chunk512:--chunk 512"   "chunkwhole:--chunk 0 --parallel 8"
    "cache4:--cache-slots 4"   "cache8par4:--cache-slots 8 --parallel 4 @shuffled"
    "t1:-t 1"   "t2:-t 2"   "t3:-t 3 --parallel 4"
    "spec:--spec ngram"   "spec-par4:--spec ngram --parallel 4"
    "spec-par16:--spec ngram --parallel 16 @shuffled"   "spec-chunk1:--spec ngram --chunk 1"
    "spec-chunk7:--spec ngram --chunk 7 --parallel 4"   "spec-max2:--spec ngram --spec-max 2"
    "spec-cache8par4:--spec ngram --cache-slots 8 --parallel 4 @shuffled"   "spec-t1:--spec ngram -t 1"
    "draft:--draft @D"   "draft-par4:--draft @D --parallel 4"
    "draft-par16:--draft @D --parallel 16 @shuffled"   "draft-chunk1:--draft @D --chunk 1"
    "draft-chunk7:--draft @D --chunk 7 --parallel 4"
    "draft-cache8par4:--draft @D --cache-slots 8 --parallel 4 @shuffled"   "draft-t1:--draft @D -t 1"
)
# the draft model of each model (--draft @D)
declare -A draft_of=([qwen3-q8_0]=qwen3-q4_k_m [qwen3-q4_k_m]=qwen3-q8_0)
for isa in "${isas[@]}"; do configs+=("simd-$isa:%OB_SIMD=$isa --parallel 3"); done
for isa in "${isas[@]}"; do configs+=("spec-simd-$isa:%OB_SIMD=$isa --spec ngram --parallel 3"); done
for isa in "${isas[@]}"; do configs+=("draft-simd-$isa:%OB_SIMD=$isa --draft @D --parallel 3"); done
# each spec-* and draft-* configuration is a plain one with --spec ngram (and --spec-max) or
# --draft added: its whole records must be that one's, all but the timing and, with several
# sequences at once, cached_tokens (both follow the schedule, which speculation changes)
declare -A plain_of

plan $(( ${#models[@]} * (${#configs[@]} + 4) + 3 ))
spec_seen='' draft_seen=''
for m in "${models[@]}"; do
    d=${draft_of[$m]:-$m}.gguf
    1b-gen -m "$m.gguf" -t 2 < "$REQ" > "$m.base.jsonl" 2> err.txt
    n=$(wc -l < "$m.base.jsonl")
    [ "$n" -eq 15 ]; ok $? "$m: baseline run wrote 15 results ($(head -c 200 err.txt))"
    for c in "${configs[@]}"; do
        name=${c%%:*}; args=${c#*:}
        [[ $name == spec* || $name == draft* ]] || plain_of["k:$args"]=$name
        args=${args/@D/$d}
        input=$REQ; envs=()
        [[ $args == *@shuffled* ]] && input=$SHUF && args=${args/@shuffled/}
        if [[ $args == %* ]]; then envs=("${args%% *}"); envs=("${envs[0]#%}"); args=${args#* }; fi
        # shellcheck disable=SC2086  # the configuration's options, a word each
        env "${envs[@]}" 1b-gen -m "$m.gguf" -t 2 $args < "$input" > "$m.$name.jsonl" 2> err.txt
        diff=$("$PY" "$OB_TOP/tests/py/fingerprint.py" --diff "$m.base.jsonl" "$m.$name.jsonl" 2>&1)
        rc=$?
        # speculation: the whole records are those of plain decoding
        if [ $rc = 0 ] && [[ $name == spec* || $name == draft* ]]; then
            # what tells how the run went, not what a request received: its timing, and with
            # several sequences at once cached_tokens (speculation takes fewer steps, so a
            # request may be admitted before the one whose prompt it shares has finished)
            sched='del(.timing)'
            [[ $args == *--parallel* ]] && sched='del(.timing, .cached_tokens)'
            key=${c#*:}; key=${key/--spec ngram/}; key=${key/--draft @D/}; key=$(sed -E 's/--spec-max [0-9]+//; s/  +/ /g; s/^ //; s/ $//' <<<"$key")
            p=${plain_of["k:$key"]}
            if [ -z "$p" ]; then
                rc=1; diff="no plain configuration '$key' to compare with"
            elif ! cmp -s <(jq -c "$sched" "$m.$p.jsonl") <(jq -c "$sched" "$m.$name.jsonl"); then
                rc=1; diff="the records differ from $p's beyond ${sched#del}"
            fi
        fi
        ok $rc "$m: $name ${envs[*]} $args: every fingerprint identical${diff:+ ($diff)}"
    done
    # speculation was exercised: drafts accepted and drafts rejected (1b-gen --verbose; with
    # --spec-fixed, so that a loaded machine's timed costs cannot leave too few drafts to see)
    1b-gen -m "$m.gguf" -t 2 --spec ngram --spec-fixed --verbose < "$REQ" 2> v.txt > v.jsonl
    read -r drafted accepted < <(sed -n 's/.*speculation: \([0-9]*\) drafted, \([0-9]*\) accepted.*/\1 \2/p' v.txt)
    cmp -s <(jq -c 'del(.timing)' "$m.base.jsonl") <(jq -c 'del(.timing)' v.jsonl) && [ "${drafted:-0}" -gt 0 ]
    ok $? "$m: --spec ngram drafted ${drafted:-?} tokens, accepted ${accepted:-?}"
    [ "${accepted:-0}" -gt 0 ] && spec_seen+=" accepted:$m"
    [ "${accepted:-0}" -lt "${drafted:-0}" ] && spec_seen+=" rejected:$m"
    1b-gen -m "$m.gguf" -t 2 --draft "$d" --spec-fixed --verbose < "$REQ" 2> v.txt > v.jsonl
    read -r drafted accepted < <(sed -n 's/.*speculation: \([0-9]*\) drafted, \([0-9]*\) accepted.*/\1 \2/p' v.txt)
    cmp -s <(jq -c 'del(.timing)' "$m.base.jsonl") <(jq -c 'del(.timing)' v.jsonl) && [ "${drafted:-0}" -gt 0 ]
    ok $? "$m: --draft $d drafted ${drafted:-?} tokens, accepted ${accepted:-?}"
    [ "${accepted:-0}" -gt 0 ] && draft_seen+=" accepted:$m"
    [ "${accepted:-0}" -lt "${drafted:-0}" ] && draft_seen+=" rejected:$m"
    # the warm runs did use the cache
    hits=$(jq -s '[.[] | .cached_tokens] | add' "$m.cache4.jsonl")
    [ "$hits" -gt 0 ]; ok $? "$m: the cache runs reused $hits prompt tokens"
done
[[ $spec_seen == *accepted:* ]] && [[ $spec_seen == *rejected:* ]]
ok $? "prompt lookup: drafts both accepted and rejected (${spec_seen# })"
[[ $draft_seen == *accepted:* ]] && [[ $draft_seen == *rejected:* ]]
ok $? "draft models: drafts both accepted and rejected (${draft_seen# })"

# a real model where drafts are taken: SmolLM2 on bench/spec's three kinds (code editing,
# extraction, a story), 3 at once, with and without --spec ngram: the same whole records
M=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$M" ]; then
    1b-gen -m "$M" -t 2 --parallel 3 < "$OB_TOP/bench/spec-prompts.jsonl" > smol.plain.jsonl
    1b-gen -m "$M" -t 2 --parallel 3 --spec ngram --spec-fixed --verbose < "$OB_TOP/bench/spec-prompts.jsonl" \
        > smol.spec.jsonl 2> v.txt
    read -r drafted accepted < <(sed -n 's/.*speculation: \([0-9]*\) drafted, \([0-9]*\) accepted.*/\1 \2/p' v.txt)
    [ "$(wc -l < smol.plain.jsonl)" = 3 ] &&
        cmp -s <(jq -c 'del(.timing)' smol.plain.jsonl) <(jq -c 'del(.timing)' smol.spec.jsonl) &&
        [ "${accepted:-0}" -gt 0 ] && [ "$accepted" -lt "$drafted" ]
    ok $? "SmolLM2, code editing, extraction and a story, --parallel 3: --spec ngram writes plain decoding's records (${accepted:-?} of ${drafted:-?} drafts accepted)"
else
    skip "SmolLM2 with --spec ngram" "run scripts/models"
fi
