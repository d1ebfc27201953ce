#!/usr/bin/env bash
# 1b-agree on hand-written record pairs with known answers (tests/fixtures/agree): the golden
# report and table, each quantity by hand, matching by text for a route without ids, values
# that are not float32, repetition, records without log-probabilities, missing ids, gates,
# unreadable inputs and usage errors, each with its exit status.
. "$(dirname "$0")/lib.sh"
plan 32
cd "$T" || exit 1
cp "$OB_TOP"/tests/fixtures/agree/*.jsonl .
G=$OB_TOP/tests/golden

# a.jsonl vs b.jsonl, by hand:
#   p1  ids 10 20 30 40 / 10 20 35 40, logprobs -0.5 -1.25 -0.125 -2 / -0.5 -1 -0.375 -2.0625
#       aligned 4, common 3 (positions 0 1 3), exact 1, |dlogp| 0 .25 .0625; diverges at 2
#       where A's top-2 margin is -0.125 - -2.25 = 2.125 and B's -0.375 - -1.125 = 0.75
#   p2  3 tokens / 4 tokens, the 3 common ones exact: diverges at 3, where A has ended
#   all: aligned 7, common 6, match 6/7, exact 4, exact-bit 4/6, max .25, mean .3125/6
1b-agree --json ab.json a.jsonl b.jsonl > ab.txt; rc=$?
ok "$([ $rc -eq 1 ]; echo $?)" "a vs b differ: exit 1 (exit $rc)"
check_same "the JSON report is the golden one" "$G/agree-ab.json" ab.json
check_same "the table is the golden one" "$G/agree-ab.txt" ab.txt
p='.pairs[0]'
jq -e "$p | .aligned == 7 and .common == 6 and .token_match == (6/7) and .exact_bits == 4
       and .exact_bit_rate == (4/6) and .max_abs_dlogp == 0.25 and .mean_abs_dlogp == (0.3125/6)
       and .max_at.id == \"p1\" and .max_at.pos == 1" ab.json > /dev/null
ok $? "aligned 7, common 6, match 6/7, exact-bit 4/6, max 0.25 at p1:1, mean over common only"
jq -e "$p.prompts[0].first_divergence | .pos == 2 and .a.id == 30 and .a.margin == 2.125
       and .b.id == 35 and .b.margin == 0.75" ab.json > /dev/null
ok $? "p1 first diverges at position 2: top-2 margins 2.125 (A) and 0.75 (B)"
jq -e "$p.prompts[1] | .aligned == 3 and .common == 3 and .exact_bits == 3
       and .first_divergence.pos == 3 and .first_divergence.a == \"end\"" ab.json > /dev/null
ok $? "p2: 3 aligned positions, all exact; diverges where A ends"

check_exit 0 "a vs a: exact" 1b-agree a.jsonl a.jsonl
# shellcheck disable=SC2094  # a.jsonl is read twice (standard input and operand), not written
1b-agree - a.jsonl < a.jsonl | grep -q "exact$"; ok $? "standard input as an input, table says exact"
out=$(1b-agree -q a.jsonl b.jsonl); rc=$?
[ $rc -eq 1 ] && [ -z "$out" ]; ok $? "-q: no output, exit 1"
[ "$(1b-agree --json - a.jsonl b.jsonl | wc -l)" -eq 1 ]; ok $? "--json -: the report alone, one line"

# a route that reports no ids
1b-agree --json noid.json a.jsonl c-noids.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 1 ] && jq -e '.pairs[0].common == 0 and .inputs[1].tokens_without_id == 8' noid.json > /dev/null &&
    grep -q -- "--match-by text" err.txt
ok $? "by id, a route without ids has nothing in common, and the tool says to match by text"
1b-agree --match-by text --json text.json a.jsonl c-noids.jsonl > /dev/null
jq -e '.match_by == "text"' text.json > /dev/null &&
    [ "$(jq -c '.pairs[0] | [.aligned, .common, .exact_bits, .max_abs_dlogp, .mean_abs_dlogp]' text.json)" = \
      "$(jq -c '.pairs[0] | [.aligned, .common, .exact_bits, .max_abs_dlogp, .mean_abs_dlogp]' ab.json)" ]
ok $? "--match-by text: the same numbers as by id against the route with ids"
check_exit 0 "--match-by text: b and its id-less copy are exact" 1b-agree --match-by text b.jsonl c-noids.jsonl

# values that are not float32
1b-agree --json nf.json a.jsonl d-nonf32.jsonl > /dev/null; rc=$?
[ $rc -eq 0 ] && jq -e '.inputs[1].nonf32_values == 1 and .inputs[0].nonf32_values == 0' nf.json > /dev/null
ok $? "a decimal that is not a float32 is counted (1), and compared after rounding (exit $rc)"

# repetition
1b-agree --json rep.json rep.jsonl > /dev/null; rc=$?
[ $rc -eq 1 ] && jq -e '.inputs[0] | .repeatable == false and .ids_repeated == 2
    and .not_repeatable == [{"id":"p1","repeat":2,"against":0,"pos":1}]' rep.json > /dev/null
ok $? "a route whose repeat 2 moves one logprob: not repeatable, at id p1 position 1"
jq -c '{id, repeat, route, tokens}' a.jsonl > r0.jsonl
jq -c '.repeat = 1' r0.jsonl > r1.jsonl
cat r0.jsonl r1.jsonl > reps.jsonl
1b-agree --json reps.json reps.jsonl a.jsonl > /dev/null; rc=$?
[ $rc -eq 0 ] && jq -e '.inputs[0].repeatable == true and .pairs[0].records == 2' reps.json > /dev/null
ok $? "identical repeats: repeatable; pairs compare the lowest repeat of each id"
1b-agree --all-repeats --json reps2.json reps.jsonl reps.jsonl > /dev/null
jq -e '.pairs[0].records == 4' reps2.json > /dev/null; ok $? "--all-repeats compares every repeat both have"
cat r0.jsonl r0.jsonl > dup.jsonl
out=$(1b-agree dup.jsonl 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "dup.jsonl:3: id p1 repeat 0 also on line 1" <<<"$out"
ok $? "the same id and repeat twice: unreadable input, exit 2 ($out)"

# records without log-probabilities, missing ids, empty input
1b-agree --json nolp.json a.jsonl nolp.jsonl > nolp.txt; rc=$?
[ $rc -eq 1 ] && jq -e '.inputs[1].records_without_logprobs == 2' nolp.json > /dev/null &&
    grep -q "HTTP 500: slot crashed" nolp.txt
ok $? "a route without log-probabilities: exit 1, counted, its error shown"
1b-agree --json miss.json a.jsonl a-p1.jsonl > /dev/null; rc=$?
[ $rc -eq 1 ] && jq -e '.pairs[0] | .only_a == 1 and .only_a_ids == ["p2"] and .records == 1' miss.json > /dev/null
ok $? "an id missing from one side: exit 1, named"
: > empty.jsonl
check_exit 1 "an empty input shows nothing agrees" 1b-agree a.jsonl empty.jsonl

# gates
check_exit 0 "within --max-abs 0.25 --mean-abs 0.06" 1b-agree --max-abs 0.25 --mean-abs 0.06 a.jsonl b.jsonl
check_exit 1 "outside --max-abs 0.2" 1b-agree --max-abs 0.2 a.jsonl b.jsonl
check_exit 1 "outside --mean-abs 0.05" 1b-agree --mean-abs 0.05 a.jsonl b.jsonl
check_exit 1 "below --min-match 0.9" 1b-agree --max-abs 1 --min-match 0.9 a.jsonl b.jsonl

# three inputs: three pairs
1b-agree --json abc.json a.jsonl a.jsonl b.jsonl > /dev/null
[ "$(jq -c '[.pairs[] | [.pair, .exact]]' abc.json)" = '[["A-B",true],["A-C",false],["B-C",false]]' ]
ok $? "three inputs: pairs A-B (exact), A-C, B-C"

# unreadable inputs and usage
out=$(1b-agree a.jsonl bad.jsonl 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "^1b-agree: bad.jsonl:2: invalid JSON" <<<"$out"; ok $? "invalid JSON: exit 2, FILE:LINE ($out)"
out=$(1b-agree badbits.jsonl 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "badbits.jsonl:1: id p1: token 0: 'logprob' -0.5 does not match 'bits' bf000001" <<<"$out"
ok $? "a logprob that disagrees with its bits: exit 2 ($out)"
check_exit 2 "a missing file" 1b-agree a.jsonl no-such.jsonl
check_exit 2 "no inputs" 1b-agree
check_exit 2 "--match-by something else" 1b-agree --match-by pos a.jsonl b.jsonl
check_exit 2 "standard input twice" 1b-agree - -
