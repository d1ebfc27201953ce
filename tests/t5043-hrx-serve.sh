#!/usr/bin/env bash
# 1b-serve on hrx-sim keeps the contract: the main serve test (tests/t6000-serve.sh: server ==
# 1b-gen bit for bit, alone and among 7 others at --parallel 8 with continuous batching,
# streamed == whole, echo and forced-token scoring == generation, chat, sampling) runs with
# every server it starts on hrx-sim (unless the test names a route itself) while 1b-gen stays
# on the cpu route: the server's float32 bits on hrx-sim are the cpu route's. Also a server
# started with -d hrx-sim says so in /v1/models and its logs.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_sim PID_sim  # set by name (printf -v), which shellcheck cannot see
INNER=(t6000-serve.sh)
plan $(( 2 + ${#INNER[@]} ))
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf

serve_start sim -m "$S" -d hrx-sim -t 2 --parallel 4
m=$(curl -s "$URL_sim/v1/models")
jq -e '.data[0].route == "hrx-sim"' <<<"$m" > /dev/null && grep -q 'hrx-sim' "$T/sim.log"
ok $? "1b-serve -d hrx-sim: /v1/models names the route ($(jq -c '.data[0] | {id, route}' <<<"$m"))"
echo '{"id":"a","prompt":"Once upon a time","max_tokens":24,"top_logprobs":2}' | 1b-gen -m "$S" > g.jsonl
SC gen-match "$URL_sim" /v1/completions \
    '{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"logprobs":2}' g.jsonl
ok $? "a completion from the hrx-sim server = 1b-gen on cpu, bit for bit"
kill -TERM "$PID_sim"

# the serve tests against a bin/ whose 1b-serve runs on hrx-sim
top=$T/top
mkdir -p "$top/bin"
for f in "$OB_TOP"/* "$OB_TOP"/.venv "$OB_TOP"/.cache; do
    [ -e "$f" ] && [ "$(basename "$f")" != bin ] && ln -s "$f" "$top/$(basename "$f")"
done
for f in "$OB_TOP"/bin/*; do
    [ "$(basename "$f")" = 1b-serve ] || ln -s "$f" "$top/bin/$(basename "$f")"
done
cat > "$top/bin/1b-serve" <<EOT
#!/usr/bin/env bash
# 1b-serve on hrx-sim, unless the test asks for a route
for a in "\$@"; do
    case \$a in -d|-d?*|--device|--device=*) exec "$OB_TOP/bin/1b-serve" "\$@";; esac
done
exec "$OB_TOP/bin/1b-serve" -d hrx-sim "\$@"
EOT
chmod +x "$top/bin/1b-serve"
for t in "${INNER[@]}"; do
    out=$(OB_TOP=$top OB_SHARED=$SHARED PY=$PY bash "$top/tests/$t" 2> inner.err); rc=$?
    n=$(grep -c '^ok' <<<"$out"); bad=$(grep -c '^not ok' <<<"$out")
    planned=$(grep -m1 -o '^1\.\.[0-9]*' <<<"$out" | cut -c4-)
    [ $rc -eq 0 ] && [ "$bad" -eq 0 ] && [ "${planned:--1}" -eq "$n" ]
    ok $? "$t with 1b-serve on hrx-sim: $n of ${planned:-?} ok, exit $rc" || {
        grep '^not ok' <<<"$out" | head -10 | sed 's/^/# /'
        tail -5 inner.err | sed 's/^/# stderr: /'
    }
done
