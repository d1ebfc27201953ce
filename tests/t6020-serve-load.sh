#!/usr/bin/env bash
# 1b-serve under a bounded load: 32 clients send 4 short requests each at once to a server
# with 8 slots; every request is answered 200 (none lost, none refused: the queue holds the
# rest) and every answer is bit-identical to the same prompt's answer when the server was idle.
# The metrics count them. (bench/serve-load is the longer benchmark.)
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_l PID_l  # set by name (printf -v), which shellcheck cannot see
plan 4
cd "$T" || exit 1
serve_start l -m "$SHARED/models/stories260K.gguf" --parallel 8 -t 1
ok $? "server with --parallel 8 at $URL_l"
out=$(SC load "$URL_l" --clients 32 --requests 4 --tokens 16 2>&1); rc=$?
ok $rc "32 clients x 4 requests: all 200, identical to the idle answers: $out"
m=$(curl -s "$URL_l/metrics")
n=$(grep '^ob_requests_total{endpoint="/v1/completions",status="200"}' <<<"$m" | awk '{print $2}')
[ "$n" = 132 ] && ! grep -q '^ob_requests_total{endpoint="/v1/completions",status="5' <<<"$m" &&
    grep -q '^ob_slots_busy 0$' <<<"$m" && grep -q '^ob_queue_depth 0$' <<<"$m"
ok $? "metrics: 132 answered 200 (4 reference + 128), no 5xx, nothing left busy or queued"
kill -TERM "$PID_l"; serve_wait_exit "$PID_l" 10
[ "$RC" = 0 ]; ok $? "SIGTERM: exit 0"
