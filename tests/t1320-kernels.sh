#!/usr/bin/env bash
# The cpu kernels bit for bit against their scalar references: every weight type at every ISA
# level the CPU has (and each level forced with OB_SIMD), 1..4 rows per call, random and real
# blocks; activation quantisers; many-row == one-row products; 1, 2, 3, 7 threads.
. "$(dirname "$0")/lib.sh"
models=()
for m in "$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$OB_TOP/.cache/models/gemma-3-270m-q4_k_m.gguf"; do
    [ -f "$m" ] && models+=("$m")
done
out=$("$UNIT/kernels" "${models[@]}" 2>&1); rc=$?
skips=$(grep -E '^ok [0-9]+ - .*# SKIP' <<<"$out")
plan $(( 4 + $(grep -c . <<<"$skips") ))
ok $rc "unit: kernels vs references ($(grep '^ok' <<<"$out" | grep -vc '# SKIP') checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^#' <<<"$out" || true
# the unit's skips (a SIMD level this CPU lacks) are this test's skips, so that tests/run
# applies its policy to them
while IFS= read -r l; do
    [ -n "$l" ] || continue
    d=${l#ok * - }; skip "unit kernels: ${d%% # SKIP*}" "${l##*# SKIP }"
done <<<"$skips"
[ ${#models[@]} -eq 2 ]; ok $? "real blocks from SmolLM2 (Q4_1, Q8_0) and Gemma 3 (Q4_K, Q6_K, Q5_0, Q8_0) were checked" || echo "# run scripts/models smollm2 gemma3"

# the OB_SIMD switch: each level this CPU has can be forced; one it lacks is refused
best=$("$UNIT/kernels" --best-isa)
OB_SIMD=scalar "$UNIT/kernels" --best-isa | grep -qx scalar; ok $? "OB_SIMD=scalar selects the scalar level (best here: $best)"
if [ "$best" != avx512 ]; then
    out=$(OB_SIMD=avx512 "$UNIT/kernels" --best-isa 2>&1); rc=$?
    [ $rc -ne 0 ] && grep -q "supports only" <<<"$out"; ok $? "OB_SIMD=avx512 on a CPU without it is refused ($out)"
else
    out=$(OB_SIMD=bogus "$UNIT/kernels" --best-isa 2>&1); rc=$?
    [ $rc -ne 0 ]; ok $? "OB_SIMD=bogus is refused ($out)"
fi
