#!/usr/bin/env bash
# The batching engine: the in-process barrier (N identical copies in the same steps, R
# rounds, widths 1-8, greedy and sampled: every copy equals the solo run, fingerprints printed),
# teacher forcing, cancellation, max_tokens 0, oversized prompts; speculative decoding against
# plain decoding; and rows that cannot be scored (a model with one non-finite weight): every request ends once, with the reason.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
1b-synth --preset qwen3-small --vocab 8000 --type q4_k_m \
    --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" -o q.gguf
plan 8
for m in "$SHARED/models/stories260K.gguf" q.gguf; do
    out=$("$UNIT/engine" "$m" 2>&1); rc=$?
    ok $rc "$(basename "$m"): engine ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | grep -v '#   round' | head -20 | sed 's/^/# /'
    grep '^ok\|^not ok' <<<"$out" | sed 's/^/#   /'
done

# speculative decoding (tests/unit/spec.c): rollback on its own, drafts from the test (all
# rejected, all accepted, a stop string and a stop token inside an accepted run, max_tokens and
# the context crossed) and from prompt lookup: every request receives plain decoding's bits
for m in "$SHARED/models/stories260K.gguf" q.gguf; do
    out=$("$UNIT/spec" "$m" 2>&1); rc=$?
    ok $rc "$(basename "$m"): speculation ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
    grep '^ok\|^not ok\|^#   ' <<<"$out" | sed 's/^/#   /'
done

# bench/spec runs (untimed: the smallest case once): every kind and width, both modes, the
# first copy's bits the same with and without speculation
1b-synth --preset llama-tiny -o llama.gguf
out=$("$BIN/bench/spec" -m llama.gguf -t 1 --widths 1,2 --reps 1 --gen 24 \
    --prompts "$OB_TOP/bench/spec-prompts.jsonl" --json 2>&1)
[ "$(jq -s 'length' <<<"$out")" = 6 ] && jq -e -s 'all(.same and .plain_tps > 0 and .spec_tps > 0)' <<<"$out" > /dev/null
ok $? "bench/spec: 3 kinds x widths 1, 2, plain and speculating, the same bits" || sed 's/^/# /' <<<"$out" | head -8
out=$("$BIN/bench/spec" -m llama.gguf --draft llama.gguf -t 1 --widths 1 --reps 1 --gen 24 \
    --prompts "$OB_TOP/bench/spec-prompts.jsonl" --json 2>&1)
[ "$(jq -s 'length' <<<"$out")" = 3 ] &&
    jq -e -s 'all(.same and .mode == "draft" and .spec_tps > 0) and (map(.drafted) | add) > 0' <<<"$out" > /dev/null
ok $? "bench/spec --draft: 3 kinds, the model as its own draft (which soon stops paying: few drafts), the same bits" || sed 's/^/# /' <<<"$out" | head -8

# stories260K with one weight made non-finite, as a hostile file may hold (1b-load accepts
# both): a NaN in output_norm.weight (every logit NaN) and 3e38 in output.weight (token 0's
# logit +Inf in some rows only)
hostile_models
for m in nan.gguf big.gguf; do
    out=$("$UNIT/engine-fail" "$m" 2>&1); rc=$?
    ok $rc "$m: forced multi-row jobs that fail to score end once, with the reason ($(grep -c '^ok' <<<"$out") checks)" ||
        grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
    grep '^ok\|^not ok' <<<"$out" | sed 's/^/#   /'
done
