# shellcheck shell=bash
# tests/py/fixture_env.sh — shell helpers for the URL-route tests (tests/t70*-*.sh), sourced
# after tests/lib.sh.
#
#   fixture_start NAME SCENARIO [ARGS...]   start tests/py/fixture_server.py on 127.0.0.1 with a
#                                           scenario (tests/fixtures/url/*.json); its request
#                                           log is $T/NAME.log; sets URL_NAME and PID_NAME
#   free_port                               print a TCP port nobody listens on (for now)
# Every server still running when the test ends is stopped (by its pid).
_fx_pids=()

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

fixture_start() {
    local name=$1 scenario=$2
    shift 2
    rm -f "$T/$name.port" "$T/$name.log"
    "$PY" "$OB_TOP/tests/py/fixture_server.py" "$scenario" --port-file "$T/$name.port" \
        --log "$T/$name.log" "$@" 2> "$T/$name.err" &
    local pid=$!
    _fx_pids+=("$pid")
    printf -v "PID_$name" '%s' "$pid"
    case " $* " in
    *" --port "*) printf -v "URL_$name" 'http://127.0.0.1:%s' "$(sed -n 's/.*--port \([0-9]*\).*/\1/p' <<<" $* ")"; return 0 ;;
    esac
    for _ in $(seq 1 200); do
        [ -s "$T/$name.port" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    printf -v "URL_$name" 'http://127.0.0.1:%s' "$(cat "$T/$name.port" 2>/dev/null)"
    [ -s "$T/$name.port" ]
}

_fx_cleanup() {
    local p
    for p in "${_fx_pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$T"
}
trap _fx_cleanup EXIT
