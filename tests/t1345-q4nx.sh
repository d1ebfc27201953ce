#!/usr/bin/env bash
# The Q4NX tile (lib/arith/q4nx.h) and the npu routes' host kernels (lib/npu/): the dequantiser
# and quantiser (grids come back bit for bit; Q4_1 and Q4_K values lose only bf16's rounding),
# the row kernel of every ISA level this CPU has against ob_dot_q4nx bit for bit (hard steps
# and zeros among random tiles), many-row products equal to one-row ones for 1, 2, 3 and 7
# threads (bin/unit/q4nx).
. "$(dirname "$0")/lib.sh"
out=$("$UNIT/q4nx" 2>&1); rc=$?
skips=$(grep -E '^ok [0-9]+ - .*# SKIP' <<<"$out")
plan $(( 1 + $(grep -c . <<<"$skips") ))
ok $rc "unit: Q4NX format and kernels ($(grep '^ok' <<<"$out" | grep -vc '# SKIP') checks)" ||
    grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
# the unit's skips (a SIMD level this CPU lacks) are this test's, so tests/run's policy applies
while IFS= read -r l; do
    [ -n "$l" ] || continue
    d=${l#ok * - }; skip "unit q4nx: ${d%% # SKIP*}" "${l##*# SKIP }"
done <<<"$skips"
