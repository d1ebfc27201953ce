#!/usr/bin/env bash
# Every reader of JSON lines (1b-gen's records, 1b-logprobs' results and --text lines, 1b-agree's
# results) under one rule: a line longer than --max-line, a NUL byte, or a line that memory
# cannot hold is an error naming FILE:LINE with its exit status (3, 3, 5; 1b-agree: 2), never
# the end of input; every record before it is written, none after it (--keep-going: the rest of
# the bad line is skipped and reading goes on); /dev/zero is refused at its first byte instead
# of filling memory; --max-line takes K, M and G and refuses what is not a size.
. "$(dirname "$0")/lib.sh"
plan 15
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf

printf '%s\n' '{"id":"first","prompt":"Once","max_tokens":2}' '{"id":"last","prompt":"Once","max_tokens":2}' > two.jsonl
1b-gen -m "$S" -t 1 two.jsonl > res.jsonl || exit 1
# FILE: line 1 good, line 2 of 5000 bytes, line 3 good
big() { head -1 "$1"; head -c 5000 /dev/zero | tr '\0' x; echo; tail -1 "$1"; }
big two.jsonl > gen-in.jsonl
big res.jsonl > res-in.jsonl
printf 'Once upon a time\n%5000s\nThere was\n' x > text-in.txt
ids() { jq -r .id "$1" 2>/dev/null | tr '\n' ' '; }

