#!/usr/bin/env bash
# The hrx kernels (lib/hrx/*.hip) and hrx-sim, the executor that runs them on the host:
#  - the SIMT shim (tests/unit/hrx-shim.cc): thread and block indices, barriers, warp shuffles,
#    per-block shared memory (all-ones when a block starts: what a kernel reads of it unwritten
#    is NaN in the bitwise tests below), fiber stacks, and kernel bugs reported (a barrier or a
#    shuffle that not every thread reaches, a partial warp, a bad launch shape) instead of a hang;
#  - every kernel against lib/arith/ bit for bit (tests/unit/hrx.c): hrx-sim, and a GPU when
#    this build has one and the machine a device (else "# SKIP no device"); on hrx-sim with
#    its own large tiles and with the GPU's small ones (OB_HRX_SIM_TILES=gpu): the launches a
#    GPU makes;
#  - the kernels again with a block's threads run in reverse and in a scrambled order
#    (OB_HRX_SIM_ORDER, --quick, in the GPU's geometry: hrx-sim's own tiles never run on one):
#    a GPU promises no order between two barriers, so bits that change with it are a missing
#    barrier (the default order hides a read of a lower thread's store, the reverse one a
#    higher thread's);
#  - the same kernels under AddressSanitizer and UBSan (bin/san/unit/hrx), in both geometries:
#    no kernel reads or writes outside what it was given.
# tests/run: long (minutes: started first)
. "$(dirname "$0")/lib.sh"
plan 8
# run_unit NAME CMD...: one check for a TAP unit test, its failures shown
run_unit() {
    local name=$1 out rc; shift
    out=$("$@" 2>&1); rc=$?
    last_out=$out
    [ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
    ok $? "$name ($(grep -c '^ok' <<<"$out") checks, $(grep -c '# SKIP' <<<"$out") skipped)" ||
        grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
    grep '# SKIP\|^# [0-9]* barriers' <<<"$out" | sed 's/^/#   /'
}
run_unit "hrx-sim's SIMT executor: indices, barriers, shuffles, shared memory, bugs reported" \
    "$UNIT/hrx-shim"
run_unit "every hrx kernel equals lib/arith bit for bit" "$UNIT/hrx"
# the GPU section of that run: there when this build has a GPU runtime and the machine a GPU
if grep -q '^# hrx (' <<<"$last_out"; then
    ok 0 "the kernels on the GPU: $(grep '^# hrx (' <<<"$last_out" | tr '\n' ' ')"
else
    skip "the kernels on a GPU" "$(grep -m1 -o 'no device.*' <<<"$last_out")"
fi
OB_HRX_SIM_TILES=gpu run_unit "the same with the GPU's launch geometry (OB_HRX_SIM_TILES=gpu)" "$UNIT/hrx"
for o in reverse scramble; do
    OB_HRX_SIM_ORDER=$o OB_HRX_SIM_TILES=gpu run_unit "the same with a block's threads in $o \
order (OB_HRX_SIM_ORDER=$o, the GPU's geometry, --quick)" "$UNIT/hrx" --quick
done
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
run_unit "the kernels on hrx-sim under ASan and UBSan (--quick)" "$OB_TOP/bin/san/unit/hrx" --quick
OB_HRX_SIM_TILES=gpu run_unit "the same with the GPU's launch geometry" "$OB_TOP/bin/san/unit/hrx" --quick
