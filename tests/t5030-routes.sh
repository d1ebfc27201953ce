#!/usr/bin/env bash
# The route registry (lib/route.c) and contexts (lib/ctx.c): routes found by name, a route that
# is not built in (exit 4) and an unknown one (exit 2, the routes listed), device options
# (index, memory limit), the device a route names, and a backend's optional whole-layer op;
# a route without the gemma3 ops refuses a gemma3 model; OB_WEIGHTS (the cpu route's copy of
# the weights) other than auto, copy or map is a usage error (exit 2); a copy in panels (the
# gemma3 model in Q4_K_M and in Q5_0) gives the logits of the file read in place at every level.
. "$(dirname "$0")/lib.sh"
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf
plan 4
1b-synth --preset gemma3-tiny --type q4_k_m -o gemma3.gguf
1b-synth --preset gemma3-tiny --type q5_0 -o q5.gguf
out=$("$UNIT/route" "$S" gemma3.gguf q5.gguf 2>&1); rc=$?
ok $rc "registry and contexts ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^ok\|^not ok' <<<"$out" | sed 's/^/#   /'
echo '{"prompt":"a","max_tokens":1}' > one.jsonl
1b-gen -m "$S" -d nosuch < one.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 2 ] && grep -qE "unknown route 'nosuch' \(this build has cpu, ref, (hrx-sim, npu-sim; not built: hrx, npu|hrx, hrx-sim, npu-sim; not built: npu|hrx-sim, npu, npu-sim; not built: hrx|hrx, hrx-sim, npu, npu-sim)\)" err.txt
ok $? "1b-gen -d nosuch: exit 2, the routes this build has ($(cat err.txt))"
1b-gen -m "$S" -d npu < one.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 4 ] && grep -q "route 'npu' is not built into this binary: build with make XRT=1" err.txt
ok $? "1b-gen -d npu: exit 4, not built in ($(cat err.txt))"
OB_WEIGHTS=mmap 1b-gen -m "$S" < one.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 2 ] && [ ! -s out.jsonl ] && grep -q "OB_WEIGHTS=mmap: expected auto, copy or map" err.txt
ok $? "OB_WEIGHTS=mmap: exit 2, nothing written ($(cat err.txt))"
