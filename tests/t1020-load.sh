#!/usr/bin/env bash
# 1b-load: facts of a real model (golden record), --tensors, --check, --meta, --ctx, archives
# and the extraction cache, non-finite detection, corrupt inputs and exit statuses.
. "$(dirname "$0")/lib.sh"
plan 32
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
cp "$S" stories260K.gguf

# facts: byte-identical to the golden record
1b-load stories260K.gguf > facts.json
check_same "stories260K facts match tests/golden/load-stories260K.json" "$OB_TOP/tests/golden/load-stories260K.json" facts.json

n=$(1b-load --tensors stories260K.gguf | wc -l)
[ "$n" -eq 49 ]; ok $? "--tensors: 1 facts record + 48 tensor records ($n)"
1b-load --tensors stories260K.gguf | sed -n 2p > t.json
grep -q '"tensor":"token_embd.weight","type":"F32","shape":\[64,512\]' t.json; ok $? "tensor record: name, type, shape"

out=$(1b-load --check stories260K.gguf); rc=$?
[ $rc -eq 0 ] && grep -q '"sha256":"270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"' <<<"$out" &&
    grep -q '"nan":0,"inf":0' <<<"$out"
ok $? "--check: sha256 of the file, no NaN/Inf, exit 0"

[ "$(1b-load --meta llama.block_count stories260K.gguf)" = 5 ]; ok $? "--meta of an integer"
[ "$(1b-load --meta tokenizer.ggml.tokens stories260K.gguf | head -c 31)" = '["<unk>","<s>","</s>","<0x00>",' ]; ok $? "--meta of a string array"
check_exit 3 "--meta of a missing key" 1b-load --meta no.such.key stories260K.gguf

kv=$(1b-load --ctx 100 stories260K.gguf | grep -o '"kv_bytes":[0-9]*')
[ "$kv" = '"kv_bytes":64000' ]; ok $? "--ctx 100: 5 layers x 4 kv heads x 8 x 100 x K,V x f16 = 64000 bytes ($kv)"

# a synthetic qwen3: hyper-parameters and the chat template
1b-synth --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" -o q.gguf
out=$(1b-load --template q.gguf)
grep -q '"architecture":"qwen3"' <<<"$out" && grep -q '"qk_norm":true,"tied_output":true' <<<"$out" &&
    grep -q '"rope_type":"neox"' <<<"$out" && grep -q '"n_vocab":151936' <<<"$out"
ok $? "synthetic qwen3: architecture, QK-norm, tied output, neox rope, vocab"
grep -q '"chat_template":{"name":"qwen3","raw":"{%- if tools %}' <<<"$out"; ok $? "--template: detected qwen3 and the raw string"

# archives: every format gives the same model; the second run reuses the cache
tar cf m.tar stories260K.gguf
tar czf m.tar.gz stories260K.gguf
tar --zstd -cf m.tar.zst stories260K.gguf
zip -q m.zip stories260K.gguf
for a in m.tar m.tar.gz m.tar.zst m.zip; do
    out=$(1b-load --check "$a")
    grep -q '"sha256":"270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"' <<<"$out"
    ok $? "$a: the archived model loads and hashes like the file"
