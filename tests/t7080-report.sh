#!/usr/bin/env bash
# 1b-report: on stories260K with cpu and ref (and a 1b-serve) it writes every section and plot,
# and its numbers are those of 1b-agree and 1b-batchrep run by hand on the same records (their
# JSON reports compared whole, the page's rows compared with the hand-run reports' numbers);
# a route that is not built or a server that is not reachable fails with exit 4 before
# anything is written; a run killed midway (SIGTERM, SIGKILL) leaves DIR absent or the old
# report, and a directory that is not a report is never replaced.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_s  # set by name (printf -v), which shellcheck cannot see
plan 35

S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
if ! command -v gnuplot >/dev/null || ! command -v pandoc >/dev/null; then
    for i in $(seq 1 33); do skip "1b-report check $i" "gnuplot and pandoc not installed (scripts/setup)"; done
    exit 0
fi
litter() { find "$T" -mindepth 1 -maxdepth 1 -name '*.1b-report.*' | wc -l; }
# stories260K has no chat template: contrib/prompts-plain.jsonl, the default prompt set with its
# chat messages (one user message each) as plain prompts
mkdir p
cp "$OB_TOP/contrib/prompts-plain.jsonl" p/prompts.jsonl
P=$T/p/prompts.jsonl
cmp -s <(jq -c 'if .messages then {id, prompt: .messages[0].content} + del(.id, .messages) else . end' \
         "$OB_TOP/contrib/prompts.jsonl") "$P" &&
    [ "$(jq -c 'select(.messages) | [.messages[].role]' "$OB_TOP/contrib/prompts.jsonl" | sort -u)" = '["user"]' ]
ok $? "contrib/prompts-plain.jsonl is contrib/prompts.jsonl with each one-message chat as a prompt"

# the default prompt set on a model without a chat template: exit 3 naming the problem,
# nothing written
1b-report -q --quick -m "$S" -d cpu -o gone 2> err; rc=$?
[ $rc -eq 3 ] && [ ! -e gone ] && [ "$(litter)" -eq 0 ] && [ "$(wc -l < err)" -eq 1 ] &&
    grep -q "id sky: the model has no chat template; send a plain prompt instead$" err
ok $? "chat prompts on a model without a chat template: exit 3, one line, nothing written (exit $rc: $(head -1 err))"

# --spec draft without a draft model: a usage error before anything runs
1b-report -q --quick -m "$S" -d cpu --spec draft -o gone 2> err; rc=$?
[ $rc -eq 2 ] && [ ! -e gone ] && grep -q -- '--spec draft needs a draft model' err
ok $? "--spec draft without --draft: exit 2 (exit $rc: $(head -1 err))"

# prompts the tools would refuse are refused here too, before the report rewrites them (a key
# twice would lose one of its values; a NUL byte): exit 3, FILE:LINE, nothing written
printf '%s\n' '{"id":"a","prompt":"Once"}' '{"id":"b","prompt":"Once","prompt":"Twice"}' > dup.jsonl
printf '{"id":"a","prompt":"Once"}\n{"id":"n\0"}\n' > nul.jsonl
1b-report -q --quick -m "$S" --prompts dup.jsonl -d cpu -o gone 2> err; rc=$?
1b-report -q --quick -m "$S" --prompts nul.jsonl -d cpu -o gone 2>> err; rc2=$?
[ $rc -eq 3 ] && [ $rc2 -eq 3 ] && [ ! -e gone ] && [ "$(wc -l < err)" -eq 2 ] &&
    grep -q 'dup.jsonl:2: not a JSON record (the key "prompt" appears twice in one object)$' err &&
    grep -q 'nul.jsonl:2: a NUL byte at byte 9 of the line$' err
ok $? "--prompts with a key twice, with a NUL byte: exit 3, FILE:LINE named (exit $rc, $rc2: $(tr '\n' '|' < err))"

