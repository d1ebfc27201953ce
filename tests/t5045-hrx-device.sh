#!/usr/bin/env bash
# Devices of the routes: 1b-load -d reports where a route would run a model and whether it
# fits (hrx-sim and the host routes: the host; weights in the mapped file; KV cache of --slots
# sequences of --ctx positions; exit 1 when it does not fit), and exits 4 with one line for a
# route that is not built in or a device that is not there. --gpu N (every in-process
# command) picks the route's device: a device the route lacks exits 4 with one line, and
# --gpu with --url is a usage error.
. "$(dirname "$0")/lib.sh"
S=$SHARED/models/stories260K.gguf
plan 10
cd "$T" || exit 1

out=$(1b-load -d hrx-sim --slots 8 --ctx 2048 "$S"); rc=$?
kv=$(1b-load --ctx 2048 "$S" | jq .memory.kv_bytes)
[ $rc -eq 0 ] && jq -e --argjson kv "$kv" '.device | .route == "hrx-sim" and (.name | test("host")) and
    .weights_bytes == 0 and .kv_bytes == 8 * $kv and .needed_bytes == .kv_bytes and
    .memory_bytes > 0 and .fits == true and .slots == 8 and .ctx == 2048' <<<"$out" > /dev/null
ok $? "1b-load -d hrx-sim: the host, no device weights, 8 x the KV cache of 2048 positions, fits ($(jq -c .device <<<"$out"))"
out=$(1b-load -d cpu "$S" | jq -c .device)
jq -e '.route == "cpu" and .fits' <<<"$out" > /dev/null; ok $? "1b-load -d cpu: $out"
out=$(1b-load -d hrx-sim --slots 4096 --ctx 100000000 "$S"); rc=$?
[ $rc -eq 1 ] && jq -e '.device.fits == false' <<<"$out" > /dev/null
ok $? "a cache larger than the host: fits false, exit 1 (exit $rc)"
1b-load -d hrx "$S" > out.json 2> err.txt; rc=$?
if [ $rc -eq 0 ]; then
    jq -e '.device.route == "hrx" and .device.weights_bytes > 0' out.json > /dev/null
    ok $? "1b-load -d hrx: a GPU is here ($(jq -c .device out.json))"
else
    [ $rc -eq 4 ] && [ ! -s out.json ] && [ "$(wc -l < err.txt)" -eq 1 ] &&
        grep -qE '^1b-load: (route .hrx. is not built into this binary|hrx: no GPU 0)' err.txt
    ok $? "1b-load -d hrx without a GPU: exit 4, one line, no record ($(cat err.txt))"
fi
1b-load -d hrx-sim --gpu 1 "$S" > out.json 2> err.txt; rc=$?
[ $rc -eq 4 ] && [ "$(cat err.txt)" = "1b-load: device 1: hrx-sim has one device, 0" ]
ok $? "1b-load -d hrx-sim --gpu 1: exit 4 ($(cat err.txt))"

echo '{"id":"a","prompt":"Once","max_tokens":2}' > one.jsonl
for c in 1b-gen 1b-logprobs; do
    $c -m "$S" -d hrx-sim --gpu 1 < one.jsonl > /dev/null 2> err.txt; rc=$?
    [ $rc -eq 4 ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -q 'hrx-sim has one device' err.txt
    ok $? "$c -d hrx-sim --gpu 1: exit 4, one line ($(cat err.txt))"
done
1b-serve -m "$S" -d hrx-sim --gpu 1 --port 0 > /dev/null 2> err.txt; rc=$?
[ $rc -eq 4 ] && grep -q 'hrx-sim has one device' err.txt
ok $? "1b-serve -d hrx-sim --gpu 1: exit 4 ($(tail -1 err.txt))"
1b-batchrep -m "$S" -d hrx-sim --gpu 1 --width 2 --rounds 1 --max-tokens 2 -q > /dev/null 2> err.txt; rc=$?
[ $rc -eq 4 ] && grep -q 'hrx-sim has one device' err.txt
ok $? "1b-batchrep -d hrx-sim --gpu 1: exit 4 ($(tail -1 err.txt))"
1b-gen --url http://127.0.0.1:1 --gpu 1 < one.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 2 ] && grep -q -- '--gpu applies to in-process routes' err.txt
ok $? "1b-gen --url with --gpu: usage error ($(head -1 err.txt))"
