#!/usr/bin/env bash
# The cpu route's elementwise kernels (exp, expsum, row_max, f16_put, swiglu, geglu) and
# attention at every SIMD level against their references, bit for bit (tests/unit/ops.c);
# bench/attn's smoke run.
. "$(dirname "$0")/lib.sh"
out=$("$UNIT/ops" 2>&1); rc=$?
skips=$(grep -E '^ok [0-9]+ - .*# SKIP' <<<"$out")
plan $(( 2 + $(grep -c . <<<"$skips") ))
ok $rc "unit: elementwise and attention kernels ($(grep '^ok' <<<"$out" | grep -vc '# SKIP') checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^ok' <<<"$out" | grep -v '# SKIP' | sed 's/^/#   /'
# bench/attn runs (its figures are bench/README's; here 64 keys, once): three shapes, a
# figure for each level this CPU runs
out=$("$BIN/bench/attn" 64 1 2>&1)
levels=$(awk '/^model/ {print NF - 3}' <<<"$out")
[ "$(grep -cE "^[A-Z].* [0-9]+ +[0-9]+( +[0-9]+\.[0-9]+){${levels:-0}}\$" <<<"$out")" -eq 3 ] &&
    [ "${levels:-0}" -ge 1 ]
ok $? "bench/attn: three shapes timed at $levels levels" || printf '%s\n' "$out" | head -5 | sed 's/^/# /'
# the unit's skips (a SIMD level this CPU lacks) are this test's skips, so that tests/run
# applies its policy to them
while IFS= read -r l; do
    [ -n "$l" ] || continue
    d=${l#ok * - }; skip "unit ops: ${d%% # SKIP*}" "${l##*# SKIP }"
done <<<"$skips"
