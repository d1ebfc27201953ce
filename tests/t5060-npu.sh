#!/usr/bin/env bash
# The npu route without an NPU: -d npu exits 4 with a message saying what is missing, never
# running anything in its place. In the default build the route is not built in (the message
# says make XRT=1); where libxrt-dev is installed, a copy of the tree built with make XRT=1
# probes the device through XRT and says what it looked for (the machines 1b is tested on have
# no NPU: that is the path that runs here), and its npu-sim gives the default build's bits.
. "$(dirname "$0")/lib.sh"
TOK=$SHARED/models/qwen3-tokenizer/tokenizer.json
XRT_INC=${XRT_INC:-/usr/include/xrt}
plan 9
cd "$T" || exit 1
echo '{"id":"a","prompt":"Once upon a time","max_tokens":6}' > p.jsonl
1b-synth --preset qwen3-small --vocab 4000 --type q4_k_m --tokenizer "$TOK" -o m.gguf
1b-requant --type q4nx -o pack m.gguf > /dev/null

out=$(1b-gen -m pack -d npu < p.jsonl 2>&1 >/dev/null); rc=$?
[ $rc -eq 4 ] && grep -q "route 'npu' is not built into this binary: build with make XRT=1" <<<"$out"
ok $? "default build: -d npu exits 4 saying how to build it ($out)"
1b-load --device npu > dev.json 2> /dev/null; rc=$?
[ $rc -eq 4 ] && jq -e '.built == false and .present == false and (.error | test("XRT=1"))' dev.json > /dev/null
ok $? "default build: 1b-load --device npu: not built, exit 4 ($(cat dev.json))"
1b-load --device npu-sim | jq -e '.built and .present and (.device | startswith("npu-sim "))' > /dev/null
ok $? "1b-load --device npu-sim: built and present, on the host"
1b-load -d npu-sim pack | jq -e '.format == "q4nx-pack" and .device.route == "npu-sim" and .device.fits and .device.kv_bytes > 0' > /dev/null
ok $? "1b-load -d npu-sim PACK: the pack's facts with where it would run and that it fits"
1b-load -d npu pack > out.json 2> err.txt; rc=$?
[ $rc -eq 4 ] && [ ! -s out.json ] && [ "$(wc -l < err.txt)" = 1 ] && grep -q "route 'npu' is not built" err.txt
ok $? "1b-load -d npu PACK in the default build: exit 4, one line, no record ($(cat err.txt))"

if [ ! -f "$XRT_INC/xrt.h" ]; then
    for d in "make XRT=1 builds" "XRT build: -d npu exits 4" "XRT build: 1b-load --device npu" "XRT build: npu-sim's bits"; do
        skip "$d" "optional toolchain: no libxrt-dev ($XRT_INC/xrt.h)"
    done
    exit 0
fi
mkdir src && tar -C "$OB_TOP" --exclude='*.o' --exclude='*.d' --exclude='*.a' -cf - Makefile lib cmd | tar -C src -xf -
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C src -j2 XRT=1 bin/1b-load bin/1b-gen > make.log 2>&1
ok $? "make XRT=1 builds 1b-load and 1b-gen against libxrt-dev" || sed 's/^/# /' make.log | tail -5
out=$(src/bin/1b-gen -m pack -d npu < p.jsonl 2>&1 >/dev/null); rc=$?
[ $rc -eq 4 ] && grep -qE "npu: XRT [0-9.]+ found no device: xclProbe saw none bound to the xocl driver" <<<"$out"
ok $? "XRT build, no NPU: -d npu exits 4 saying what it looked for ($out)"
src/bin/1b-load --device npu > xdev.json 2> /dev/null; rc=$?
[ $rc -eq 4 ] && jq -e '.built and .present == false and (.error | test("xclProbe"))' xdev.json > /dev/null
ok $? "XRT build: 1b-load --device npu reports what XRT found, exit 4 ($(cat xdev.json))"
cmp -s <(src/bin/1b-gen -m pack -d npu-sim < p.jsonl | jq -c .tokens) <(1b-gen -m pack -d npu-sim < p.jsonl | jq -c .tokens)
ok $? "XRT build: npu-sim gives the default build's tokens and bits"
