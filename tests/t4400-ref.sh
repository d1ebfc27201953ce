#!/usr/bin/env bash
# The ref route (float64 oracle, lib/ref/backend-ref.c) against an independent float64 numpy forward
# pass (tests/oracle/forward.py) on synthetic llama / qwen2 / qwen3 / gemma3 models (f32, q8_0,
# q4_k_m weights; gemma3-tiny's 40 tokens cross its sliding window of 16) and on the trained
# stories260K; its float64 bits do not depend on the batch, the
# prefill split, the prompt cache, the interleaving of sequences or the thread count
# (tests/unit/ref.c); ob_blas_env pins OPENBLAS_CORETYPE by re-executing with argv intact.
# The cpu route's distance from ref (max and mean |delta logprob| over every position and the
# whole vocabulary) is printed and bounded by what the cpu route's two roundings predict:
#  - float weights: only the fp16 KV cache rounds beyond float32 (relative error <= 2^-11,
#    rms ~2.8e-4 per value), which reaches the logits as ~3e-4 of their scale: gate the mean
#    at 1e-3 x rms(logits) and the max at 1e-2 x rms(logits);
#  - quantised weights: every matmul input is rounded to int8 per block (error uniform in
#    +-d/2, d = amax/127: rms 2.3e-3 amax, ~0.7% of the input's rms for amax/rms ~3); some 15
#    such roundings along a path add in quadrature to ~2.7% of the logit scale: gate the mean
#    at 3e-2 x rms(logits) and the max, a heavy tail, at 10x that.
. "$(dirname "$0")/lib.sh"
plan 28
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
cd "$T" || exit 1

# n ids in [0, v): a fixed LCG, so every machine runs the same tokens
tokens() {
    local n=$1 v=$2 x=12345 out=""
    for ((i = 0; i < n; i++)); do
        x=$(((x * 1103515245 + 12345) % 2147483648))
        out+="${out:+,}$(((x >> 8) % v))"
    done
    echo "$out"
}

1b-synth --preset qwen3-tiny --vocab 4000 --tokenizer "$TOK" -o qwen3-tiny.gguf &&
1b-synth --preset qwen2-tiny --vocab 4000 --tokenizer "$TOK" -o qwen2-tiny.gguf &&
1b-synth --preset llama-tiny -o llama-tiny.gguf &&
1b-synth --preset qwen3-small --vocab 4000 --type q8_0 --tokenizer "$TOK" -o qwen3-small-q8_0.gguf &&
1b-synth --preset qwen3-small --vocab 4000 --type q4_k_m --tokenizer "$TOK" -o qwen3-small-q4_k_m.gguf &&
1b-synth --preset gemma3-tiny -o gemma3-tiny-q8_0.gguf &&
1b-synth --preset gemma3-tiny --type q4_k_m -o gemma3-tiny-q4_k_m.gguf ||
    echo "# 1b-synth failed"
models=("$SHARED/models/stories260K.gguf:512" qwen3-tiny.gguf:4000 qwen2-tiny.gguf:4000
        llama-tiny.gguf:1024 qwen3-small-q8_0.gguf:4000 qwen3-small-q4_k_m.gguf:4000
        gemma3-tiny-q8_0.gguf:1024 gemma3-tiny-q4_k_m.gguf:1024)
have_py=0
need_python numpy gguf && have_py=1

for mv in "${models[@]}"; do
    m=${mv%:*} v=${mv##*:} name=$(basename "${mv%:*}" .gguf)
    toks=$(tokens 40 "$v")
    out=$("$UNIT/ref" check "$m" "$toks" "$name.f64" 2>&1); rc=$?
    ok $rc "$name: ref is batch-, split-, cache- and thread-invariant ($(grep -c '^ok' <<<"$out") checks)" ||
        grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
    grep -E '^ok (1|3) ' <<<"$out" | sed 's/^ok [0-9]* - /#   /'
    if [ $have_py = 1 ]; then
        out=$("$PY" "$OB_TOP/tests/oracle/forward.py" "$m" "$toks" --compare "$name.f64" --bound auto 2>&1); rc=$?
        ok $rc "$name: ref == numpy float64 oracle within the rounding bound: $out" ||
            sed 's/^/# /' <<<"$out" | head -10
    else
        skip "$name: ref vs numpy oracle" "python numpy/gguf missing"
    fi
    out=$("$UNIT/ref" compare "$m" "$toks" 2>&1); rc=$?
    case $name in *q8_0*|*q4_k*) mf=3e-2 xf=3e-1 ;; *) mf=1e-3 xf=1e-2 ;; esac
    [ $rc -eq 0 ] && jq -e --argjson mf $mf --argjson xf $xf \
        '.mean_abs_dlogp <= $mf * .rms_logit and .max_abs_dlogp <= $xf * .rms_logit' <<<"$out" >/dev/null
    ok $? "$name: cpu vs ref: mean |dlogp| <= $mf rms(logit), max <= $xf rms(logit)" || sed 's/^/# /' <<<"$out" | head -10
    echo "#   cpu vs ref: $out"
done

# ob_blas_env: re-exec with OPENBLAS_CORETYPE set, argv intact; a value the user set is kept
# shellcheck disable=SC2016  # '$HOME' is an argument to pass on as it is
out=$(env -u OPENBLAS_CORETYPE timeout 20 "$UNIT/ref" blas "a b" "" "--x=ü" '$HOME' 2>&1); rc=$?
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    [ $rc -eq 0 ] && grep -qx "core Haswell" <<<"$out" && grep -qx "env Haswell" <<<"$out"
    ok $? "OPENBLAS_CORETYPE unset on an AVX2+FMA CPU: set to Haswell before OpenBLAS loads" ||
        sed 's/^/# /' <<<"$out"
else
    skip "OPENBLAS_CORETYPE set to Haswell" "this CPU lacks AVX2 or FMA"
fi
# shellcheck disable=SC2016  # (as above)
printf 'arg[%s]\n' "$UNIT/ref" blas "a b" "" "--x=ü" '$HOME' > want
grep '^arg' <<<"$out" > got
check_same "the re-exec keeps argv exactly" want got
out=$(OPENBLAS_CORETYPE=Sandybridge timeout 20 "$UNIT/ref" blas 2>&1)
grep -qx "core Sandybridge" <<<"$out" && grep -qx "env Sandybridge" <<<"$out"
ok $? "a user's OPENBLAS_CORETYPE is kept" || sed 's/^/# /' <<<"$out"
if command -v strace >/dev/null &&
    out=$(env -u OPENBLAS_CORETYPE strace -f -e trace=execve "$UNIT/ref" blas 2>&1 >/dev/null); then
    n=$(grep -c 'execve("/proc/self/exe"' <<<"$out")
    [ "$n" -le 1 ]; ok $? "at most one re-exec ($n, counted with strace)"
else
    env -u OPENBLAS_CORETYPE timeout 20 "$UNIT/ref" blas >/dev/null 2>&1
    ok $? "no re-exec loop (finished within 20 s; strace not usable here)"
fi
