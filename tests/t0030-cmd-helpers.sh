#!/usr/bin/env bash
# What the commands share (issue 12, "thin commands"): the library helpers themselves
# (tests/unit/cmd-helpers: the FILE operand loop, a report's output file, the seed option, the
# in-process route's defaults), and the same behaviour from every command that uses them: one
# seed range (2^53, as records have), the shared option parsers' messages, and the same
# statuses and messages for FILE operands that cannot be opened, in process and with --url.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_s PID_s  # set by name (printf -v), which shellcheck cannot see
plan 10
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf

mkdir unit
1b-synth --preset llama-tiny --ctx 8192 -o ctx8192.gguf
out=$("$UNIT/cmd-helpers" "$T/unit" "$S" "$T/ctx8192.gguf" < /dev/null 2>/dev/null); rc=$?
ok $rc "unit: ob_each_input, ob_open_output, ob_opt_u64, ob_local_open ($(grep -c '^ok' <<<"$out") checks)" ||
    grep '^not ok' <<<"$out" | head -10 | sed 's/^/# /'

# one seed range everywhere: 2^53 - 1 is the largest a record may carry (2^53 + 1 would be read
# as the double 2^53, another seed than the one written), and the --seed that stands for a
# record's seed is the same: 2^53 and 2^53 + 1 refused by both
bad=""
for c in "1b-gen -m $S" "1b-serve -m $S" "1b-batchrep -m $S"; do
    for s in 9007199254740992 9007199254740993; do
        $c --seed $s < /dev/null > /dev/null 2> err.txt; rc=$?
        p=${c%% *}
        [ $rc -eq 2 ] && [ "$(head -1 err.txt)" = "$p: --seed: $s is out of range [0, 9007199254740991]" ] ||
            bad="$bad $p(exit $rc: $(head -1 err.txt))"
    done
done
echo '{"id":"s","prompt":"Once","max_tokens":1,"seed":9007199254740993}' |
    1b-gen -m "$S" > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && grep -q "field 'seed' must be an integer in \[0, 9007199254740991\]" err.txt ||
    bad="$bad record(exit $rc: $(head -1 err.txt))"
[ -z "$bad" ]; ok $? "--seed 2^53 and 2^53 + 1: exit 2, the range named, in 1b-gen, 1b-serve and 1b-batchrep; a record's seed 2^53 + 1 refused too${bad:+:$bad}"
echo '{"id":"s","prompt":"Once upon a time","max_tokens":12,"temperature":1.5}' > s.jsonl
jq -c '.seed = 9007199254740991' s.jsonl > s-rec.jsonl
1b-gen -m "$S" --seed 9007199254740991 s.jsonl | jq -c .tokens > a.txt &&
    1b-gen -m "$S" s-rec.jsonl | jq -c .tokens > b.txt && [ -s a.txt ]
check_same "--seed 2^53 - 1 samples what a record's \"seed\": 2^53 - 1 samples" a.txt b.txt

# the shared number parsers: one message, nothing read from a value that was not parsed
bad=""
for c in "1b-gen -m $S" "1b-serve -m $S" "1b-batchrep -m $S"; do
    p=${c%% *}
    $c --temperature warm < /dev/null > /dev/null 2> err.txt; rc=$?
    [ $rc -eq 2 ] && [ "$(head -1 err.txt)" = "$p: --temperature: 'warm' is not a number in [0, 100]" ] &&
        [ "$(wc -l < err.txt)" -eq 2 ] || bad="$bad $p(exit $rc)"
done
[ -z "$bad" ]; ok $? "--temperature warm: exit 2, the reason then the usage line (no second line saying the command line is invalid)${bad:+:$bad}"