# ---- a quick report, every section and plot ----
src_at=$(git -C "$OB_TOP" describe --always --dirty 2> /dev/null)
1b-report -q --quick -m "$S" --prompts "$P" -d cpu -d ref -o r 2> err; rc=$?
ok $rc "1b-report --quick -d cpu -d ref: exit 0 ($(head -1 err))"
want='## Summary
## Setup
## Repetition per route (requests served one at a time)
## Agreement between routes
### Generated streams
#### First divergences, with each route'"'"'s top-2 margin there
### Teacher-forced: every position comparable
### Plots
## Batched repeats (the same request N times at once, R rounds)
## Generated length
## How this report was made'
[ "$(grep '^##' r/report.md)" = "$want" ]; ok $? "report.md has every section"
bad=""
for p in dlogp-cpu-ref match-cpu-ref batched; do
    [ "$(head -c 8 "r/plots/$p.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || bad="$bad $p"
    grep -q "(plots/$p.png)" r/report.md || bad="$bad $p(page)"
done
[ -z "$bad" ]; ok $? "every plot is a PNG and on the page${bad:+:$bad}"
[ "$(grep -o '<img src="plots/[a-z-]*\.png"' r/report.html | wc -l)" -eq 3 ] &&
    [ "$(grep -c '<table' r/report.html)" -ge 7 ] && grep -q '<h1' r/report.html
ok $? "report.html: the same page (3 plots, every table) through pandoc"
jq -e '.commands | length > 10' r/report.json > /dev/null &&
    grep -q '^1b-gen -m .* -d ref --repeat 2 < requests.jsonl > gen/ref.jsonl$' r/report.md &&
    grep -q "| model of cpu | llama, sha256 $(sha256sum "$S" | cut -c1-64) |" r/report.md &&
    { [ -z "$src_at" ] || [ "$(jq -r .versions.source r/report.json)" = "$OB_TOP at $src_at (when the run started)" ]; }
ok $? "the page shows the command lines, the model's sha256 and the source commit the run started at"
[ "$(litter)" -eq 0 ] && [ -f r/.1b-report ]
ok $? "no temporary directory left beside the report"

# ---- the same measurements by hand: the JSON reports are the tools' own ----
head -3 "$P" |
    jq -c '.max_tokens = 16 | .top_logprobs = 5 | .temperature = 0 | .cache_prompt = false' > req.jsonl
check_same "requests.jsonl: the prompt set with the report's settings" req.jsonl r/requests.jsonl
1b-gen -m "$S" -d cpu --repeat 2 < req.jsonl > cpu.jsonl && 1b-gen -m "$S" -d ref --repeat 2 < req.jsonl > ref.jsonl
1b-agree -q --json agree.json cpu.jsonl ref.jsonl
nofile='del(.inputs[].file)'
cmp -s <(jq -S "$nofile" agree.json) <(jq -S "$nofile" r/agree/generated.json)
ok $? "agree/generated.json is 1b-agree's report on records made by hand"
jq -c 'select(.repeat == 0)' cpu.jsonl > cpu.r0.jsonl
1b-logprobs -m "$S" -d ref < cpu.r0.jsonl > cpu-on-ref.jsonl
1b-agree -q --json tf.json cpu.r0.jsonl cpu-on-ref.jsonl
cmp -s <(jq -S "$nofile" tf.json) <(jq -S "$nofile" r/agree/tf-cpu-on-ref.json) &&
    jq -e '.pairs[0].common == .pairs[0].aligned and .pairs[0].aligned == 48' tf.json > /dev/null
ok $? "agree/tf-cpu-on-ref.json is 1b-logprobs + 1b-agree by hand (every one of 48 positions common)"
probe=$(head -1 "$P" | jq -r .prompt)
bad=""
for x in cpu:2:16 ref:8:16 cpu:4:8; do
    IFS=: read -r d w n <<<"$x"
    1b-batchrep -q -m "$S" -d "$d" --width "$w" --rounds 2 --max-tokens "$n" --top-logprobs 5 --vs-solo \
        --json "b-$d-$w-$n.json" --prompt "$probe" --match-by id
    cmp -s "b-$d-$w-$n.json" "r/batch/$d-w$w-t$n.json" || bad="$bad $x"
done
[ -z "$bad" ]; ok $? "batch/*.json are 1b-batchrep's reports by hand, byte for byte${bad:+:$bad}"

# the page's rows are those reports' numbers, printed as the tools print them
row=$("$PY" - agree.json <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))["pairs"][0]
d = lambda x: "0" if x == 0 else "%.3e" % x
print("| cpu vs ref | %d | %d | %d | %.3f | %.3f | %s | %s | %s |" % (
    p["records"], p["aligned"], p["common"], p["token_match"], p["exact_bit_rate"],
    d(p["max_abs_dlogp"]), d(p["mean_abs_dlogp"]), "exact" if p["exact"] else "differ"))
