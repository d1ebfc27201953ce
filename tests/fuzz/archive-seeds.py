#!/usr/bin/env python3
"""Write the seeds of tests/fuzz/corpus-archive (fuzz-archive.c): small archives, good and bad,
in each format and filter lib/archive.c reads. Run from the top of the tree after a build:

    .venv/bin/python tests/fuzz/archive-seeds.py tests/fuzz/corpus-archive

It needs the gguf package (scripts/setup), bin/1b-synth and bin/1b-requant, the compressors
(gzip, bzip2, xz, zstd, lz4) and, for the cpio and 7-Zip seeds, bsdtar (libarchive-tools;
skipped when missing). Every name a seed is written under says what it holds."""
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

import gguf
import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
tmp = tempfile.mkdtemp()


def tiny_gguf(values=8, pad=True):
    """A GGUF of one F32 tensor; gguf-py pads after the last tensor: pad=False cuts that off."""
    path = os.path.join(tmp, "t.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_string("general.name", "tiny")
    w.add_tensor("x", np.arange(values, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    data = open(path, "rb").read()
    return data if pad else data[: len(data) - (32 - 4 * values % 32) % 32]


G = tiny_gguf()
G_UNPADDED = tiny_gguf(5, pad=False)


def save(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def tar(members, fmt=tarfile.USTAR_FORMAT):
    """members: (name, bytes | None for a directory | ("sym", target) | ("hard", target))"""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            if data is None:
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif isinstance(data, tuple):
                ti.type = tarfile.SYMTYPE if data[0] == "sym" else tarfile.LNKTYPE
                ti.linkname = data[1]
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
        end = t.offset
    return b.getvalue()[: end + 1024]     # the two end blocks, not the 10 KB record's padding


def zipped(members, method=zipfile.ZIP_DEFLATED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", method) as z:
        for name, data in members:
            z.writestr(name, data)
    return b.getvalue()


def filt(cmd, data):
    return subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=True).stdout


def xz(members):
    return filt(["xz", "-9e"], tar(members))


# a GGUF in each container and filter
plain = tar([("model.gguf", G)])
save("gguf.tar", plain)
save("gguf-gnu.tar", tar([("model.gguf", G)], tarfile.GNU_FORMAT))
save("gguf-pax.tar", tar([("model.gguf", G)], tarfile.PAX_FORMAT))
for ext, cmd in [("gz", ["gzip", "-9n"]), ("bz2", ["bzip2", "-9"]), ("xz", ["xz", "-9"]),
                 ("lzma", ["xz", "--format=lzma"]), ("zst", ["zstd", "-19", "-q"]),
                 ("lz4", ["lz4", "-q"])]:
    save("gguf.tar." + ext, filt(cmd, plain))
save("gguf-stored.zip", zipped([("model.gguf", G)], zipfile.ZIP_STORED))
save("gguf-deflate.zip", zipped([("model.gguf", G)]))
save("gguf-bzip2.zip", zipped([("model.gguf", G)], zipfile.ZIP_BZIP2))
save("gguf-lzma.zip", zipped([("model.gguf", G)], zipfile.ZIP_LZMA))
save("gguf-unpadded.tar", tar([("m.gguf", G_UNPADDED)]))

# where the GGUF sits, and what is beside it
save("gguf-in-dirs.tar", tar([("a/", None), ("a/b/", None), ("a/b/model.gguf", G)]))
save("gguf-beside-others.tar", tar([("README", b"a model\n"), ("link.gguf", ("sym", "model.gguf")),
                                    ("model.gguf", G), ("notes.txt", b"x" * 100)]))
save("gguf-hardlink.tar", tar([("model.gguf", G), ("same.gguf", ("hard", "model.gguf"))]))
save("gguf-dir-named-gguf.tar", tar([("d.gguf/", None), ("model.gguf", G)]))
save("gguf-dotdot-name.tar", tar([("../../evil.gguf", G)]))
save("gguf-absolute-name.tar", tar([("/tmp/evil.gguf", G)], tarfile.GNU_FORMAT))
save("gguf-newline-name.tar", tar([("a\nb\x1b[31m.gguf", G)], tarfile.PAX_FORMAT))
save("gguf-long-name.tar", tar([("d" * 200 + "/" + "n" * 120 + ".gguf", G)], tarfile.PAX_FORMAT))

# refused: what is not one whole GGUF
save("two-ggufs.tar", tar([("a.gguf", G), ("b.gguf", G)]))
save("no-gguf.tar", tar([("model.bin", G)]))
save("empty.tar", tar([]))
save("empty-gguf.tar", tar([("model.gguf", b"")]))
save("not-gguf.tar", tar([("model.gguf", b"GGUF" + b"\xff" * 60)]))
save("gguf-truncated.tar", plain[: 512 + len(G) // 2])
save("gguf-cut-member.tar", tar([("model.gguf", G[: len(G) - 8])]))
save("gguf-trailing.tar", tar([("model.gguf", G + b"\0" * 64)]))
save("gguf-short-header.tar", tar([("model.gguf", G[:20])]))
z = bytearray(zipped([("model.gguf", G)], zipfile.ZIP_STORED))
z[30 + len("model.gguf") + 40] ^= 0xFF        # a byte of the stored data: its CRC no longer holds
save("gguf-zip-bad-crc.zip", bytes(z))
save("gguf.tar.gz-truncated", filt(["gzip", "-9n"], plain)[:100])
save("not-an-archive", b"hello, this is text\n" * 4)
save("bare.gguf", G)

# Q4NX packs: a small model through 1b-requant
lt, pack = os.path.join(tmp, "lt.gguf"), os.path.join(tmp, "pack")
subprocess.run(["bin/1b-synth", "--preset", "llama-tiny", "--vocab", "300", "--embd", "32",
                "--layers", "1", "--heads", "1", "--kv-heads", "1", "--head-dim", "32",
                "--ff", "32", "--tied", "--no-chat-template", "--type", "q4_0", "-o", lt],
               check=True)
subprocess.run(["bin/1b-requant", "--type", "q4nx", "-o", pack, lt], check=True,
               stdout=subprocess.DEVNULL)
files = {n: open(os.path.join(pack, n), "rb").read() for n in sorted(os.listdir(pack))}
top = list(files.items())
save("pack-top.tar.xz", xz(top))
save("pack-in-dir.tar.zst",
     filt(["zstd", "-19", "-q"], tar([("p/", None)] + [("p/" + n, d) for n, d in top])))
save("pack-with-gguf-first.tar.xz", xz([("model.gguf", G)] + top))
save("pack-extras.tar.xz", xz(top + [(".hidden", b"x"), ("sub/", None), ("sub/f", b"y"),
                                      ("l", ("sym", "/etc/passwd"))]))
save("pack-deflate.zip", zipped(top))
save("pack-manifest-only.tar", tar([("manifest.json", files["manifest.json"])]))
save("pack-file-twice.tar.xz", xz(top + [("meta.gguf", files["meta.gguf"])]))
bad = bytearray(files["weights.q4nx"])
bad[100] ^= 1
save("pack-bad-sha.tar.xz", xz([(n, bytes(bad) if n == "weights.q4nx" else d) for n, d in top]))
# two models: refused, whatever the order of the members
save("pack-gguf-outside-after.tar.xz", xz(top + [("other/model.gguf", G)]))
save("pack-gguf-outside-before.tar.xz",
     xz([("other/model.gguf", G)] + [("p/" + n, d) for n, d in top]))
save("pack-meta-then-outside.tar.xz", xz([("p/meta.gguf", files["meta.gguf"]), ("q/x.gguf", G),
                                          ("p/manifest.json", files["manifest.json"]),
                                          ("p/weights.q4nx", files["weights.q4nx"])]))
save("pack-top-and-dir.tar.xz", xz(top + [("b/" + n, d) for n, d in top]))
save("pack-two-dirs.tar.xz", xz([("a/" + n, d) for n, d in top] + [("b/" + n, d) for n, d in top]))

# cpio and 7-Zip, written by bsdtar from a directory
if shutil.which("bsdtar"):
    src = os.path.join(tmp, "src")
    os.makedirs(src)
    open(os.path.join(src, "model.gguf"), "wb").write(G)
    for name, fmt in [("gguf-newc.cpio", "newc"), ("gguf-odc.cpio", "odc"), ("gguf.7z", "7zip")]:
        save(name, subprocess.run(["bsdtar", "-b", "1", "-C", src, "--format", fmt, "-cf", "-",
                                   "model.gguf"],
                                  stdout=subprocess.PIPE, check=True).stdout)
    psrc = os.path.join(tmp, "psrc")
    shutil.copytree(pack, psrc)
    save("pack.7z", subprocess.run(["bsdtar", "-b", "1", "-C", psrc, "--format", "7zip", "-cf",
                                    "-", "."],
                                   stdout=subprocess.PIPE, check=True).stdout)
shutil.rmtree(tmp)
