#!/usr/bin/env bash
# tests/run's skip policy (its header): under OB_REQUIRE_ALL=1 only "no device", "optional
# toolchain" and "cpu lacks LEVEL" for a LEVEL in OB_ISA_OPTIONAL (default avx512) stay skips;
# every other skip, "cpu lacks avx2" included, is a failure. Run on a made-up test file.
. "$(dirname "$0")/lib.sh"
plan 5
mkdir -p "$T/tree/tests"
cp "$OB_TOP/tests/run" "$T/tree/tests/run"
cat > "$T/tree/tests/t0001-skips.sh" <<'EOT'
echo "1..6"
echo "ok 1 - a route # SKIP no device: no GPU"
echo "ok 2 - hipcc build # SKIP optional toolchain: no hipcc"
echo "ok 3 - avx512 kernels # SKIP cpu lacks avx512"
echo "ok 4 - avx2 kernels # SKIP cpu lacks avx2"
echo "ok 5 - the oracle # SKIP python packages missing"
echo "ok 6 - a check that ran"
EOT
summary() { env "$@" "$T/tree/tests/run" | tail -1; }
s=$(summary OB_REQUIRE_ALL=0); [ "$s" = "1 passed, 0 failed, 5 skipped" ]; ok $? "without OB_REQUIRE_ALL every skip is a skip ($s)"
s=$(summary OB_REQUIRE_ALL=1); [ "$s" = "1 passed, 2 failed, 3 skipped" ]; ok $? "OB_REQUIRE_ALL=1: cpu lacks avx2 and a missing package fail ($s)"
s=$(summary OB_REQUIRE_ALL=1 OB_ISA_OPTIONAL=); [ "$s" = "1 passed, 3 failed, 2 skipped" ]; ok $? "OB_ISA_OPTIONAL= : cpu lacks avx512 fails too ($s)"
s=$(summary OB_REQUIRE_ALL=1 OB_ISA_OPTIONAL="avx2 avx512"); [ "$s" = "1 passed, 1 failed, 4 skipped" ]; ok $? "OB_ISA_OPTIONAL='avx2 avx512': both levels may be missing ($s)"
out=$(OB_REQUIRE_ALL=1 "$T/tree/tests/run"); grep -q '^    ok 4 - avx2 kernels # SKIP cpu lacks avx2' <<<"$out"
ok $? "a skip that fails is shown with the failures"