EOF
)
grep -qxF "$row" r/report.md; ok $? "the page's cpu vs ref row is 1b-agree's numbers ($row)"
row=$("$PY" - b-cpu-2-16.json <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
v = b["vs_solo"]; m = v["mean_abs_dlogp"]; s = v["same_token"]
d = lambda x: "0" if x == 0 else "%.3e" % x
print("| cpu | 2 | %d/%d | %s | %s | %s | %.3f | %.3f | %.3f |" % (
    v["identical"], v["copies"], d(m["min"]), d(m["median"]), d(m["max"]), s["min"], s["median"], s["max"]))
print("| cpu | 2 | %d | %d | %d | %s | %d/%d | %s | %s |" % (
    b["rounds"], b["copies"], b["states"],
    " ".join("%d/%d" % (r["identical"], len(r["states"])) for r in b["per_round"]),
    b["round_to_round"]["identical"], b["round_to_round"]["pairs"], d(b["worst_abs_dlogp"]), b["verdict"]))
EOF
)
bad=""
while IFS= read -r l; do grep -qxF "$l" r/report.md || bad="$bad [$l]"; done <<<"$row"
[ -z "$bad" ]; ok $? "the page's batched rows for cpu width 2 are 1b-batchrep's numbers${bad:+:$bad}"
# the length section: width 4 at 8 and 16 tokens
[ "$(sed -n '/^## Generated length/,/^## /p' r/report.md | grep -c '^| \(cpu\|ref\) | \(8\|16\) | 8/8 |')" -eq 4 ]
ok $? "the length section has a row per route and length"
# the plot data add up to 1b-agree's counts (1b-report checks it too)
"$PY" - r <<'EOF'
import json, sys
r = sys.argv[1]
p = json.load(open(r + "/agree/generated.json"))["pairs"][0]
rows = [l.split() for l in open(r + "/plots/match-cpu-ref.tsv") if not l.startswith("#")]
assert sum(int(x[1]) for x in rows) == p["aligned"] and sum(int(x[2]) for x in rows) == p["common"], rows
h = [l.split() for l in open(r + "/plots/dlogp-cpu-ref.tsv") if not l.startswith("#")]
assert sum(int(x[-1]) for x in h) + p["exact_bits"] == p["common"], (h, p["common"])
EOF
ok $? "the plots' data add up to 1b-agree's aligned, common and exact counts"