# FILE operands that cannot be opened: the same in process and through a server, for 1b-gen
# and 1b-logprobs: each named with strerror's reason, exit 3, and --keep-going goes on to the
# next operand (whose records are written) while without it nothing after it is read
serve_start s -m "$S" -t 1 || echo "# 1b-serve did not start: $(tail -3 "$T/s.log")"
echo '{"id":"g","prompt":"Once upon a time","max_tokens":3}' > g.jsonl
1b-gen -m "$S" g.jsonl > scored.jsonl
mkdir dir
operands() {                           # COMMAND... : the three runs' outcomes, one line each
    local kg
    for kg in --keep-going ""; do
        "$@" $kg dir missing.jsonl "$IN" > out.jsonl 2> err.txt
        echo "exit $? records $(wc -l < out.jsonl) | $(tr '\n' '|' < err.txt)"
    done
}
want_kg="exit 3 records 1 | PROG: dir: is a directory|PROG: missing.jsonl: No such file or directory|"
want_stop="exit 3 records 0 | PROG: dir: is a directory|"
bad=""
IN=g.jsonl
for c in "1b-gen -m $S" "1b-gen --url $URL_s --wait 20" "1b-logprobs -m $S"; do
    [ "${c%% *}" = 1b-logprobs ] && IN=scored.jsonl
    p=${c%% *}
    # shellcheck disable=SC2086  # a command line, a word each
    got=$(operands $c)
    [ "$got" = "$(printf '%s\n%s' "${want_kg//PROG/$p}" "${want_stop//PROG/$p}")" ] || bad="$bad [$c: $got]"
done
[ -z "$bad" ]; ok $? "a directory and a missing operand: named, exit 3, --keep-going reads on, in process and --url${bad:+:$bad}"
kill -TERM "$PID_s" 2>/dev/null; serve_wait_exit "$PID_s" 20
# 1b-agree needs every input: the first that cannot be opened ends it (exit 2, its "trouble")
1b-agree scored.jsonl dir missing.jsonl > out.txt 2> err.txt; rc=$?
[ $rc -eq 2 ] && [ "$(cat err.txt)" = "1b-agree: dir: is a directory" ] && [ ! -s out.txt ]
ok $? "1b-agree with an input that cannot be opened: exit 2, one line naming it ($(head -1 err.txt))"

# a report's output file (--json), opened before the work by both commands that write one
bad=""
for c in "1b-agree g.jsonl" "1b-batchrep -m $S --width 1 --rounds 1 --max-tokens 2"; do
    $c --json dir > /dev/null 2> err.txt; rc=$?
    p=${c%% *}; want=5; [ "$p" = 1b-agree ] && want=2
    [ $rc -eq $want ] && [ "$(cat err.txt)" = "$p: dir: Is a directory" ] || bad="$bad $p(exit $rc: $(head -1 err.txt))"
done
[ -z "$bad" ]; ok $? "--json DIR: refused at once, named with its reason${bad:+:$bad}"
1b-agree --json r1.json scored.jsonl scored.jsonl > /dev/null &&
    1b-batchrep -m "$S" --prompt "Once upon a time" --width 1 --rounds 1 --max-tokens 2 -q --json r2.json &&
    jq -e '.inputs | length == 2' r1.json > /dev/null && jq -e '.states == 1' r2.json > /dev/null
ok $? "--json FILE: the report written whole by both"

# the in-process route is opened the same way by every command: the same model errors
bad=""
for c in 1b-gen 1b-logprobs 1b-batchrep; do
    $c -m missing.gguf < /dev/null > /dev/null 2> err.txt; rc=$?
    [ $rc -eq 3 ] && [ "$(cat err.txt)" = "$c: missing.gguf: No such file or directory" ] || bad="$bad $c(exit $rc: $(head -1 err.txt))"
done
[ -z "$bad" ]; ok $? "-m missing.gguf: exit 3, one line naming it${bad:+:$bad}"
bad=""
for c in 1b-gen 1b-logprobs 1b-batchrep; do
    $c -m "$S" -d nosuch < /dev/null > /dev/null 2> err.txt; rc=$?
    [ $rc -eq 2 ] && grep -q "^$c: unknown route 'nosuch'" err.txt || bad="$bad $c(exit $rc: $(head -1 err.txt))"
done
[ -z "$bad" ]; ok $? "-d nosuch: exit 2, the route named${bad:+:$bad}"
