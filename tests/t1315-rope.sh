#!/usr/bin/env bash
# The RoPE tables of lib/rope.c, computed without libm (double-double + - * / only):
#  - bin/unit/rope: theta against glibc's pow, and every entry of the tables of the models the
#    tests use and of bases 1e4 and 1e6 up to 40960 positions bitwise equal to the float64 libm
#    recipe the tables had (glibc 2.36's pow, cos and sin are correctly rounded on all of
#    them); cos 0 = 1, sin 0 = +0; prefix property;
#  - tests/py/rope_oracle.py: 3000 sampled entries (last positions and smallest angles among
#    them) equal the correctly rounded values from exact decimal arithmetic at 80 digits;
#  - lib/rope.o calls nothing from libm.
. "$(dirname "$0")/lib.sh"
plan 3

out=$("$UNIT/rope" 2>&1); rc=$?
grep -q '^not ok' <<<"$out" && rc=1
ok $rc "unit: rope tables ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'

"$UNIT/rope" sample 300 1315 > "$T/samples" 2> "$T/samples.err"
out=$("$PY" "$OB_TOP/tests/py/rope_oracle.py" < "$T/samples" 2>&1); rc=$?
ok $rc "3000 entries equal an exact decimal oracle ($(tail -1 <<<"$out"))" ||
    { head -5 <<<"$out"; head -3 "$T/samples.err"; } | sed 's/^/# /'

# the object the library links: only allocation, memcpy and the error helper
allowed=' malloc free memcpy ob_seterr '
extra=$(nm -u "$OB_TOP/lib/rope.o" | awk '{print $2}' | while read -r s; do
    [[ $allowed == *" $s "* ]] || printf '%s ' "$s"; done)
[ -n "$(nm "$OB_TOP/lib/rope.o" 2>/dev/null)" ] && [ -z "$extra" ]
ok $? "lib/rope.o needs nothing but$allowed(libm: none)${extra:+; also: $extra}"