# ---- a server route: 1b-serve, and the contract over HTTP ----
if serve_start s -m "$S" --parallel 4 -t 2; then
    1b-report -q --quick --widths 1,8 --lengths 8 -m "$S" --prompts "$P" -d cpu --url serve="$URL_s" -o srv 2> err; rc=$?
    ok $rc "1b-report with a 1b-serve route: exit 0 ($(head -1 err))"
    grep -qx '| cpu vs serve | 3 | 48 | 48 | 1.000 | 1.000 | 0 | 0 | exact |' srv/report.md &&
        grep -q "^| serve's tokens on cpu | .* exact |" srv/report.md &&
        grep -q "^| cpu's tokens on serve | .* exact |" srv/report.md
    ok $? "cpu and the server agree to the bit, generated and teacher-forced both ways"
    grep -q "^| serve | server \`$URL_s\`, 4 slots | stories260K.gguf | 270cba1b" srv/report.md &&
        grep -q '^serve has 4 slots: at width 8 copies waited for a slot' srv/report.md
    ok $? "the server's row names its URL and slots (its /v1/models), and width 8 is marked as waiting"
    # a user name and password in a URL are sent, and shown nowhere
    u=${URL_s/http:\/\//http://someone:s3cret@}
    1b-report -q --quick --widths 1 --lengths 8 -m "$S" --prompts "$P" --url "$u" -o cred 2> err; rc=$?
    [ $rc -eq 0 ] && ! grep -rq s3cret cred && grep -q "^1b-gen --url $URL_s " cred/report.md
    ok $? "a URL's password is in no file of the report (exit $rc: $(grep -rl s3cret cred 2>/dev/null | head -3))"
else
    for i in 1 2 3 4; do ok 1 "1b-serve did not start: $(tail -2 "$T/s.log")"; done
fi

# ---- unreachable routes: exit 4, nothing written ----
1b-report -q -m "$S" --prompts "$P" -d cpu -d hrx -o gone 2> err; rc=$?
[ $rc -eq 4 ] && [ ! -e gone ] && [ "$(litter)" -eq 0 ] && [ "$(wc -l < err)" -eq 1 ] && grep -q "hrx" err
ok $? "-d hrx (not built): exit 4, one line, nothing written (exit $rc: $(head -1 err))"
port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
1b-report -q -m "$S" --prompts "$P" -d cpu --url "http://127.0.0.1:$port" --wait 1 -o gone 2> err; rc=$?
[ $rc -eq 4 ] && [ ! -e gone ] && [ "$(litter)" -eq 0 ] && grep -q unreachable err
ok $? "--url to a dead port: exit 4, nothing written (exit $rc: $(head -1 err))"
1b-report -q -m "$S" --prompts "$P" -d cpu -d hrx -o r 2> err; rc=$?
[ $rc -eq 4 ] && check_same "an existing report is left as it was" r/requests.jsonl req.jsonl > /dev/null
ok $? "-d hrx with an existing report: exit 4, the report untouched"
check_exit 2 "-d with an unknown route name is a usage error" 1b-report -q -m "$S" --prompts "$P" -d nosuch -o gone
mkdir notreport && echo keep > notreport/file
1b-report -q --quick -m "$S" --prompts "$P" -d cpu -o notreport 2> err; rc=$?
[ $rc -eq 2 ] && [ "$(cat notreport/file)" = keep ] && [ "$(ls -A notreport)" = file ]
ok $? "a directory that is not a report is refused, untouched (exit $rc: $(head -1 err))"
check_exit 2 "--widths 1,x" 1b-report -q -m "$S" --prompts "$P" -d cpu --widths 1,x -o gone
check_exit 2 "-o is required" 1b-report -q -m "$S" --prompts "$P" -d cpu

# ---- killed midway: DIR is absent or the old report ----
old=$(md5sum < r/report.md)
killed() {      # SIGNAL: start a full report over r, wait until it has written part of one, kill it
    1b-report -q -m "$S" --prompts "$P" -d cpu -d ref -o r 2> /dev/null &
    local pid=$! i
    for i in $(seq 1 200); do
        compgen -G "$T/.r.1b-report.*/batch/*.json" > /dev/null && break
        sleep 0.05
    done
    kill "-$1" "$pid"
    { wait "$pid"; } 2> /dev/null
    RC=$?
}
killed TERM
[ $RC -eq 143 ] && [ "$(md5sum < r/report.md)" = "$old" ] && [ "$(litter)" -eq 0 ]
ok $? "SIGTERM midway: the old report stays, the temporary one is removed (exit $RC)"
sleep 0.2
n=0
for p in /proc/[0-9]*; do readlink "$p/cwd" 2>/dev/null | grep -q '\.r\.1b-report\.' && n=$((n + 1)); done
[ $n -eq 0 ]; ok $? "and no tool it started is left running ($n)"
killed KILL
[ $RC -eq 137 ] && [ "$(md5sum < r/report.md)" = "$old" ] && [ "$(litter)" -eq 1 ]
ok $? "SIGKILL midway: the old report stays (its temporary directory is left: $(litter))"
sleep 0.2
1b-report -q --quick --max-tokens 8 -m "$S" --prompts "$P" -d cpu -d ref -o r 2> err; rc=$?
# shellcheck disable=SC2016  # the backquotes are the report's Markdown
[ $rc -eq 0 ] && [ "$(litter)" -eq 0 ] && grep -q '^3 requests from `prompts.jsonl`, 8 tokens each' r/report.md
ok $? "the next run removes the killed run's directory and replaces the report (exit $rc)"
# installed (make install): beside the tools it runs, with the default prompt set in share/1b
# (chat messages: a model with a chat template, 1b-synth's llama-tiny)
1b-synth --preset llama-tiny -o llama.gguf
make -s -C "$OB_TOP" install DESTDIR="$T/inst" PREFIX=/usr > make.out 2>&1 &&
    (cd / && env PATH=/usr/bin:/bin "$T/inst/usr/bin/1b-report" -q --quick --widths 1 --lengths 8 -m "$T/llama.gguf" -d cpu -o "$T/inst-r") &&
    grep -q "^| tools | $T/inst/usr/bin |" inst-r/report.md && [ "$(jq -r .prompts inst-r/report.json)" = "$T/inst/usr/share/1b/prompts.jsonl" ] &&
    [ -f "$T/inst/usr/share/man/man1/1b-report.1" ] && [ -L "$T/inst/usr/share/bash-completion/completions/1b-report" ]
ok $? "make install: 1b-report runs the installed tools with the installed prompt set, its page and completion installed" ||
    tail -5 make.out | sed 's/^/# /'
1b-report -q --quick -m "$S" --prompts "$P" -d cpu -o fresh && [ -f fresh/report.html ] && ! grep -q '^### Generated streams' fresh/report.md &&
    grep -q '^One route only: no pair to compare.$' fresh/report.md
ok $? "one route: the page says there is no pair"
