#!/usr/bin/env bash
# Replay the archive fuzz corpus through model resolution (ob_model_resolve, as every command
# opens its MODEL argument) built with AddressSanitizer and UBSan: no crash, no leak, and the
# harness's own checks (tests/fuzz/fuzz-archive.c): a refusal has a known code and one line and
# leaves nothing in the cache; an accepted archive leaves one blob, named by its sha256 and
# opened by its reader, and one link to it; a second resolve finds the link; nothing is written
# outside the cache. The seeds (tests/fuzz/archive-seeds.py) are a small GGUF and a small Q4NX
# pack in tar (ustar, GNU, pax), zip, cpio and 7-Zip, under gzip, bzip2, xz, lzma, zstd and lz4,
# and hostile archives: two models, truncated, bad CRC, names with "..", newlines or escapes.
# A longer run: make bin/fuzz/fuzz-archive && bin/fuzz/fuzz-archive -max_len=65536 \
#     tests/fuzz/corpus-archive
. "$(dirname "$0")/lib.sh"
plan 5
C=$OB_TOP/tests/fuzz/corpus-archive
n=$(compgen -G "$C/*" | wc -l)
[ "$n" -ge 40 ]; ok $? "corpus has $n inputs"
log=$(ASAN_OPTIONS=detect_leaks=1 OB_FUZZ_ARCHIVE_VERBOSE=1 "$OB_TOP/bin/replay/fuzz-archive" "$C" 2> "$T/err")
rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$log"
ok $? "replay of $n inputs under ASan/UBSan" || { tail -5 <<<"$log"; tail -20 "$T/err"; } | sed 's/^/# /'
# the checks ran on both sides: GGUFs and packs accepted, archives refused
g=$(grep -c '/cache/blobs/[0-9a-f]\{64\}\.gguf$' "$T/err") p=$(grep -c '/cache/blobs/[0-9a-f]\{64\}\.q4nx$' "$T/err")
r=$(grep -c '/in: ' "$T/err")
[ "$g" -ge 20 ] && [ "$p" -ge 5 ] && [ "$r" -ge 15 ]
ok $? "accepted: $g GGUFs, $p packs; refused: $r"
# an archive holding two models is refused whatever the order of its members (lib/archive.c)
two=$(for f in two-ggufs.tar pack-two-dirs.tar.xz pack-top-and-dir.tar.xz pack-gguf-outside-after.tar.xz \
              pack-gguf-outside-before.tar.xz pack-meta-then-outside.tar.xz; do
          OB_FUZZ_ARCHIVE_VERBOSE=1 "$OB_TOP/bin/replay/fuzz-archive" "$C/$f" 2>&1 >/dev/null
      done | grep -cE 'holds (more than one (\.gguf file|Q4NX pack)|a Q4NX pack \(in .*\) and a \.gguf file outside it)')
[ "$two" -eq 6 ]; ok $? "two models in one archive: refused in each of 6 orders ($two)"
# and 1b-load says so as the man page does: exit 3, one line, the cache left empty
export OB_CACHE_DIR=$T/cache
out=$(1b-load "$C/pack-gguf-outside-after.tar.xz" 2>&1 >/dev/null); rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -qF "and a .gguf file outside it ('other/model.gguf')" <<<"$out" &&
    [ -z "$(find "$T/cache" -mindepth 2 2>/dev/null)" ]
ok $? "1b-load: a pack and a GGUF in one archive, exit 3 ($rc: $out)"
