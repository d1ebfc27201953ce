#!/usr/bin/env bash
# The batching engine: the in-process barrier (N identical copies in the same steps, R
# rounds, widths 1-8, greedy and sampled: every copy equals the solo run, fingerprints printed),
# teacher forcing, cancellation, max_tokens 0, oversized prompts.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
1b-synth --preset qwen3-small --vocab 8000 --type q4_k_m \
    --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" -o q.gguf
plan 2
for m in "$SHARED/models/stories260K.gguf" q.gguf; do
    out=$("$UNIT/engine" "$m" 2>&1); rc=$?
    ok $rc "$(basename "$m"): engine ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | grep -v '#   round' | head -20 | sed 's/^/# /'
    grep '^ok\|^not ok' <<<"$out" | sed 's/^/#   /'
done
