#!/usr/bin/env bash
# Models in archives and the extraction cache under hostile input: what extraction may write is
# bounded by the member's own GGUF header, a member that is not a whole GGUF leaves nothing in
# the cache, the free space is checked before a large write, partial files of killed processes
# are removed by the next run (and those of live ones are not), two processes that resolve
# the same archive extract it once, and a file's first bytes never make 1b run a program (the
# compressions libarchive hands to lrzip, lzop or grzip are refused instead).
. "$(dirname "$0")/lib.sh"
plan 20
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
export OB_CACHE_DIR=$T/cache

le32() { local i; for i in 0 1 2 3; do printf '%b' "\\x$(printf %02x $(( ($1 >> (8 * i)) & 255 )))"; done; }
le64() { local i; for i in 0 1 2 3 4 5 6 7; do printf '%b' "\\x$(printf %02x $(( ($1 >> (8 * i)) & 255 )))"; done; }
# a GGUF header with one F32 tensor "x" of N elements, padded to 32 bytes (64 in all): the
# file the header describes is 64 + 4N bytes
header1() { printf GGUF; le32 3; le64 1; le64 0; le64 1; printf x; le32 1; le64 "$1"; le32 0; le64 0; head -c 7 /dev/zero; }
# nothing of ours in the cache: no blob, no link, no partial file
empty_cache() { [ -z "$(find "$OB_CACHE_DIR/blobs" "$OB_CACHE_DIR/archives" -mindepth 1 -maxdepth 1 2>/dev/null)" ]; }
fresh() { rm -rf "$OB_CACHE_DIR"; }