# a line past the limit: exit 3, one line naming FILE:2, the first result written, not the last
bad=""
for c in "1b-gen -m $S -t 1 gen-in.jsonl" "1b-logprobs -m $S -t 1 res-in.jsonl" "1b-logprobs -m $S -t 1 --text text-in.txt"; do
    $c --max-line 4K > out.jsonl 2> err.txt; rc=$?
    f=${c##* }
    [ $rc -eq 3 ] && [ "$(cat err.txt)" = "${c%% *}: $f:2: a line longer than 4096 bytes (the limit: --max-line)" ] &&
        [ "$(jq -s length out.jsonl)" = 1 ] || bad="$bad [${c%% *} $f: exit $rc, $(head -1 err.txt), $(ids out.jsonl)]"
done
1b-agree --max-line 4K res.jsonl res-in.jsonl > out.txt 2> err.txt; rc=$?
[ $rc -eq 2 ] && [ "$(cat err.txt)" = "1b-agree: res-in.jsonl:2: a line longer than 4096 bytes (the limit: --max-line)" ] &&
    ! grep -q verdict out.txt || bad="$bad [1b-agree: exit $rc, $(head -1 err.txt)]"
[ -z "$bad" ]; ok $? "a line past --max-line: exit 3 (1b-agree 2), FILE:2 named, what came before written${bad:+:$bad}"

# --keep-going: that line skipped (the rest of it read and dropped), the next one read
bad=""
for c in "1b-gen -m $S -t 1 gen-in.jsonl" "1b-logprobs -m $S -t 1 res-in.jsonl" "1b-logprobs -m $S -t 1 --text text-in.txt"; do
    $c --max-line 4K --keep-going > out.jsonl 2> err.txt; rc=$?
    [ $rc -eq 3 ] && [ "$(wc -l < err.txt)" = 1 ] && [ "$(jq -s length out.jsonl)" = 2 ] ||
        bad="$bad [${c%% *}: exit $rc, $(ids out.jsonl)]"
done
[ -z "$bad" ]; ok $? "--keep-going skips the long line and reads the next (exit 3 at the end)${bad:+:$bad}"

# the limit is on the line, not on the input: a line of exactly the limit is read
n=$(head -1 two.jsonl | wc -c)
1b-gen -m "$S" -t 1 --max-line $((n - 1)) two.jsonl > out.jsonl; rc=$?
[ $rc -eq 0 ] && [ "$(ids out.jsonl)" = "first last " ]; ok $? "a line of exactly --max-line bytes is read (exit $rc)"

# empty lines (the first included) are no records and no text, and cost nothing
printf '\n\nOnce upon a time\n\n' > blank.txt
(echo; cat two.jsonl) > blank.jsonl
1b-logprobs -m "$S" -t 1 --text blank.txt > out.jsonl 2> err.txt && [ "$(jq -r .text out.jsonl)" = "Once upon a time" ] &&
    1b-gen -m "$S" -t 1 blank.jsonl > out2.jsonl 2>> err.txt && [ "$(ids out2.jsonl)" = "first last " ]
ok $? "an empty first line: skipped by --text and by records ($(head -1 err.txt))"

# a NUL byte is refused where it is read: /dev/zero costs one byte, not all of memory
bad=""
for c in "1b-gen -m $S -t 1" "1b-logprobs -m $S -t 1" "1b-logprobs -m $S -t 1 --text"; do
    # shellcheck disable=SC2086  # a command line, a word each
    timeout 30 $c /dev/zero > out.jsonl 2> err.txt; rc=$?
    [ $rc -eq 3 ] && [ "$(cat err.txt)" = "${c%% *}: /dev/zero:1: a NUL byte at byte 1 of the line" ] ||
        bad="$bad [$c: exit $rc, $(head -1 err.txt)]"
done
timeout 30 1b-agree res.jsonl /dev/zero > /dev/null 2> err.txt; rc=$?
[ $rc -eq 2 ] && [ "$(cat err.txt)" = "1b-agree: /dev/zero:1: a NUL byte at byte 1 of the line" ] ||
    bad="$bad [1b-agree: exit $rc, $(head -1 err.txt)]"
[ -z "$bad" ]; ok $? "/dev/zero as input: refused at its first byte, exit 3 (1b-agree 2)${bad:+:$bad}"
(head -1 two.jsonl; printf '{"id":"n\0"}\n'; tail -1 two.jsonl) | 1b-gen -m "$S" -t 1 --keep-going > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(cat err.txt)" = "1b-gen: -:2: a NUL byte at byte 9 of the line" ] && [ "$(ids out.jsonl)" = "first last " ]
ok $? "--keep-going after a NUL byte: the rest of its line dropped, the next line read ($(head -1 err.txt))"

# a line that memory cannot hold: exit 5 (1b-agree 2), FILE:LINE named, what came before
# written; never "end of input" with exit 0. The address-space limit is the command's own
# footprint (read off /proc while it waits on a FIFO) plus 300 MB; the line is 400 MB.
peak() {
    rm -f ff; mkfifo ff
    "$@" ff > /dev/null 2>&1 & local p=$!
    exec 7> ff
    sleep 1
    awk '/VmPeak/ {print $2}' "/proc/$p/status"
    exec 7>&-
    wait $p
}
huge() { head -1 "$1"; head -c 400000000 /dev/zero | tr '\0' x; echo; tail -1 "$1"; }
bad=""
for c in "1b-gen -m $S -t 1" "1b-logprobs -m $S -t 1"; do
    # shellcheck disable=SC2086  # (as above)
    kb=$(peak $c)
    in=two.jsonl; [ "${c%% *}" = 1b-logprobs ] && in=res.jsonl
    (ulimit -v $((kb + 300000)); huge $in | $c --max-line 1G > out.jsonl 2> err.txt); rc=$?
    [ $rc -eq 5 ] && [ "$(wc -l < err.txt)" = 1 ] && grep -q "^${c%% *}: -:2: out of memory reading a line of more than" err.txt &&
        [ "$(ids out.jsonl)" = "first " ] || bad="$bad [${c%% *}: exit $rc ($kb kB), $(head -1 err.txt), $(ids out.jsonl)]"
done
kb=$(peak 1b-agree res.jsonl)
(ulimit -v $((kb + 300000)); huge res.jsonl | 1b-agree --max-line 1G res.jsonl - > out.txt 2> err.txt); rc=$?
[ $rc -eq 2 ] && grep -q "^1b-agree: -:2: out of memory reading a line" err.txt && ! grep -q verdict out.txt ||
    bad="$bad [1b-agree: exit $rc, $(head -1 err.txt)]"
[ -z "$bad" ]; ok $? "a line memory cannot hold: exit 5 (1b-agree 2), named, the records before it written${bad:+:$bad}"

# the default is 256M, and --max-line takes K, M and G suffixes
1b-gen --help | grep -q -- '--max-line BYTES .*(default 256M)'; ok $? "--help gives the default (256M)"
bad=""
for v in 0 -1 1.5 4X 17G "" K; do
    1b-gen -m "$S" --max-line "$v" < /dev/null > /dev/null 2> err.txt; rc=$?
    [ $rc -eq 2 ] && grep -q "^1b-gen: --max-line: '$v' is not a size from 1 to 17179869184 bytes" err.txt || bad="$bad '$v'($rc)"
done
[ -z "$bad" ]; ok $? "--max-line 0, -1, 1.5, 4X, 17G, empty, K: usage errors (exit 2)${bad:+:$bad}"
bad=""
for v in 1k 1K 1m 1M 1g 16G 17179869184; do
    1b-gen -m "$S" --max-line "$v" < two.jsonl > /dev/null 2> err.txt || bad="$bad $v"
done
[ -z "$bad" ]; ok $? "--max-line 1k, 1K, 1m, 1M, 1g, 16G and 2^34: taken${bad:+:$bad}"
1b-gen -m "$S" -t 1 --max-line 1k gen-in.jsonl > /dev/null 2> err.txt
grep -q "longer than 1024 bytes" err.txt; ok $? "K is 1024 ($(head -1 err.txt))"

# a duplicate key in a record or a result is refused by every reader (exit 3; 1b-agree 2)
printf '%s\n' '{"id":"d","prompt":"Once","max_tokens":2,"max_tokens":4096}' > dup.jsonl
1b-gen -m "$S" -t 1 dup.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ ! -s out.jsonl ] &&
    [ "$(cat err.txt)" = '1b-gen: dup.jsonl:1: the key "max_tokens" appears twice in the same object (refused: JSON readers differ on which value counts)' ]
