# shellcheck shell=bash
# tests/py/serve_env.sh — shell helpers for the 1b-serve tests (tests/t60*-serve*.sh), sourced
# after tests/lib.sh.
#
#   serve_start NAME ARGS...   start `1b-serve --port 0 ARGS` in the background, log in
#                              $T/NAME.log; wait until it is ready (or has died); sets
#                              URL_NAME=http://127.0.0.1:PORT and PID_NAME
#   serve_wait_exit PID SECS   wait up to SECS for PID to exit; sets RC to its exit status
#                              (or "running") and WAITED to the seconds it took
#   SC ARGS...                 the Python client checks (tests/py/serve_client.py)
# Every server still running when the test ends is killed (SIGKILL, by its pid).
_serve_pids=()

serve_start() {
    local name=$1; shift
    1b-serve --port 0 "$@" 2> "$T/$name.log" &
    local pid=$! port=""
    _serve_pids+=("$pid")
    for _ in $(seq 1 400); do
        if grep -q '"event":"ready"' "$T/$name.log" 2>/dev/null; then
            port=$(grep -m1 '"event":"listening"' "$T/$name.log" | jq -r .port)
            break
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    printf -v "PID_$name" '%s' "$pid"
    printf -v "URL_$name" 'http://127.0.0.1:%s' "${port:-0}"
    [ -n "$port" ]
}

# shellcheck disable=SC2034  # RC and WAITED are set for the test that sourced this file
serve_wait_exit() {
    local pid=$1 secs=$2 t0=$EPOCHREALTIME
    RC=running
    while :; do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            RC=$?
            break
        fi
        [ "$(awk -v a="$t0" -v b="$EPOCHREALTIME" -v s="$secs" 'BEGIN { print (b - a > s) }')" = 1 ] && break
        sleep 0.05
    done
    WAITED=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
}

_serve_cleanup() {
    local p
    for p in "${_serve_pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$T"
}
trap _serve_cleanup EXIT

SC() { "$PY" "$OB_TOP/tests/py/serve_client.py" "$@"; }

# cx [-H NAME] STATUS PARAM CODE CURL-ARGS...: one request with curl; ok when the status is
# STATUS and, for an error, the body is an OpenAI error whose param and code are PARAM and
# CODE ("-": not checked; "null": JSON null); -H: the answer must carry header NAME.
# The body is left in $T/cx.out; a failure prints what came back.
cx() {
    local hdr=""
    if [ "$1" = -H ]; then hdr=$2; shift 2; fi
    # shellcheck disable=SC2034  # param and code are read by name: ${!k} below
    local want=$1 param=$2 code=$3; shift 3
    local got
    got=$(curl -s -o "$T/cx.out" -D "$T/cx.hdr" -w '%{http_code}' "$@")
    if [ "$got" != "$want" ]; then
        echo "# status $got, want $want: $(head -c 300 "$T/cx.out")"
        return 1
    fi
    if [ -n "$hdr" ] && ! grep -qi "^$hdr:" "$T/cx.hdr"; then
        echo "# no header $hdr"
        return 1
    fi
    if [ "$want" -ge 400 ] && ! jq -e '.error | has("message") and has("type") and has("param") and has("code")' \
            "$T/cx.out" > /dev/null 2>&1; then
        echo "# not an OpenAI error body: $(head -c 300 "$T/cx.out")"
        return 1
    fi
    local k v
    for k in param code; do
        v=${!k}
        [ "$v" = - ] && continue
        if [ "$(jq -r ".error.$k" "$T/cx.out")" != "$v" ]; then
            echo "# $k $(jq -r ".error.$k" "$T/cx.out"), want $v: $(jq -r .error.message "$T/cx.out")"
            return 1
        fi
    done
    return 0
}

# sc_ok DESC ARGS...: a Python client check (SC ARGS...) as one TAP line; what it printed is
# shown as comments when it fails
sc_ok() {
    local d=$1 out rc
    shift
    out=$(SC "$@" 2>&1)
    rc=$?
    ok $rc "$d" || printf '%s\n' "$out" | tail -n 8 | sed 's/^/# /'
    [ -n "${OB_VERBOSE_SC:-}" ] && printf '%s\n' "$out" | sed 's/^/#   /'
    return $rc
}
