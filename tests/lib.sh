# shellcheck shell=bash
# tests/lib.sh — TAP helpers sourced by every tests/tNNNN-*.sh.
#
#   plan N                    print the plan
#   ok COND_STATUS "desc"     use as:  cmd ...; ok $? "what it checks"
#   check "desc" cmd args...  run a command, ok if it exits 0
#   check_exit N "desc" cmd   ok if the command exits with status N
#   check_same "desc" A B     ok if files A and B are byte-identical (prints a diff otherwise)
#   skip "desc" "reason"      a skipped check; scripts/check fails every skip except those
#                             whose reason starts "no device", "optional toolchain" or "cpu lacks
#                             LEVEL" for an optional LEVEL (the policy: tests/run's header)
#   need_python MOD...        true if the test python has the modules; else returns 1
#   isa_lacks CC FLAGS...     the SIMD level this CPU lacks for code that CC compiles with FLAGS
#                             ("avx512 (avx512vnni)"), nothing when it can run it (see below)
#   poke FILE TENSOR BYTES    overwrite a GGUF tensor's first bytes (printf escapes)
#   hostile_models            nan.gguf and big.gguf in the current directory (see below)
#
# Paths: $OB_TOP (repo root), $BIN (built commands), $UNIT (unit tests), $T (a scratch dir
# removed at exit), $SHARED (../shared), $PY (python with the test packages).
set -u
OB_TOP=${OB_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=$OB_TOP/bin
UNIT=$OB_TOP/bin/unit
SHARED=${OB_SHARED:-$(cd "$OB_TOP/.." && pwd)/shared}
if [ -z "${PY:-}" ]; then
    if [ -x "$OB_TOP/.venv/bin/python" ]; then PY=$OB_TOP/.venv/bin/python; else PY=python3; fi
fi
export PATH="$BIN:$PATH" LC_ALL=C OB_CACHE_DIR
mkdir -p "$OB_TOP/tests/tmp"
T=$(mktemp -d "$OB_TOP/tests/tmp/$(basename "$0" .sh).XXXXXX")
OB_CACHE_DIR=$T/cache
trap 'rm -rf "$T"' EXIT
_n=0

plan() { echo "1..$1"; }

ok() {
    _n=$((_n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $_n - $2"; else echo "not ok $_n - $2"; fi
    return "$1"
}

check() {
    local d=$1; shift
    local out
    out=$("$@" 2>&1)
    local rc=$?
    ok $rc "$d" || printf '%s\n' "$out" | head -20 | sed 's/^/# /'
}

check_exit() {
    local want=$1 d=$2; shift 2
    local out
    out=$("$@" 2>&1)
    local rc=$?
    [ "$rc" -eq "$want" ]
    ok $? "$d (exit $rc, want $want)" || printf '%s\n' "$out" | head -20 | sed 's/^/# /'
}

check_same() {
    local d=$1 a=$2 b=$3
    cmp -s "$a" "$b"
    ok $? "$d" || diff -u "$a" "$b" | head -30 | sed 's/^/# /'
}

skip() {
    _n=$((_n + 1))
    echo "ok $_n - $1 # SKIP $2"
}

need_python() {
    local m
    for m in "$@"; do
        "$PY" -c "import $m" 2>/dev/null || return 1
    done
    return 0
}

# isa_lacks CC FLAGS...: whether this CPU can run what CC compiles with FLAGS. Prints nothing
# when it can; else the lowest SIMD level it lacks and the extension that decides, e.g. "avx512
# (avx512vnni)", to be the reason of a "cpu lacks LEVEL" skip. The extensions come from the
# flags themselves, as the compiler's predefined macros (__AVX2__, __F16C__, __BMI2__,
# __AVX512VNNI__, ...: -mavx512vnni and -march=native alike); bin/unit/cpu-has asks CPUID about
# those a SIMD level's flags enable (lib/host/simd.c), and honours OB_CPU_LACKS=avx2|avx512, so
# that a machine with AVX-512 can take the path of one without it. An extension no level uses
# (one -march=native turns on because this CPU has it) is not judged: such code runs, and a
# crash stays a failure. Returns 2 (a failure, not a skip) when it cannot tell: the compiler
# refused the flags, cpu-has is missing or OB_CPU_LACKS is not a level. Under OB_CPU_EMU (a
# command that runs an x86-64 program on another CPU: t1329's qemu-x86_64 -cpu MODEL) it asks
# that CPU, and the tests that run code compiled for a SIMD level (t1330) run it there.
isa_lacks() {
    local probe=$T/.isa-probe.c exts out rc lv ext
    : > "$probe"
    # the same language as the real compile (g++ and clang++ take a .c file as C++)
    exts=$("$@" -dM -E "$probe" 2>/dev/null) || return 2
    exts=$(sed -nE 's/^#define __(AVX[A-Z0-9_]*|FMA|F16C|BMI2?)__ .*/\1/p' <<<"$exts" | tr '[:upper:]' '[:lower:]')
    [ -n "$exts" ] || return 0
    # shellcheck disable=SC2086  # one extension a word; OB_CPU_EMU a command and its arguments
    out=$(${OB_CPU_EMU:-} "$UNIT/cpu-has" $exts 2>&1); rc=$?
    case $rc in
    0) return 0 ;;
    1) read -r lv ext <<<"$out"; echo "$lv ($ext)" ;;
    *) echo "$out" >&2; return 2 ;;
    esac
}

# poke FILE TENSOR BYTES: write BYTES (backslash escapes: '\x00\xc0') at the first value of
# TENSOR in FILE
poke() {
    local off
    off=$(1b-load --tensors "$1" | grep "\"tensor\":\"$2\"" | grep -o '"offset":[0-9]*' | cut -d: -f2)
    [ -n "$off" ] && printf '%b' "$3" | dd of="$1" bs=1 seek="$off" conv=notrunc status=none
}

# stories260K with one weight made non-finite, as a hostile file may hold (1b-load accepts
# both): nan.gguf has a NaN in output_norm.weight (every logit NaN), big.gguf 3e38 in
# output.weight (token 0's logit +Inf in some rows only)
hostile_models() {
    cp "$SHARED/models/stories260K.gguf" nan.gguf && poke nan.gguf output_norm.weight '\x00\x00\xc0\x7f' &&
        cp "$SHARED/models/stories260K.gguf" big.gguf && poke big.gguf output.weight '\xe6\xb1\x61\x7f'
}