ok $? "1b-gen: a record with max_tokens twice is refused, exit 3 ($(head -1 err.txt))"
head -1 res.jsonl | sed 's/^{"id":"first"/{"id":"first","id":"other"/' > dup-res.jsonl
1b-logprobs -m "$S" -t 1 dup-res.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && grep -q 'dup-res.jsonl:1: the key "id" appears twice' err.txt
ok $? "1b-logprobs: a result with id twice is refused, exit 3 ($(head -1 err.txt))"
head -1 res.jsonl | sed 's/"logprob":/"logprob":0,"logprob":/' > dup-lp.jsonl
1b-agree res.jsonl dup-lp.jsonl > out.txt 2> err.txt; rc=$?
[ $rc -eq 2 ] && grep -q 'dup-lp.jsonl:1: the key "logprob" appears twice in the object at tokens\[0\]' err.txt && ! grep -q verdict out.txt
ok $? "1b-agree: a result with a token's logprob twice is refused, exit 2 ($(head -1 err.txt))"

# JSON nested past cJSON's limit is named as such, not as invalid JSON
printf '{"id":"deep","prompt":"a","x":%s%s}\n' "$(printf '[%.0s' $(seq 1000))" "$(printf ']%.0s' $(seq 1000))" > deep.jsonl
1b-gen -m "$S" -t 1 deep.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(cat err.txt)" = "1b-gen: deep.jsonl:1: JSON nested more than 1000 deep at byte 1030 (the nesting limit)" ]
ok $? "1000 arrays in a record (1001 levels): the nesting limit is named ($(head -1 err.txt))"
