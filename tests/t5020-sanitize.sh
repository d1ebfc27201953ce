#!/usr/bin/env bash
# The engine and the server under AddressSanitizer and UBSan (bin/san/, built by make check).
# A model with one non-finite weight must fail its requests cleanly, on the plain and the
# sanitized builds (1b-logprobs --text, 1b-gen; 1b-serve with echo + logprobs, forced_tokens
# and streams: 500 engine_error, and the server lives on); then the generation, engine,
# scoring, main serve and route tests (the request interface too) run against the sanitized
# commands. A sanitizer report (a use after free, a leak at exit, undefined behaviour) fails
# the check whose command wrote it: reports go to files under $T/san, which must stay empty.
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
SAN=$OB_TOP/bin/san
INNER=(t4500-gen.sh t5010-engine.sh t7030-logprobs.sh t6000-serve.sh t6010-serve-errors.sh t6030-serve-signals.sh t7075-route-records.sh)
plan $(( 2 + 2 * 6 + ${#INNER[@]} ))
cd "$T" || exit 1
mkdir san
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:log_path=$T/san/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$T/san/ubsan"
# no_report WHAT: ok when no sanitizer wrote a report since the last call (the reports are
# shown, then moved aside); called after every command, before its checks, so that a report
# is charged to the check of the command that wrote it
no_report() {
    local f
    f=$(ls san 2>/dev/null)
    [ -z "$f" ] && return 0
    echo "# sanitizer reports ($1):"
    for f in san/*; do grep -m12 -E 'ERROR|SUMMARY|runtime error|#[0-9] ' "$f" | sed 's/^/#   /'; done
    mkdir -p seen && mv san/* seen/
    return 1
}

missing=""
for b in 1b-gen 1b-logprobs 1b-serve unit/engine unit/engine-fail; do
    [ -x "$SAN/$b" ] || missing="$missing $b"
done
[ -z "$missing" ]; ok $? "the sanitized binaries are built${missing:+ (missing:$missing; run make check)}"
out=$(echo '{"id":"x","prompt":"Once","max_tokens":2}' | "$SAN/1b-gen" -m "$SHARED/models/stories260K.gguf" 2>&1)
no_report "a plain run" && nm "$SAN/1b-gen" 2>/dev/null | grep -q __asan_init && jq -e '.completion_tokens == 2' <<<"$out" > /dev/null
ok $? "bin/san/1b-gen is built with ASan and runs"

# stories260K with one weight made non-finite, as a hostile file may hold: a NaN in
# output_norm.weight (every logit NaN) and 3e38 in output.weight (token 0's logit +Inf)
hostile_models

# plain and sanitized builds alike
for d in "$OB_TOP/bin" "$SAN"; do
    w=$([ "$d" = "$SAN" ] && echo "sanitized" || echo "plain")
    for m in nan big; do
        printf '%s\n' 'Once upon a time there was a dog.' > text.txt
        "$d/1b-logprobs" -m $m.gguf --text text.txt > out.jsonl 2> err.txt; rc=$?
        no_report "1b-logprobs --text $m" && [ $rc -eq 5 ] && [ "$(wc -l < err.txt)" -eq 1 ] &&
            grep -q "^1b-logprobs: text.txt:1: id 1: logit of token 0 is" err.txt && [ ! -s out.jsonl ]
        ok $? "$w 1b-logprobs --text on $m.gguf: exit 5, one line ($(head -1 err.txt))"
    done
    echo '{"id":"g","prompt":"Once upon a time","max_tokens":4}' > g.jsonl
    "$d/1b-gen" -m nan.gguf g.jsonl > out.jsonl 2> err.txt; rc=$?
    no_report "1b-gen" && [ $rc -eq 5 ] && [ "$(cat err.txt)" = "1b-gen: g.jsonl:1: id g: logit of token 0 is NaN" ] &&
        jq -e '.finish_reason == "error" and .error == "logit of token 0 is NaN"' out.jsonl > /dev/null
    ok $? "$w 1b-gen on nan.gguf: the error record, one line, exit 5 ($(head -1 err.txt))"

    # a server name (and log) per build: a reused log could still show the first one's port
    PATH=$d:$PATH serve_start "$w" -m nan.gguf -t 1 --parallel 2 ||
        { echo "# $w 1b-serve did not start:"; tail -5 "$T/$w.log" | sed 's/^/#   /'; }
    pid_var=PID_$w url_var=URL_$w
    PID=${!pid_var} U=${!url_var}
    C=$U/v1/completions
    cx 500 - engine_error "$C" -d '{"prompt":"Once upon a time","max_tokens":0,"echo":true,"logprobs":2}' &&
        cx 500 - engine_error "$C" -d '{"prompt":[1,403,407],"forced_tokens":[261,378,300,13,14],"max_tokens":0,"logprobs":1}' &&
        cx 500 - engine_error "$C" -d '{"prompt":"Once upon a time","max_tokens":8}'
    ok $? "$w 1b-serve on nan.gguf: echo + logprobs, forced_tokens and plain generation get 500 engine_error"
    for body in '{"prompt":"Once upon a time","max_tokens":0,"echo":true,"logprobs":1,"stream":true}' \
                '{"prompt":[1,403,407],"forced_tokens":[261,378,300],"max_tokens":0,"logprobs":1,"stream":true}'; do
        curl -s -N "$C" -d "$body"
    done > streams.txt
    [ "$(grep -c '"code":"engine_error"' streams.txt)" -eq 2 ] && [ "$(grep -c '^data: \[DONE\]' streams.txt)" -eq 2 ] &&
        cx 200 - - "$U/health" && cx 200 - - "$C" -d '{"prompt":"Once","max_tokens":0}'
    ok $? "$w: streamed, the error then [DONE]; the server lives on"
    kill -TERM "$PID" 2>/dev/null; serve_wait_exit "$PID" 20
    no_report "1b-serve" && [ "$RC" = 0 ]; ok $? "$w 1b-serve drains on SIGTERM (exit $RC), no sanitizer report"
done

# the engine and serve tests against the sanitized commands: a tree whose bin/ holds them
top=$T/top
mkdir -p "$top/bin/unit"
for f in "$OB_TOP"/* "$OB_TOP"/.venv "$OB_TOP"/.cache; do
    [ -e "$f" ] && [ "$(basename "$f")" != bin ] && ln -s "$f" "$top/$(basename "$f")"
done
for f in "$OB_TOP"/bin/* "$OB_TOP"/bin/unit/*; do       # the plain builds, then the sanitized
    n=${f#"$OB_TOP"/bin/}
    [ "$n" = unit ] || ln -s "$f" "$top/bin/$n"
done
for f in "$SAN"/1b-* "$SAN"/unit/*; do
    [ -x "$f" ] && [ -f "$f" ] && ln -sf "$f" "$top/bin/${f#"$SAN"/}"
done
for t in "${INNER[@]}"; do
    out=$(OB_TOP=$top OB_SHARED=$SHARED PY=$PY bash "$top/tests/$t" 2> inner.err); rc=$?
    n=$(grep -c '^ok' <<<"$out"); bad=$(grep -c '^not ok' <<<"$out")
    planned=$(grep -m1 -o '^1\.\.[0-9]*' <<<"$out" | cut -c4-)
    no_report "$t" && [ $rc -eq 0 ] && [ "$bad" -eq 0 ] && [ "${planned:--1}" -eq "$n" ]
    ok $? "$t against bin/san: $n of ${planned:-?} ok, exit $rc, no sanitizer report" || {
        grep '^not ok' <<<"$out" | head -10 | sed 's/^/# /'
        tail -5 inner.err | sed 's/^/# stderr: /'
    }
done
