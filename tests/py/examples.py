#!/usr/bin/env python3
"""The examples of the manual pages and the README, as tests (tests/t0020-man-examples.sh).

    examples.py extract PAGE OUTDIR     one directory per example block under OUTDIR
    examples.py match EXPECTED ACTUAL   exit 0 when ACTUAL (a command's output) matches

An example block is a `.Bd -literal` display in the EXAMPLES section of a man page (mdoc), or
a run of lines indented by four spaces in the README. In a block:
  - a line that starts with "$ " is a shell command; the lines after it belong to it while the
    command is incomplete (it ends with a backslash, or `bash -n` finds it unfinished: an open
    quote, a trailing pipe);
  - a comment at the end of a command, "# exit N", is the exit status it must have (else 0);
  - the other lines up to the next command are the output it must print (standard output);
    "..." in a line stands for any text, and a line that is only "..." for any lines;
  - a README line that starts with "# " is a remark, not output;
  - a block without commands is Python when it imports something (it is run as a script),
    else the test fails: every example runs, or says why it cannot.
A man page marks a block that cannot run here with a comment in the page source just before
its `.Bd`:
    .\\" example: skip REASON
e.g. `.\\" example: skip no device: the npu route` (the reason is the skip's, as tests/run's
policy reads it).

Each block becomes OUTDIR/NNN/ with `title` (PAGE:LINE), `skip` (the reason, if any), and for
shell blocks one CMD.sh, CMD.expect (absent when the page shows no output) and CMD.exit per
command, numbered from 1; a Python block is `script.py`.
"""
import os
import re
import subprocess
import sys

ESCAPES = [("\\&", ""), ("\\e", "\\"), ("\\-", "-"), ("\\(aq", "'"), ("\\(dq", '"'),
           ("\\(em", "--"), ("\\(en", "-")]


def unescape(line):
    out, i = [], 0
    while i < len(line):
        for esc, rep in ESCAPES:
            if line.startswith(esc, i):
                out.append(rep)
                i += len(esc)
                break
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def man_blocks(path):
    """(line, skip, [lines]) for every literal display in EXAMPLES"""
    blocks, skip, in_ex, cur = [], None, False, None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith(".Sh "):
                in_ex = line == ".Sh EXAMPLES"
                continue
            if not in_ex:
                continue
            m = re.match(r'\.\\"\s*example:\s*skip\s+(.*)', line)
            if m and cur is None:
                skip = m.group(1).strip()
                continue
            if line.startswith(".Bd") and "-literal" in line:
                cur = (n, skip, [])
                skip = None
                continue
            if line.startswith(".Ed") and cur is not None:
                blocks.append(cur)
                cur = None
                continue
            if cur is not None:
                if line.startswith('.\\"'):
                    continue
                cur[2].append(unescape(line))
    return blocks


def readme_blocks(path):
    """runs of lines indented by four spaces (blank lines inside a run end it)"""
    blocks, cur = [], None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("    ") and line.strip():
                if cur is None:
                    cur = (n, None, [])
                cur[2].append(line[4:])
            else:
                if cur is not None:
                    blocks.append(cur)
                cur = None
    if cur is not None:
        blocks.append(cur)
    # only the example blocks: those with a command or a program (not the lists of tools)
    return [b for b in blocks if any(l.startswith("$ ") for l in b[2]) or
            any(re.match(r"(from \S+ )?import ", l) for l in b[2])]


def incomplete(cmd):
    if cmd.endswith("\\"):
        return True
    r = subprocess.run(["bash", "-n", "-c", cmd], capture_output=True)
    return r.returncode != 0


def split(lines, readme):
    """[(command, expected lines or None, exit status)] of a shell block"""
    cmds, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if readme and (line.startswith("# ") or line == "#"):
                i += 1
                continue
            if not cmds:
                raise ValueError("output before any command: %r" % line)
            cmds[-1][1].append(line)
            i += 1
            continue
        cmd = line[2:]
        i += 1
        while incomplete(cmd) and i < len(lines):
            cmd += "\n" + lines[i]
            i += 1
        status = 0
        m = re.search(r"#\s*exit\s+(\d+)\b[^\n]*$", cmd)
        if m:
            status = int(m.group(1))
        cmds.append([cmd, [], status])
    return cmds


def extract(page, outdir):
    readme = not page.endswith((".1", ".7"))
    blocks = readme_blocks(page) if readme else man_blocks(page)
    name = os.path.relpath(page, os.environ.get("OB_TOP", "."))
    for k, (line, skip, lines) in enumerate(blocks, 1):
        d = os.path.join(outdir, "%03d" % k)
        os.makedirs(d)
        with open(os.path.join(d, "title"), "w") as f:
            f.write("%s:%d\n" % (name, line))
        if skip:
            with open(os.path.join(d, "skip"), "w") as f:
                f.write(skip + "\n")
        if not any(l.startswith("$ ") for l in lines):
            if not any(re.match(r"(from \S+ )?import ", l) for l in lines):
                with open(os.path.join(d, "error"), "w") as f:
                    f.write("neither commands nor a Python program, and not marked to skip\n")
                continue
            with open(os.path.join(d, "script.py"), "w") as f:
                f.write("\n".join(lines) + "\n")
            continue
        try:
            cmds = split(lines, readme)
        except ValueError as e:
            with open(os.path.join(d, "error"), "w") as f:
                f.write("%s\n" % e)
            continue
        for j, (cmd, expect, status) in enumerate(cmds, 1):
            with open(os.path.join(d, "%d.sh" % j), "w") as f:
                f.write(cmd + "\n")
            with open(os.path.join(d, "%d.exit" % j), "w") as f:
                f.write("%d\n" % status)
            if expect:
                with open(os.path.join(d, "%d.expect" % j), "w") as f:
                    f.write("\n".join(expect) + "\n")


def pattern(expect_lines):
    parts = []
    for line in expect_lines:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("".join(r"[^\n]*" if p == "..." else re.escape(p)
                                 for p in re.split(r"(\.\.\.)", line)) + r"[ \t]*\n")
    return re.compile("".join(parts) + r"\Z")


def match(expect_path, actual_path):
    with open(expect_path, encoding="utf-8") as f:
        expect = f.read().splitlines()
    with open(actual_path, encoding="utf-8", errors="replace") as f:
        actual = f.read()
    actual = actual.rstrip("\n") + "\n" if actual.strip("\n") else ""   # trailing blank lines
    return pattern(expect).match(actual) is not None


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "extract":
        extract(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "match":
        sys.exit(0 if match(sys.argv[2], sys.argv[3]) else 1)
    else:
        sys.exit(__doc__)
