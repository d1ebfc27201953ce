#!/usr/bin/env bash
# tests/run with OB_TEST_JOBS (its header): N files at a time, their lines still in file order
# and the same counts as one at a time; a file marked "# tests/run: alone" runs with nothing
# beside it; one marked "# tests/run: long" starts before the others, its line still in place;
# a failing file's lines are shown; each line gives the file's CPU time beside its wall time;
# a bad OB_TEST_JOBS is a usage error. Made-up test files that log when they start and end, in
# one shared log.
. "$(dirname "$0")/lib.sh"
plan 8
mkdir -p "$T/tree/tests"
cp "$OB_TOP/tests/run" "$T/tree/tests/run"
L=$T/log
# mk NAME SLEEP [LINES...]: a test file that logs "NAME start", sleeps, logs "NAME end", then
# prints LINES (default: a plan of 1 and one ok)
mk() {
    local name=$1 secs=$2
    shift 2
    [ $# -gt 0 ] || set -- '1..1' "ok 1 - $name"
    {
        echo "echo '$name start' >> '$L'"
        echo "sleep $secs"
        echo "echo '$name end' >> '$L'"
        printf 'echo %q\n' "$@"
    } > "$T/tree/tests/$name.sh"
}
mk t0001-a 1.5
mk t0002-b 0.2
mk t0003-c 0.2
sed -i "1i # tests/run: alone (a made-up test)" "$T/tree/tests/t0003-c.sh"
mk t0004-d 0 '1..2' 'ok 1 - fine' 'not ok 2 - broken'
mk t0005-e 0 '1..3' 'ok 1 - one'
# (the shell's own CPU: about half a second)
cat > "$T/tree/tests/t0006-f.sh" <<'EOF'
end=$((SECONDS + 2)); while [ $SECONDS -lt $end ]; do :; done
echo 1..1; echo ok 1 - busy
EOF
mk t0007-g 0.2
sed -i "1i # tests/run: long (a made-up test)" "$T/tree/tests/t0007-g.sh"

: > "$L"
one=$(cd "$T/tree" && env -u OB_TEST_JOBS tests/run); rc1=$?
seq1=$(tr '\n' ' ' < "$L")
: > "$L"
two=$(cd "$T/tree" && OB_TEST_JOBS=2 tests/run); rc2=$?
seq2=$(tr '\n' ' ' < "$L")

[ "$seq1" = "t0007-g start t0007-g end t0001-a start t0001-a end t0002-b start t0002-b end t0003-c start t0003-c end t0004-d start t0004-d end t0005-e start t0005-e end " ]
ok $? "OB_TEST_JOBS unset: one file at a time, the long one first ($seq1)"
# (the two start at once: their lines may come in either order)
[[ $seq2 == "t0007-g start t0001-a start "* || $seq2 == "t0001-a start t0007-g start "* ]]
ok $? "OB_TEST_JOBS=2: the long file g starts first, a beside it ($seq2)"
[[ $seq2 == *" t0002-b end t0001-a end t0003-c start t0003-c end t0004-d "* ||
   $seq2 == *" t0002-b end t0001-a end t0003-c start t0003-c end t0005-e "* ]]
ok $? "OB_TEST_JOBS=2: a and b side by side, c (alone) after both and before d and e ($seq2)"
names() { grep -o '^tests/t[0-9a-z-]*\.sh' <<<"$1" | tr '\n' ' '; }
[ "$(names "$two")" = "tests/t0001-a.sh tests/t0002-b.sh tests/t0003-c.sh tests/t0004-d.sh tests/t0005-e.sh tests/t0006-f.sh tests/t0007-g.sh " ]
ok $? "the lines in file order: $(names "$two")"
[ "$(tail -1 <<<"$one")" = "7 passed, 2 failed, 0 skipped" ] && [ "$(tail -1 <<<"$two")" = "7 passed, 2 failed, 0 skipped" ] &&
    [ $rc1 -eq 1 ] && [ $rc2 -eq 1 ]
ok $? "the same counts and exit status either way ($(tail -1 <<<"$two"), exit $rc2)"
grep -q '^    not ok 2 - broken$' <<<"$two" && grep -q '^tests/t0005-e.sh .*(planned 3, ran 1)$' <<<"$two" &&
    grep -q '^failed: tests/t0004-d.sh tests/t0005-e.sh$' <<<"$two"
ok $? "a failing check and a short plan are shown and named"
cpu() { sed -n "s|^tests/$1\\.sh .* \\([0-9]*\\)s cpu *\\([0-9]*\\)s.*|\\1 \\2|p" <<<"$two"; }
read -r wa ca <<<"$(cpu t0001-a)"; read -r wf cf <<<"$(cpu t0006-f)"
[ "$wa" -ge 1 ] && [ "$ca" -eq 0 ] && [ "$cf" -ge 1 ]
ok $? "wall and CPU seconds: a file that sleeps (${wa}s, cpu ${ca}s), one that spins (${wf}s, cpu ${cf}s)"
out=$(cd "$T/tree" && OB_TEST_JOBS=x tests/run 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$out" = "tests/run: OB_TEST_JOBS=x is not a count" ]
ok $? "OB_TEST_JOBS=x: exit $rc, $out"
