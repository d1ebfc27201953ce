#!/usr/bin/env bash
# A user's CFLAGS cannot change the bits: the library and 1b-gen built from a copy of the tree
# with `make CFLAGS='-O2 -march=native'` (FMA contraction, AVX-512 VNNI where the CPU has it)
# and with CFLAGS='-O3 -ffp-contract=fast -ffast-math' generate the same tokens and log-prob
# bits as the default build, at every SIMD level this CPU has, and on hrx-sim (the same flags
# as CXXFLAGS for its C++). What the Makefile cannot undo
# (-Ofast, x87 arithmetic) is refused; the command line cannot drop the fixed flags. A build
# whose CFLAGS ask for more than this CPU runs (-march=native under OB_CPU_LACKS=avx512, say:
# tests/lib.sh isa_lacks) is built and checked, and its runs are skips, "cpu lacks LEVEL".
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
S=$SHARED/models/stories260K.gguf
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make "$@"; }   # a make of its own, not make check's
levels=(scalar avx2 avx512)
best=$("$UNIT/kernels" --best-isa 2>&1) || best="kernels --best-isa failed: $best"
builds=("-O2 -march=native" "-O3 -ffp-contract=fast -ffast-math")
plan $(( ${#builds[@]} * (3 + ${#levels[@]}) + 5 ))

cat > "$T/req.jsonl" <<'EOF'
{"id":"a","prompt":"Once upon a time","max_tokens":48,"top_logprobs":3}
{"id":"b","prompt":"The little dog","max_tokens":32,"top_logprobs":5}
{"id":"c","prompt":"Lily had a red ball. She","max_tokens":32,"temperature":0.8,"seed":7,"top_logprobs":2}
EOF
# token ids and log-prob bits of every result, one per line
fingerprint() {   # GEN LEVEL OUT [ROUTE]
    OB_SIMD=$2 "$1" -m "$S" -t 2 -d "${4:-cpu}" < "$T/req.jsonl" 2> "$3.err" |
        grep -oE '"(id|bits)":("[0-9a-f]+"|[0-9]+)' > "$3"
    [ "${PIPESTATUS[0]}" -eq 0 ] && [ -s "$3" ]
}
has_level() {     # LEVEL: does this CPU have it (levels are ordered)
    local l
    for l in "${levels[@]}"; do
        [ "$l" = "$1" ] && return 0
        [ "$l" = "$best" ] && return 1
    done
    return 1
}

# a copy of the sources only (no objects), so each build starts from nothing
mkdir -p "$T/src"
tar -C "$OB_TOP" --exclude='*.o' --exclude='*.d' --exclude='*.a' -cf - Makefile lib cmd | tar -C "$T/src" -xf -
for l in "${levels[@]}"; do
    has_level "$l" && fingerprint "$BIN/1b-gen" "$l" "$T/default.$l"
done
fingerprint "$BIN/1b-gen" scalar "$T/default.hrx-sim" hrx-sim

n=0
for flags in "${builds[@]}"; do
    n=$((n + 1))
    rm -rf "$T/b$n"; cp -r "$T/src" "$T/b$n"
    mk -s -C "$T/b$n" -j2 CFLAGS="$flags" CXXFLAGS="$flags" bin/1b-gen > "$T/b$n.log" 2>&1
    ok $? "make CFLAGS='$flags' CXXFLAGS='$flags' bin/1b-gen builds" || sed 's/^/# /' "$T/b$n.log" | tail -5
    # crtfastmath.o (linked by -ffast-math unless undone) would flush subnormals at start-up
    [ -x "$T/b$n/bin/1b-gen" ] && ! nm "$T/b$n/bin/1b-gen" | grep -q set_fast_math
    ok $? "CFLAGS='$flags': no fast-math start-up code linked"
    # shellcheck disable=SC2086  # the flags, a word each
    lacks=$(isa_lacks cc $flags) || lacks="cannot tell whether this CPU runs CFLAGS='$flags'"
    for l in "${levels[@]}"; do
        if ! has_level "$l" || [ -n "$lacks" ]; then
            d="CFLAGS='$flags', OB_SIMD=$l: same tokens and bits as the default build"
            if [[ $lacks == "cannot tell"* ]]; then ok 1 "$d: $lacks"
            else skip "$d" "cpu lacks ${lacks:-$l}"; fi
            continue
        fi
        fingerprint "$T/b$n/bin/1b-gen" "$l" "$T/b$n.$l"
        check_same "CFLAGS='$flags', OB_SIMD=$l: same tokens and bits as the default build ($(wc -l < "$T/default.$l") values)" \
            "$T/default.$l" "$T/b$n.$l"
    done
    d="CXXFLAGS='$flags', -d hrx-sim: same tokens and bits as the default build"
    if [[ $lacks == "cannot tell"* ]]; then ok 1 "$d: $lacks"; continue; fi
    if [ -n "$lacks" ]; then skip "$d" "cpu lacks $lacks"; continue; fi
    fingerprint "$T/b$n/bin/1b-gen" scalar "$T/b$n.hrx-sim" hrx-sim
    check_same "$d ($(wc -l < "$T/default.hrx-sim") values)" "$T/default.hrx-sim" "$T/b$n.hrx-sim"
done

# refused at parse time, before anything is built
out=$(mk -s -C "$T/src" -n CFLAGS='-O2 -Ofast' bin/1b-gen 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "Ofast: refused" <<<"$out"; ok $? "CFLAGS=-Ofast is refused (exit $rc: $out)"
out=$(mk -s -C "$T/src" -n CXXFLAGS='-O2 -Ofast' bin/1b-gen 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "Ofast: refused" <<<"$out"; ok $? "CXXFLAGS=-Ofast (hrx-sim's C++) is refused (exit $rc: $out)"
out=$(mk -s -C "$T/src" -n CFLAGS='-O2 -mfpmath=387' bin/1b-gen 2>&1); rc=$?
[ $rc -ne 0 ] && grep -q "refused.*__FLT_EVAL_METHOD__" <<<"$out"; ok $? "CFLAGS=-mfpmath=387 is refused (exit $rc: $out)"

# the command line cannot drop what the build needs: every object keeps -ffp-contract=off as its
# last word on contraction, and the AVX2 kernels keep their ISA flags
out=$(mk -s -C "$T/src" print-cflags CFLAGS='-O2 -ffp-contract=fast' OB_EXACT= OB_ISA_avx2= \
      OB_WARN= ALL_CPPFLAGS= 2>"$T/make.err")
bad=$(awk -F': ' '{ c = ""; n = split($2, w, " "); for (i = 1; i <= n; i++) if (w[i] ~ /^-ffp-contract=/) c = w[i];
                    if (c != "-ffp-contract=off") print $1 }' <<<"$out" | head -3)
[ -z "$bad" ] && [ "$(wc -l <<<"$out")" -gt 30 ]; ok $? "make OB_EXACT= CFLAGS=-ffp-contract=fast: every object still ends on -ffp-contract=off${bad:+ (not: $bad)}"
k=$(grep -E '^lib/cpu/kernels/[a-z0-9]+-avx2\.o: ' <<<"$out")
[ -n "$k" ] && ! grep -qv -- ' -mavx2 -mfma' <<<"$k"
ok $? "make OB_ISA_avx2= CFLAGS=...: the AVX2 kernels keep -mavx2 -mfma"