done
blob=$(ls "$OB_CACHE_DIR"/blobs/*.gguf)
[ "$(compgen -G "$OB_CACHE_DIR/blobs/*" | wc -l)" -eq 1 ] && [ "$(basename "$blob")" = 270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d.gguf ]
ok $? "four archives share one content-addressed blob"
ino=$(stat -c %i "$blob")
1b-load m.tar.zst > /dev/null
[ "$(stat -c %i "$blob")" = "$ino" ] && [ "$(find "$OB_CACHE_DIR/blobs" -mindepth 1 -maxdepth 1 | wc -l)" -eq 1 ]
ok $? "a second run reuses the extracted blob"

# corrupt archives: clear error, exit 3, nothing left in the cache
export OB_CACHE_DIR=$T/cache2
head -c 200000 m.tar.gz > cut.tar.gz
out=$(1b-load cut.tar.gz 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "cut.tar.gz" <<<"$out"; ok $? "truncated .tar.gz: exit 3 ($out)"
[ -z "$(ls -A "$OB_CACHE_DIR"/blobs 2>/dev/null)" ]; ok $? "no partial file left in the cache"
cp stories260K.gguf second.gguf
tar cf two.tar stories260K.gguf second.gguf
out=$(1b-load two.tar 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "more than one .gguf" <<<"$out"; ok $? "archive with two models: exit 3 ($out)"
echo hello > readme.txt && tar cf none.tar readme.txt
out=$(1b-load none.tar 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "no .gguf" <<<"$out"; ok $? "archive without a model: exit 3 ($out)"

# non-finite values are found, in float tensors and in block scales
cp stories260K.gguf nan.gguf
off=$(1b-load --tensors nan.gguf | grep '"output_norm.weight"' | grep -o '"offset":[0-9]*' | cut -d: -f2)
printf '\x00\x00\xc0\x7f' | dd of=nan.gguf bs=1 seek="$off" conv=notrunc status=none
out=$(1b-load --check nan.gguf); rc=$?
[ $rc -eq 1 ] && grep -q '"nan":1,"inf":0' <<<"$out"; ok $? "a NaN in an F32 tensor: --check exit 1, counted"
1b-synth --preset qwen3-small --vocab 2000 --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" -o q8.gguf
off=$(1b-load --tensors q8.gguf | grep '"blk.0.attn_q.weight"' | grep -o '"offset":[0-9]*' | cut -d: -f2)
printf '\x00\x7c' | dd of=q8.gguf bs=1 seek="$off" conv=notrunc status=none
out=$(1b-load --check --tensors q8.gguf); rc=$?
[ $rc -eq 1 ] && grep -q '"tensor":"blk.0.attn_q.weight".*"nan":0,"inf":1' <<<"$out"; ok $? "an Inf Q8_0 block scale: found and located"

# bad input
head -c 3000 stories260K.gguf > short.gguf
out=$(1b-load short.gguf 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "offset" <<<"$out"; ok $? "truncated model: exit 3 with an offset ($out)"
check_exit 3 "not a model" 1b-load /etc/hostname
check_exit 3 "a directory" 1b-load "$T"
check_exit 3 "a missing file" 1b-load "$T/nope.gguf"
# every path that cannot be opened as a file is bad input (3), whatever errno says why: a
# loop of symbolic links, a dangling link, a file used as a directory, a name too long
ln -s loop-b "$T/loop-a"; ln -s loop-a "$T/loop-b"; ln -s "$T/nope.gguf" "$T/dangling"
bad=""
for p in "$T/loop-a" "$T/dangling" "$T/short.gguf/x" "$T/$(printf 'x%.0s' $(seq 300))"; do
    for c in "1b-load" "1b-gen -m" "1b-serve --port 0 -m"; do
        $c "$p" < /dev/null > /dev/null 2> err.txt; rc=$?
        [ $rc -eq 3 ] && [ "$(grep -c "^${c%% *}: " err.txt)" = 1 ] || bad="$bad [$c ${p##*/}: exit $rc, $(tail -1 err.txt)]"
    done
done
[ -z "$bad" ]; ok $? "a link loop, a dangling link, a file as a directory, a name too long: exit 3 from 1b-load, 1b-gen, 1b-serve${bad:+:$bad}"
check_exit 2 "no MODEL" 1b-load
check_exit 2 "two MODELs" 1b-load stories260K.gguf stories260K.gguf
check_exit 2 "--ctx 0" 1b-load --ctx 0 stories260K.gguf
check_exit 2 "--ctx abc" 1b-load --ctx abc stories260K.gguf
if [ -w /dev/full ]; then
    check_exit 5 "a write error on stdout" sh -c '1b-load stories260K.gguf > /dev/full'
else
    skip "a write error on stdout" "no /dev/full"
fi