# 1. a 24-byte "GGUF" (no tensors, no keys) followed by 100 MB of zeros, 3 KB as .tar.zst: the
# header says the file ends at byte 24, so extraction stops at once (the file-size limit would
# kill a process that wrote the 100 MB)
mkdir z && { printf GGUF; le32 3; le64 0; le64 0; head -c 100000000 /dev/zero; } > z/zero.gguf
tar -C z --zstd -cf zero.tar.zst zero.gguf && rm -r z
fresh
out=$( (ulimit -f 20000; 1b-load zero.tar.zst) 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "zero.tar.zst: zero.gguf: .*header describes 24" <<<"$out"
ok $? "100 MB of zeros after a GGUF header of 24 bytes: refused at once, exit 3 ($rc: $out)"
empty_cache; ok $? "  and nothing is left in the cache"

# 2. a truncated GGUF in a well-formed tar: refused, no blob and no link
head -c 600000 "$S" > cut.gguf && tar cf cut.tar cut.gguf
fresh
out=$(1b-load cut.tar 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "cut.gguf: .*600000 bytes but its GGUF header describes 1185376" <<<"$out"
ok $? "a GGUF cut at 600000 of its 1185376 bytes: exit 3 ($out)"
empty_cache; ok $? "  and neither its blob nor its link is left"

# 3. bytes after the last tensor (beyond the padding writers add): refused
cp "$S" long.gguf && head -c 4096 /dev/zero >> long.gguf && tar czf long.tar.gz long.gguf
fresh
out=$(1b-load long.tar.gz 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "long.gguf: .*1189472 bytes but its GGUF header describes 1185376" <<<"$out"
ok $? "a GGUF with 4096 bytes after its last tensor: exit 3 ($out)"
empty_cache; ok $? "  and nothing is left"

# 4. a header that never ends (a metadata count no file can hold, then zeros): extraction
# stops after 64 MiB instead of writing the whole member
mkdir h && { printf GGUF; le32 3; le64 0; le64 $((1 << 40)); head -c 70000000 /dev/zero; } > h/endless.gguf
tar -C h --zstd -cf endless.tar.zst endless.gguf && rm -r h
fresh
out=$( (ulimit -f 68000; 1b-load endless.tar.zst) 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "endless.gguf: no complete GGUF header in its first 67108864 bytes" <<<"$out"
ok $? "a header without end: refused after 64 MiB ($rc: $out)"
empty_cache; ok $? "  and nothing is left"

# 5. a header whose tensors need more than the disk has: a sparse 4 TiB member in a 10 KB tar;
# the free space is checked before the rest is written (exit 5, a runtime failure)
mkdir sp && header1 $((1 << 40)) > sp/huge.gguf &&
    truncate -s $((64 + (1 << 42))) sp/huge.gguf 2>/dev/null && tar -C sp --sparse -cf huge.tar huge.gguf
rm -rf sp
fresh
free=$(df -k --output=avail "$T" | tail -1)
if [ ! -f huge.tar ]; then
    skip "a 4 TiB member: refused for want of space" "this file system cannot hold a sparse 4 TiB file"
elif [ "$free" -lt $((1 << 31)) ]; then
    out=$( (ulimit -f 20000; 1b-load huge.tar) 2>&1); rc=$?
    [ $rc -eq 5 ] && grep -q "huge.gguf: extracting it needs 4398046507072 more bytes in .*/blobs, where only" <<<"$out"
    ok $? "a 4 TiB member: refused for want of space before writing it, exit 5 ($rc: $out)"
else
    skip "a 4 TiB member: refused for want of space" "the cache's file system has more than 2 TiB free"
fi
empty_cache; ok $? "  and nothing is left"

# 6. a file padded after its last tensor, as gguf-py and ggml write them, still extracts
if need_python gguf numpy; then
    "$PY" - pad.gguf <<'PY'
import sys, numpy as np, gguf
w = gguf.GGUFWriter(sys.argv[1], "llama")
w.add_tensor("x", np.arange(3, dtype=np.float32))     # 12 bytes, then 20 of padding
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
    tar cf pad.tar pad.gguf
    fresh
    [ "$(1b-load --meta general.architecture pad.tar)" = '"llama"' ] && [ $(( $(stat -c %s pad.gguf) % 32 )) -eq 0 ]
    ok $? "a GGUF padded after its last tensor (gguf-py) extracts and reads"
else
    skip "a GGUF padded after its last tensor extracts" "python gguf package missing (scripts/setup)"
fi

# 7. partial files: those no live process holds are removed by the next run, the others kept
cp "$S" m.gguf && tar cf m.tar m.gguf
fresh
1b-load m.tar > /dev/null
echo partial > "$OB_CACHE_DIR/blobs/.extract.dead01"
echo partial > "$OB_CACHE_DIR/blobs/.extract.live01"
flock "$OB_CACHE_DIR/blobs/.extract.live01" sleep 3 &
holder=$!
sleep 0.3
1b-load m.tar > /dev/null
[ ! -e "$OB_CACHE_DIR/blobs/.extract.dead01" ]; ok $? "a partial file no process holds is removed by the next run"
[ -e "$OB_CACHE_DIR/blobs/.extract.live01" ]; ok $? "a partial file a live process holds is kept"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# 8. a process killed while extracting (512 MiB of zeros: about a second of work, long enough
# to be caught) leaves its partial file; the next run removes it
mkdir k && header1 $((1 << 27)) > k/slow.gguf && truncate -s $((64 + (1 << 29))) k/slow.gguf &&
    tar -C k --zstd -cf slow.tar.zst slow.gguf && rm -r k
for sig in TERM KILL; do
    fresh
    1b-load slow.tar.zst > /dev/null 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        compgen -G "$OB_CACHE_DIR/blobs/.extract.*" > /dev/null && break
        sleep 0.01
    done
    kill -"$sig" "$pid" 2>/dev/null
    wait "$pid"; rc=$?
    n=$(compgen -G "$OB_CACHE_DIR/blobs/.extract.*" | wc -l)
    1b-load m.tar > /dev/null
    left=$(compgen -G "$OB_CACHE_DIR/blobs/.extract.*" | wc -l)
    [ "$rc" -gt 128 ] && [ "$n" -eq 1 ] && [ "$left" -eq 0 ]
    ok $? "SIG$sig during extraction (exit $rc) leaves $n partial file; the next run leaves $left"
done

# 9. one extraction per archive at a time: a second process waits for the first, then uses
# its blob; two at once both succeed with one blob
fresh
flock m.tar sleep 1 &
holder=$!
sleep 0.2
start=$(date +%s%N)
1b-load m.tar > /dev/null; rc=$?
waited=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$holder"
[ $rc -eq 0 ] && [ "$waited" -ge 600 ]; ok $? "1b-load waits while another process holds the archive (${waited} ms)"
fresh
1b-load m.tar > a.json & p1=$!
1b-load m.tar > b.json & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s a.json b.json && [ "$(find "$OB_CACHE_DIR/blobs" -mindepth 1 -maxdepth 1 | wc -l)" -eq 1 ] &&
    [ "$(find "$OB_CACHE_DIR/archives" -mindepth 1 -maxdepth 1 | wc -l)" -eq 1 ]
ok $? "two processes resolving one archive at once: both succeed, one blob, one link"

# 10. a blob damaged in the cache (or left truncated by an older 1b) is extracted again
fresh
1b-load m.tar > /dev/null && blob=$(ls "$OB_CACHE_DIR"/blobs/*.gguf) && truncate -s 600000 "$blob"
out=$(1b-load --check m.tar 2>&1); rc=$?
[ $rc -eq 0 ] && grep -q '"sha256":"270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"' <<<"$out" &&
    [ "$(stat -c %s "$blob")" -eq 1185376 ]
ok $? "a cached blob cut to 600000 bytes is noticed and extracted again ($rc)"

# 11. after all that, a valid archive still extracts and is reused
fresh
1b-load --check m.tar | grep -q '"sha256":"270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"' &&
    ino=$(stat -c %i "$OB_CACHE_DIR"/blobs/*.gguf) && 1b-load m.tar > /dev/null &&
    [ "$(stat -c %i "$OB_CACHE_DIR"/blobs/*.gguf)" = "$ino" ]
ok $? "a valid archive extracts whole and is reused"

# 12. compressions libarchive can only undo through another program (lrzip, lzop, grzip): the
# program is not run, even where it is installed, and the file is refused as no archive, the
# message naming the compression
mkdir bin && for p in lrzip lzop grzip; do
    printf '#!/bin/sh\ntouch "%s/ran-%s"\ncat > /dev/null\nexit 1\n' "$T" "$p" > "bin/$p"
    chmod +x "bin/$p"
done
{ printf 'LRZI\000\006'; head -c 120 /dev/zero; } > x.tar.lrz
{ printf '\211LZO\000\r\n\032\n'; head -c 120 /dev/zero; } > x.tar.lzo
{ printf 'GRZipII\000\002\004:)'; head -c 120 /dev/zero; } > x.tar.grz
fresh
bad=""
for f in lrzip:x.tar.lrz lzop:x.tar.lzo grzip:x.tar.grz; do
    out=$(PATH=$T/bin:$PATH 1b-load "${f#*:}" 2>&1); rc=$?
    [ $rc -eq 3 ] && [ "$(wc -l <<<"$out")" -eq 1 ] &&
        grep -q "${f#*:}: not a GGUF file nor a readable archive: compressed with ${f%:*}, which 1b does not read" <<<"$out" ||
        bad+="${f#*:}: $rc $out; "
done
ran=$(cd "$T" && compgen -G 'ran-*' | tr '\n' ' ')
[ -z "$bad" ] && [ -z "$ran" ] && empty_cache
ok $? "lrzip, lzop and grzip data: refused (exit 3, the compression named), no program run ($bad${ran:-none ran})"
