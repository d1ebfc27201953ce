#!/usr/bin/env python3
# 1b-report — the determinism report of the field report, regenerated for any set of routes:
# runs 1b-gen, 1b-agree, 1b-logprobs and 1b-batchrep (the measuring tools; every number of the
# page is one of theirs, read from their --json reports) and writes a report directory: a
# Markdown page, the same as HTML (pandoc), the JSON reports, and PNG plots (gnuplot).
#
# Built to bin/1b-report by make (the version substituted) and installed beside the C tools,
# which it runs from its own directory (else from PATH). Standard library only; gnuplot and
# pandoc are programs (Debian's gnuplot-nox and pandoc; scripts/setup installs them).
#
# The report is written into a temporary directory beside DIR (.NAME.1b-report.XXXXXX) and
# renamed to DIR at the end: DIR is never half-written. Every route is checked before anything
# is written. man/1b-report.1 documents the options, the sections and the files.
import fcntl
import getopt
import json
import os
import platform
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

PROG = "1b-report"
VERSION = "@OB_VERSION@"

# (long name, short, argument, help); the order of --help and --list-options
OPTIONS = [
    ("model", "m", "MODEL", "the model of the -d routes (GGUF, or an archive holding one)"),
    ("device", "d", "ROUTE", "an in-process route (cpu, ref, ...); ROUTE=MODEL: its own model"),
    ("url", None, "URL", "a server route, OpenAI-compatible; NAME=URL names it"),
    ("output", "o", "DIR", "the report directory (replaced whole, at the end)"),
    ("prompts", None, "FILE", "request records (default: 1b's contrib/prompts.jsonl)"),
    ("max-tokens", None, "N", "tokens per stream and per batched answer (default 64)"),
    ("repeat", None, "N", "repeats of every request per route (default 5)"),
    ("rounds", None, "R", "rounds of every batched run (default 4)"),
    ("widths", None, "LIST", "batched widths, comma-separated (default 1,2,4,8)"),
    ("lengths", None, "LIST", "generated lengths at width 4 (default 16,32,64,128)"),
    ("top-logprobs", None, "N", "alternatives per token, 2 to 20 (default 5)"),
    ("thinking", None, "on|off", "the requests' thinking (default: as the records say)"),
    ("match-by", None, "id|text", "pair tokens by id (default) or by text"),
    ("threads", "t", "N", "threads of the in-process routes (default: the CPUs available)"),
    ("spec", None, "MODE", "speculative decoding of the in-process routes: ngram, draft or off (default; draft with --draft)"),
    ("draft", None, "MODEL", "the draft model of --spec draft (its vocabulary the model's)"),
    ("wait", None, "SECONDS", "--url: wait this long for a server to be ready (default 60)"),
    ("quick", None, None, "a small run: 3 prompts, 16 tokens, 2 repeats, 2 rounds, lengths 8,16"),
    ("quiet", "q", None, "print no progress"),
    ("help", "h", None, "show this help"),
    ("version", None, None, "show the version"),
    ("list-options", None, None, None),
]
SYNOPSIS = "1b-report -m MODEL -d ROUTE [-d ROUTE...] [--url [NAME=]URL...] -o DIR [options]"
ABOUT = ("Measure repetition, agreement between routes, batched repeats and the effect of length;\n"
         "write a report directory (Markdown, HTML, the tools' JSON reports, PNG plots).")

QUICK = {"prompts_n": 3, "max_tokens": 16, "repeat": 2, "rounds": 2, "lengths": [8, 16]}
DEFAULTS = {"max_tokens": 64, "repeat": 5, "rounds": 4, "widths": [1, 2, 4, 8],
            "lengths": [16, 32, 64, 128], "top_logprobs": 5, "wait": 60.0}
LENGTH_WIDTH = 4


class Fail(Exception):
    """a failure: one line for stderr and the exit status"""
    def __init__(self, status, msg):
        super().__init__(msg)
        self.status, self.msg = status, msg


class Interrupted(Exception):
    def __init__(self, sig):
        super().__init__(sig)
        self.sig = sig


def quote(s):
    """a word of the command line as an error message shows it: control bytes and bytes that
    are not UTF-8 (surrogate-escaped by Python) as \\xNN"""
    out = []
    for ch in s:
        c = ord(ch)
        if 0xdc80 <= c <= 0xdcff:
            out.append("\\x%02x" % (c - 0xdc00))
        elif c < 0x20 or c == 0x7f:
            out.append("\\x%02x" % c)
        else:
            out.append(ch)
    return "".join(out)


def write_fd(fd, text, name):
    """write all of text to fd; a failure is exit 5 naming the stream"""
    data = text.encode("utf-8", "surrogateescape")
    try:
        while data:
            n = os.write(fd, data)
            data = data[n:]
    except OSError as e:
        raise Fail(5, "%s: %s" % (name, e.strerror))


def say(msg):
    try:
        os.write(2, ("%s: %s\n" % (PROG, msg)).encode("utf-8", "surrogateescape"))
    except OSError:
        pass


def usage_error(msg):
    say(msg)
    say("invalid command line")
    try:
        os.write(2, ("usage: %s  (see %s --help)\n" % (SYNOPSIS, PROG)).encode())
    except OSError:
        pass
    sys.exit(2)


def help_text():
    lines = ["usage: " + SYNOPSIS, ABOUT, "", "options:"]
    for name, short, arg, text in OPTIONS:
        if text is None:
            continue
        left = ("-%s, " % short) if short else "    "
        left += "--" + name + ((" " + arg) if arg else "")
        lines.append("  %-26s %s" % (left, text))
    return "\n".join(lines) + "\n"


def list_options():
    out = []
    for name, short, arg, _ in OPTIONS:
        if short:
            out.append("-" + short)
        out.append("--" + name + (("=" + arg) if arg else ""))
    return "\n".join(out) + "\n"


def int_arg(opt, val, lo, hi):
    try:
        n = int(val, 10)
    except ValueError:
        usage_error("%s: '%s' is not an integer" % (opt, quote(val)))
    if n < lo or n > hi:
        usage_error("%s: %d is out of range [%d, %d]" % (opt, n, lo, hi))
    return n


def list_arg(opt, val, lo, hi):
    parts = val.split(",")
    if not val or any(not p for p in parts):
        usage_error("%s: '%s' is not a comma-separated list of integers" % (opt, quote(val)))
    out = []
    for p in parts:
        n = int_arg(opt, p, lo, hi)
        if n in out:
            usage_error("%s: %d is given twice" % (opt, n))
        out.append(n)
    return out


def parse_args(argv):
    shorts = "".join(s + (":" if a else "") for _, s, a, _ in OPTIONS if s)
    longs = [n + ("=" if a else "") for n, _, a, _ in OPTIONS]
    try:
        opts, rest = getopt.gnu_getopt(argv, shorts, longs)
    except getopt.GetoptError as e:
        o = ("--" if len(e.opt) > 1 or e.msg.startswith("option --") else "-") + e.opt
        if "requires argument" in e.msg:
            usage_error("option '%s' needs an argument" % quote(o))
        if "must not have an argument" in e.msg:
            usage_error("option '%s' takes no argument" % quote(o))
        if "not a unique prefix" in e.msg:
            usage_error("option '%s' is ambiguous" % quote(o))
        usage_error("unknown option '%s'" % quote(o))
    a = {"model": None, "devices": [], "urls": [], "output": None, "prompts": None,
         "thinking": None, "match_by": "id", "threads": None, "spec": None, "draft": None, "quick": False,
         "quiet": False}
    for o, v in opts:
        if o in ("-h", "--help"):
            write_fd(1, help_text(), "stdout")
            sys.exit(0)
        if o == "--version":
            write_fd(1, "%s %s\n" % (PROG, VERSION), "stdout")
            sys.exit(0)
        if o == "--list-options":
            write_fd(1, list_options(), "stdout")
            sys.exit(0)
        if o in ("-m", "--model"):
            a["model"] = v
        elif o in ("-d", "--device"):
            a["devices"].append(v)
        elif o == "--url":
            a["urls"].append(v)
        elif o in ("-o", "--output"):
            a["output"] = v
        elif o == "--prompts":
            a["prompts"] = v
        elif o == "--max-tokens":
            a["max_tokens"] = int_arg(o, v, 1, 16777216)
        elif o == "--repeat":
            a["repeat"] = int_arg(o, v, 1, 1000)
        elif o == "--rounds":
            a["rounds"] = int_arg(o, v, 1, 1000)
        elif o == "--widths":
            a["widths"] = list_arg(o, v, 1, 256)
        elif o == "--lengths":
            a["lengths"] = list_arg(o, v, 1, 16777216)
        elif o == "--top-logprobs":
            a["top_logprobs"] = int_arg(o, v, 2, 20)
        elif o == "--thinking":
            if v not in ("on", "off"):
                usage_error("--thinking: '%s' is not on or off" % quote(v))
            a["thinking"] = v
        elif o == "--match-by":
            if v not in ("id", "text"):
                usage_error("--match-by: '%s' is not id or text" % quote(v))
            a["match_by"] = v
        elif o in ("-t", "--threads"):
            a["threads"] = int_arg(o, v, 1, 4096)
        elif o == "--spec":
            if v not in ("ngram", "draft", "off"):
                usage_error("--spec: '%s' is not ngram, draft or off" % quote(v))
            a["spec"] = v
        elif o == "--draft":
            a["draft"] = v
        elif o == "--wait":
            try:
                w = float(v)
            except ValueError:
                w = -1.0
            if not (0 < w <= 86400):
                usage_error("--wait: '%s' is not a number of seconds in (0, 86400]" % quote(v))
            a["wait"] = w
        elif o == "--quick":
            a["quick"] = True
        elif o in ("-q", "--quiet"):
            a["quiet"] = True
    if rest:
        usage_error("unexpected argument '%s'" % quote(rest[0]))
    if not a["output"]:
        usage_error("-o DIR is required")
    if not a["devices"] and not a["urls"]:
        usage_error("no route: give -d ROUTE or --url URL")
    if a["spec"] == "draft" and not a["draft"]:
        usage_error("--spec draft needs a draft model: give --draft MODEL")
    for k, v in DEFAULTS.items():
        if k not in a:
            a[k] = QUICK[k] if a["quick"] and k in QUICK else v
    a["prompts_n"] = QUICK["prompts_n"] if a["quick"] else None
    return a


# ---- routes ------------------------------------------------------------------------------

def slug(s):
    out = "".join(c if c.isalnum() or c in "._-" else "-" for c in s)
    return out.strip("-.") or "route"


def routes_of(a):
    """[{label, kind: "device"|"url", route or url, model}] in command-line order"""
    routes = []
    for d in a["devices"]:
        name, _, model = d.partition("=")
        if not name:
            usage_error("-d: '%s' names no route" % quote(d))
        model = model or a["model"]
        if not model:
            usage_error("-d %s: no model: give -m MODEL (or -d %s=MODEL)" % (quote(name), quote(name)))
        routes.append({"label": slug(name), "kind": "device", "route": name,
                       "model": os.path.abspath(model)})
    for i, u in enumerate(a["urls"]):
        name, sep, url = u.partition("=")
        if not sep or "://" in name or not name or not all(c.isalnum() or c in "._-" for c in name):
            name, url = "", u
        if not url:
            usage_error("--url: '%s' names no URL" % quote(u))
        label = slug(name) if name else "url%d" % (i + 1)
        routes.append({"label": label, "kind": "url", "url": url})
    seen = set()
    for r in routes:
        if r["label"] in seen:
            usage_error("route '%s' is given twice" % r["label"])
        seen.add(r["label"])
    return routes


def shown_url(url):
    """a URL without its user name and password, as 1b's tools show it"""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    host, slash, path = rest.partition("/")
    if "@" in host:
        host = host.rsplit("@", 1)[1]
    return scheme + sep + host + slash + path


# ---- running the tools -------------------------------------------------------------------

class Runner:
    def __init__(self, tools, quiet):
        self.tools, self.quiet = tools, quiet
        self.cwd = None
        self.child = None
        self.commands = []

    def run(self, argv, stdin=None, stdout=None, ok=(0,), record=True, env=None):
        """run a tool; stdin and stdout are paths relative to the report directory; returns
        (exit status, stderr text). A status outside ok is a Fail."""
        # URLs without their user name and password, as the tools show them
        shown = " ".join(shlex.quote(shown_url(w) if "://" in w else w) for w in argv)
        if stdin:
            shown += " < " + shlex.quote(stdin)
        if stdout:
            shown += " > " + shlex.quote(stdout)
        if not self.quiet:
            say(shown)
        exe = [self.tools.get(argv[0], argv[0])] + argv[1:]
        fin = open(os.path.join(self.cwd, stdin), "rb") if stdin else subprocess.DEVNULL
        fout = open(os.path.join(self.cwd, stdout), "wb") if stdout else subprocess.DEVNULL
        t0 = time.monotonic()
        try:
            self.child = subprocess.Popen(exe, cwd=self.cwd, stdin=fin, stdout=fout,
                                          stderr=subprocess.PIPE, env=env, preexec_fn=die_with_parent)
            _, err = self.child.communicate()
            rc = self.child.returncode
        except OSError as e:
            raise Fail(5, "%s: %s" % (argv[0], e.strerror))
        finally:
            self.child = None
            for f in (fin, fout):
                if f is not subprocess.DEVNULL:
                    f.close()
        err = err.decode("utf-8", "replace")
        if record:
            self.commands.append({"command": shown, "exit": rc,
                                  "seconds": round(time.monotonic() - t0, 3)})
        if rc not in ok:
            lines = [l for l in err.splitlines() if l.strip()]
            why = lines[-1] if lines else "no message"
            for l in lines:      # the tool's own one-line diagnosis, not its usage line
                if l.startswith(argv[0] + ":") and "invalid command line" not in l:
                    why = l
                    break
            if rc < 0:
                status, why = 5, "%s (killed by signal %d)" % (why, -rc)
            elif argv[0] == "1b-agree" and rc == 2:
                status = 5                         # 1b-agree's 2 is its "trouble"
            else:
                status = rc if rc in (2, 3, 4, 5) else 5
            raise Fail(status, "%s: exit %d: %s" % (shown.split(" <")[0].split(" >")[0], rc, why))
        return rc, err

    def kill(self):
        c = self.child
        if c and c.poll() is None:
            try:
                c.terminate()
                c.wait(5)
            except Exception:
                c.kill()


def server_models(url):
    """a server's first model from its /v1/models ({id, sha256, ...} where 1b-serve gives them),
    or {} (a server owes us no sha256; its records name the model only)"""
    import base64
    import urllib.parse
    import urllib.request
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    if ":" in host:
        host = "[" + host + "]"
    netloc = host + (":%d" % u.port if u.port else "")
    path = u.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    req = urllib.request.Request(urllib.parse.urlunsplit((u.scheme, netloc, path + "/v1/models", "", "")))
    if u.username is not None:
        cred = "%s:%s" % (urllib.parse.unquote(u.username), urllib.parse.unquote(u.password or ""))
        req.add_header("Authorization", "Basic " + base64.b64encode(cred.encode()).decode())
    elif os.environ.get("OB_API_KEY"):
        req.add_header("Authorization", "Bearer " + os.environ["OB_API_KEY"])
    try:
        with urllib.request.urlopen(req, timeout=10) as f:
            d = json.loads(f.read(1 << 20).decode("utf-8"))
        m = d["data"][0]
        return m if isinstance(m, dict) else {}
    except Exception:
        return {}


def die_with_parent():
    """in a child, before exec: SIGTERM when 1b-report dies, even by SIGKILL (Linux prctl)"""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)       # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def route_args(r, a, tool="1b-gen"):
    """the options that select route r for 1b-gen, 1b-logprobs and 1b-batchrep. A server
    answers with its first model (no -m: there it would be the name to request); 1b-logprobs
    gets the model file, when there is one, for the tokenizer of records without ids."""
    if r["kind"] == "device":
        args = ["-m", r["model"], "-d", r["route"]]
        if a["threads"]:
            args += ["-t", str(a["threads"])]
        if a["spec"] and tool != "1b-logprobs":     # scoring drafts nothing
            args += ["--spec", a["spec"]]
        if a["draft"] and tool != "1b-logprobs":
            args += ["--draft", os.path.abspath(a["draft"])]
        return args
    args = ["--url", r["url"], "--wait", "%g" % a["wait"]]
    if tool == "1b-logprobs" and a["model"] and os.path.isfile(a["model"]):
        args += ["-m", os.path.abspath(a["model"])]
    return args


# ---- reading records (for the plots: per position, with 1b-agree's definitions) -----------

def f32(tok):
    """a token's float32 log-probability as a double, or None: the bits when given, else the
    decimal rounded to float32 (man/1b-agree.1, Log-probabilities and their bits)"""
    b = tok.get("bits")
    if isinstance(b, str) and len(b) == 8:
        return struct.unpack(">f", bytes.fromhex(b))[0]
    v = tok.get("logprob")
    if isinstance(v, str):
        v = float(v.replace("Infinity", "inf"))
    if not isinstance(v, (int, float)):
        return None
    return struct.unpack("<f", struct.pack("<f", v))[0]


def same_token(x, y, by):
    if by == "id":
        return x.get("id") is not None and x.get("id") == y.get("id")
    kx = tuple(x["bytes"]) if isinstance(x.get("bytes"), list) else x.get("text")
    ky = tuple(y["bytes"]) if isinstance(y.get("bytes"), list) else y.get("text")
    return kx is not None and kx == ky


def lowest_repeats(path):
    """id -> the record with the lowest repeat, in the order ids first appear"""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            k = json.dumps(r.get("id"), sort_keys=True)
            if k not in out or r.get("repeat", 0) < out[k].get("repeat", 0):
                out[k] = r
    return out


def positions(path_a, path_b, by):
    """per position of the pair: aligned and matching counts, and the |dlogp| of every common
    position (record order of A, then position order, as 1b-agree sums them)"""
    ra, rb = lowest_repeats(path_a), lowest_repeats(path_b)
    aligned, match, dl = [], [], []
    for k, x in ra.items():
        y = rb.get(k)
        if y is None or x.get("error") or y.get("error"):
            continue
        ta, tb = x.get("tokens") or [], y.get("tokens") or []
        for i in range(min(len(ta), len(tb))):
            if i == len(aligned):
                aligned.append(0)
                match.append(0)
            aligned[i] += 1
            if same_token(ta[i], tb[i], by):
                match[i] += 1
                va, vb = f32(ta[i]), f32(tb[i])
                if va is not None and vb is not None:
                    dl.append(abs(va - vb))
    return aligned, match, dl


def check_positions(pos, pair, what):
    """the plot data must be 1b-agree's: the same aligned and common counts, the same max"""
    aligned, match, dl = pos
    got = (sum(aligned), sum(match), max(dl) if dl else 0)
    want = (pair["aligned"], pair["common"], pair["max_abs_dlogp"] or 0)
    if got != want:
        raise Fail(5, "%s: the plot data (aligned %d, common %d, max %r) disagree with 1b-agree's "
                      "report (aligned %d, common %d, max %r): internal error" % ((what,) + got + want))


# ---- formatting (the tools' numbers, as their own tables print them) ----------------------

def rate(x):
    return "–" if x is None else "%.3f" % x


def dlogp(x):
    if x is None:
        return "–"
    return "0" if x == 0 else "%.3e" % x


def md_cell(s):
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    for r in rows:
        out.append("| " + " | ".join(md_cell(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def tok_text(t):
    if t == "end":
        return "end of stream"
    s = "%s %s %s" % (t.get("id", "?") if t.get("id") is not None else "", json.dumps(t.get("text", ""), ensure_ascii=False), t.get("logprob"))
    m = t.get("margin")
    return s.strip() + (" (margin %.4g)" % m if isinstance(m, (int, float)) else " (margin ?)")


# ---- plots ----------------------------------------------------------------------------------

def log_bins(values, lo=-9, hi=1, per_decade=4):
    """counts of the non-zero values in bins 10^(k/per_decade) wide, and the zeros"""
    edges = [10 ** (e / per_decade) for e in range(lo * per_decade, hi * per_decade + 1)]
    counts = [0] * (len(edges) - 1)
    zeros = 0
    for v in values:
        if v == 0:
            zeros += 1
            continue
        i = 0
        while i < len(counts) - 1 and v >= edges[i + 1]:
            i += 1
        counts[i] += 1
    return edges, counts, zeros


GP_HEAD = ('set terminal pngcairo size 900,520 font "sans,10"\n'
           'set key top right\nset grid\n')


def gp_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def plot_dlogp(series, out, title):
    """series: [(name, values)]; a histogram of log|dlogp| per series"""
    tsv, gp = out + ".tsv", out + ".gp"
    lines = ["# bin_lo bin_hi " + " ".join(slug(n) for n, _ in series)]
    binned = [log_bins(v) for _, v in series]
    edges = binned[0][0] if binned else []
    for i in range(len(edges) - 1):
        lines.append("%.6e %.6e %s" % (edges[i], edges[i + 1], " ".join(str(b[1][i]) for b in binned)))
    plots = []
    for j, (name, vals) in enumerate(series):
        label = "%s: %d positions, %d bit-exact (|dlogp| = 0, not shown)" % (name, len(vals), binned[j][2])
        plots.append("%s using (sqrt($1*$2)):(0):1:2:(0):%d with boxxyerror fs transparent solid 0.35 "
                     "title %s" % (gp_str(os.path.basename(tsv)), j + 3, gp_str(label)))
    script = GP_HEAD + ("set output %s\nset title %s\nset logscale x\nset format x \"10^{%%L}\"\n"
                        "set xrange [1e-9:10]\nset yrange [0:*]\nset xlabel \"|dlogp| (nats), log scale\"\n"
                        "set ylabel \"positions\"\nplot %s\n" % (
                            gp_str(os.path.basename(out) + ".png"), gp_str(title), ", \\\n     ".join(plots)))
    return tsv, "\n".join(lines) + "\n", gp, script


def plot_match(aligned, match, out, title):
    tsv, gp = out + ".tsv", out + ".gp"
    lines = ["# position aligned matching share"]
    for i, (n, m) in enumerate(zip(aligned, match)):
        lines.append("%d %d %d %.6f" % (i, n, m, m / n if n else 0))
    script = GP_HEAD + ("set output %s\nset title %s\nset yrange [0:1.05]\nset xrange [-0.5:*]\n"
                        "set xlabel \"generated position\"\nset ylabel \"share of records with the same token\"\n"
                        "plot %s using 1:4 with linespoints pt 7 ps 0.6 title \"token match share\"\n" % (
                            gp_str(os.path.basename(out) + ".png"), gp_str(title), gp_str(os.path.basename(tsv))))
    return tsv, "\n".join(lines) + "\n", gp, script


FLOOR = 1e-10     # where a copy bit-identical to the solo answer is drawn on the log axis


def plot_batched(rows, labels, out, title):
    """rows: [(label, width, state dict from 1b-batchrep's state_list)]"""
    tsv, gp = out + ".tsv", out + ".gp"
    lines = ["# route width x copies mean_abs_dlogp_vs_solo drawn_at same_token"]
    for label, w, st in rows:
        vs = st.get("vs_solo") or {}
        m = vs.get("mean_abs_dlogp")
        off = 1.0 + 0.06 * (labels.index(label) - (len(labels) - 1) / 2)
        lines.append("%s %d %.4f %d %s %.6e %s" % (label, w, w * off, st.get("copies", 0),
                                                    "nan" if m is None else repr(m),
                                                    FLOOR if not m else m,
                                                    "nan" if vs.get("same_token") is None else repr(vs["same_token"])))
    plots1, plots2 = [], []
    for i, label in enumerate(labels):
        sel = "(strcol(1) eq %s ? $3 : NaN)" % gp_str(label)
        plots1.append("%s using %s:6:(0.6+0.4*sqrt($4)) with points pt %d ps variable title %s" % (
            gp_str(os.path.basename(tsv)), sel, 6 + 2 * (i % 4), gp_str(label)))
        plots2.append("%s using %s:7:(0.6+0.4*sqrt($4)) with points pt %d ps variable title %s" % (
            gp_str(os.path.basename(tsv)), sel, 6 + 2 * (i % 4), gp_str(label)))
    widths = sorted({w for _, w, _ in rows}) or [1]
    xt = ", ".join("\"%d\" %d" % (w, w) for w in widths)
    script = (GP_HEAD.replace("900,520", "900,760") +
              "set output %s\nset multiplot layout 2,1 title %s\nset logscale x 2\nset xtics (%s)\n"
              "set xrange [%g:%g]\n"
              "set logscale y\nset format y \"10^{%%L}\"\nset yrange [%g:10]\n"
              "set ylabel \"mean |dlogp| vs solo (nats)\"\n"
              "set label 1 \"bit-identical to the solo answer\" at first %g, first %g font \",8\"\n"
              "set arrow 1 from graph 0, first %g to graph 1, first %g nohead dt 2\n"
              "set title \"every state of every batched run: its mean |dlogp| against the solo answer (point size: copies)\"\n"
              "plot %s\n"
              "unset label 1\nunset arrow 1\nunset logscale y\nset format y \"%%g\"\nset yrange [0:1.05]\n"
              "set xlabel \"batch width\"\nset ylabel \"share keeping the solo token\"\n"
              "set title \"the same states: share of aligned positions that keep the solo token\"\n"
              "plot %s\nunset multiplot\n" % (
                  gp_str(os.path.basename(out) + ".png"), gp_str(title), xt,
                  widths[0] / 1.5, widths[-1] * 1.5, FLOOR / 10, widths[0] / 1.4, FLOOR * 2.5,
                  FLOOR, FLOOR, ", \\\n     ".join(plots1), ", \\\n     ".join(plots2)))
    return tsv, "\n".join(lines) + "\n", gp, script


# ---- the report ------------------------------------------------------------------------------

def machine_facts():
    facts = {"system": " ".join(platform.uname()[i] for i in (0, 2, 4)),
             "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    facts["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    facts["memory_gib"] = round(int(line.split()[1]) / 1048576, 1)
                    break
    except OSError:
        pass
    try:
        facts["cpus_available"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    return facts


def stale_cleanup(parent, base):
    """remove temporary directories of killed runs: ones whose lock nobody holds"""
    prefix = ".%s.1b-report." % base
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for n in names:
        if not n.startswith(prefix):
            continue
        p = os.path.join(parent, n)
        try:
            fd = os.open(os.path.join(p, ".1b-report"), os.O_RDONLY)
        except OSError:
            try:
                if time.time() - os.stat(p).st_mtime < 60:
                    continue            # being created this very moment
            except OSError:
                continue
            shutil.rmtree(p, ignore_errors=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue                    # a live run
        shutil.rmtree(p, ignore_errors=True)
        os.close(fd)


def exchange(src, dst):
    """rename src to dst; an existing dst (an older report) is swapped out atomically
    (renameat2 RENAME_EXCHANGE where the kernel has it) and removed"""
    try:
        os.rename(src, dst)
        return
    except OSError as e:
        if not os.path.isdir(dst) or e.errno not in (17, 39):   # EEXIST, ENOTEMPTY
            raise
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        AT_FDCWD, RENAME_EXCHANGE = -100, 2
        if libc.renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), RENAME_EXCHANGE) == 0:
            shutil.rmtree(src, ignore_errors=True)
            return
    except (OSError, AttributeError):
        pass
    old = src + ".old"
    os.rename(dst, old)
    os.rename(src, dst)
    shutil.rmtree(old, ignore_errors=True)


def find_tools():
    here = os.path.dirname(os.path.realpath(__file__))
    tools = {}
    for t in ("1b-gen", "1b-agree", "1b-logprobs", "1b-batchrep"):
        p = os.path.join(here, t)
        if not os.access(p, os.X_OK):
            p = shutil.which(t)
        if not p:
            raise Fail(5, "%s: not found beside %s nor in PATH" % (t, PROG))
        tools[t] = p
    for t, pkg in (("gnuplot", "gnuplot-nox"), ("pandoc", "pandoc")):
        p = shutil.which(t)
        if not p:
            raise Fail(5, "%s: not found (Debian's %s; scripts/setup installs it)" % (t, pkg))
        tools[t] = p
    return tools, here


def default_prompts(here):
    for p in (os.path.join(here, "..", "contrib", "prompts.jsonl"),
              os.path.join(here, "..", "share", "1b", "prompts.jsonl")):
        if os.path.isfile(p):
            return os.path.normpath(p)
    raise Fail(3, "prompts.jsonl: not found beside %s (give --prompts FILE)" % PROG)


MAX_LINE = 256 << 20                   # the tools' --max-line default (1b(7), JSON text)


def unique_keys(pairs):
    """an object's members, refused when a key is given twice (1b(7): readers disagree on which
    value counts, so the tools refuse such a record; so does the report, before it rewrites
    the record and one of the two would be lost)"""
    seen = set()
    for k, _ in pairs:
        if k in seen:
            raise ValueError('the key "%s" appears twice in one object' % k[:80])
        seen.add(k)
    return dict(pairs)


def read_requests(path, a):
    """the request records with the report's settings: max_tokens, top_logprobs, greedy,
    cache_prompt false (the field report's); other fields are kept. Read a line at a time under
    the tools' line limit; a NUL byte or a key given twice is refused as they refuse it."""
    out = []
    try:
        f = open(path, "rb")
    except OSError as e:
        raise Fail(3, "%s: %s" % (path, e.strerror))
    with f:
        for i, line in enumerate(iter(lambda: f.readline(MAX_LINE + 1), b""), 1):
            line = line.rstrip(b"\n")
            if len(line) > MAX_LINE:
                raise Fail(3, "%s:%d: a line longer than %d bytes" % (path, i, MAX_LINE))
            if b"\0" in line:
                raise Fail(3, "%s:%d: a NUL byte at byte %d of the line"
                           % (path, i, line.index(b"\0") + 1))
            if not line.strip():
                continue
            try:
                r = json.loads(line.decode("utf-8"), object_pairs_hook=unique_keys)
            except (UnicodeDecodeError, ValueError) as e:
                why = str(e) if "appears twice" in str(e) else str(e).split(":")[0]
                raise Fail(3, "%s:%d: not a JSON record (%s)" % (path, i, why))
            if not isinstance(r, dict):
                raise Fail(3, "%s:%d: not a JSON object" % (path, i))
            r.setdefault("id", i)
            r.update({"max_tokens": a["max_tokens"], "top_logprobs": a["top_logprobs"],
                      "temperature": 0, "cache_prompt": False})
            out.append(r)
            if a["prompts_n"] and len(out) == a["prompts_n"]:
                break
    if not out:
        raise Fail(3, "%s: no request records" % path)
    return out


def probe_args(req):
    """the batched probe: the first request, as 1b-batchrep's --messages or --prompt"""
    if isinstance(req.get("messages"), list):
        return ["--messages", json.dumps(req["messages"], ensure_ascii=False, separators=(",", ":"))]
    if isinstance(req.get("prompt"), str):
        return ["--prompt", req["prompt"]]
    raise Fail(3, "the first request has neither messages nor a text prompt: it cannot be the batched probe")


def check_output(out):
    """DIR may be new, an empty directory or an earlier report; its parent must exist"""
    out = os.path.abspath(out)
    parent, base = os.path.dirname(out), os.path.basename(out)
    if not base:
        usage_error("-o: '%s' names no directory" % quote(out))
    if not os.path.isdir(parent):
        raise Fail(5, "%s: No such file or directory" % parent)
    if os.path.lexists(out):
        if not os.path.isdir(out) or os.path.islink(out):
            usage_error("-o %s: exists and is not a directory" % quote(out))
        if os.listdir(out) and not os.path.exists(os.path.join(out, ".1b-report")):
            usage_error("-o %s: exists and is not a 1b-report directory: not replaced" % quote(out))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise Fail(5, "%s: Permission denied" % parent)
    return out, parent, base


def write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def source_tree(here):
    """The source tree's commit when the tools are a checkout's bin/, or None. Read when the
    run starts: the tree may move on while a long report runs."""
    try:
        src = os.path.dirname(here)
        if os.path.exists(os.path.join(src, ".git")):
            g = subprocess.run(["git", "-C", src, "describe", "--always", "--dirty"], capture_output=True,
                               text=True, timeout=30)
            if g.returncode == 0 and g.stdout.strip():
                return "%s at %s (when the run started)" % (src, g.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def main(argv):
    a = parse_args(argv)
    routes = routes_of(a)
    tools, here = find_tools()
    source = source_tree(here)
    out, parent, base = check_output(a["output"])
    prompts = os.path.abspath(a["prompts"]) if a["prompts"] else default_prompts(here)
    requests = read_requests(prompts, a)
    probe = probe_args(requests[0])
    run = Runner(tools, a["quiet"])
    main.runner = run
    run.cwd = parent
    thinking = ["--thinking", a["thinking"]] if a["thinking"] else []
    matchby = ["--match-by", a["match_by"]]

    # every route first, before anything is written: a route that is not built or a server
    # that is not reachable is exit 4 here
    for r in routes:
        run.run(["1b-gen"] + route_args(r, a), record=False)

    stale_cleanup(parent, base)
    work = tempfile.mkdtemp(prefix=".%s.1b-report." % base, dir=parent)
    main.work = work
    umask = os.umask(0o22)
    os.umask(umask)
    os.chmod(work, 0o777 & ~umask)         # mkdtemp's 0700 is for its name, not for the report
    lock = os.open(os.path.join(work, ".1b-report"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.write(lock, json.dumps({"1b-report": VERSION}).encode() + b"\n")
    run.cwd = work
    t_start = time.time()
    for d in ("gen", "tf", "agree", "batch", "plots"):
        os.mkdir(os.path.join(work, d))
    write(os.path.join(work, "requests.jsonl"),
          "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in requests))

    # 1. generated streams, every request --repeat times on every route
    for r in routes:
        run.run(["1b-gen"] + route_args(r, a) + ["--repeat", str(a["repeat"])] + thinking,
                stdin="requests.jsonl", stdout="gen/%s.jsonl" % r["label"])
    # 2. repetition of each route and agreement of every pair: one 1b-agree over all of them
    run.run(["1b-agree", "--json", "agree/generated.json"] + matchby +
            ["gen/%s.jsonl" % r["label"] for r in routes], stdout="agree/generated.txt", ok=(0, 1))
    gen_agree = json.load(open(os.path.join(work, "agree/generated.json")))
    # 3. teacher-forced: each route's first repeat scored on every other route
    for r in routes:
        with open(os.path.join(work, "gen/%s.jsonl" % r["label"])) as f, \
                open(os.path.join(work, "gen/%s.r0.jsonl" % r["label"]), "w") as g:
            for line in f:
                if line.strip() and json.loads(line).get("repeat", 0) == 0:
                    g.write(line)
        run.commands.append({"command": "# gen/%s.r0.jsonl: the records of gen/%s.jsonl with repeat 0 "
                                        "(written by 1b-report)" % (r["label"], r["label"])})
    tf = {}
    for ra in routes:
        for rb in routes:
            if ra is rb:
                continue
            key = "%s-on-%s" % (ra["label"], rb["label"])
            try:
                run.run(["1b-logprobs"] + route_args(rb, a, "1b-logprobs"),
                        stdin="gen/%s.r0.jsonl" % ra["label"], stdout="tf/%s.jsonl" % key)
            except Fail as e:
                if rb["kind"] != "url" or e.status != 3:
                    raise
                tf[key] = {"error": e.msg}     # a server that cannot score given tokens
                os.unlink(os.path.join(work, "tf/%s.jsonl" % key))
                continue
            run.run(["1b-agree", "--json", "agree/tf-%s.json" % key] + matchby +
                    ["gen/%s.r0.jsonl" % ra["label"], "tf/%s.jsonl" % key],
                    stdout="agree/tf-%s.txt" % key, ok=(0, 1))
            tf[key] = json.load(open(os.path.join(work, "agree/tf-%s.json" % key)))
    # 4. batched repeats at every width, and width 4 at every length
    batch = {}
    plan = [(w, a["max_tokens"]) for w in a["widths"]]
    plan += [(LENGTH_WIDTH, n) for n in a["lengths"] if (LENGTH_WIDTH, n) not in plan]
    for r in routes:
        for w, n in plan:
            name = "batch/%s-w%d-t%d" % (r["label"], w, n)
            run.run(["1b-batchrep"] + route_args(r, a, "1b-batchrep") +
                    ["--width", str(w), "--rounds", str(a["rounds"]), "--max-tokens", str(n),
                     "--top-logprobs", str(a["top_logprobs"]), "--vs-solo", "--json", name + ".json"] +
                    probe + thinking + matchby, stdout=name + ".txt", ok=(0, 1))
            batch[(r["label"], w, n)] = json.load(open(os.path.join(work, name + ".json")))

    # 5. plots
    labels = [r["label"] for r in routes]
    gp_files = []

    def emit(parts):
        tsv, tsv_text, gp, gp_text = parts
        write(os.path.join(work, tsv), tsv_text)
        write(os.path.join(work, gp), gp_text)
        gp_files.append(gp)
    pairs = gen_agree.get("pairs", [])
    names = {inp["name"]: labels[i] for i, inp in enumerate(gen_agree.get("inputs", []))}
    pair_plots = {}
    for p in pairs:
        la, lb = names[p["a"]], names[p["b"]]
        pos = positions(os.path.join(work, "gen/%s.jsonl" % la), os.path.join(work, "gen/%s.jsonl" % lb),
                        a["match_by"])
        check_positions(pos, p, "%s vs %s" % (la, lb))
        series = []
        for x, y in ((la, lb), (lb, la)):
            k = "%s-on-%s" % (x, y)
            if "pairs" in tf.get(k, {}):
                tp = positions(os.path.join(work, "gen/%s.r0.jsonl" % x), os.path.join(work, "tf/%s.jsonl" % k),
                               a["match_by"])
                check_positions(tp, tf[k]["pairs"][0], k)
                series.append(("%s's tokens scored on %s" % (x, y), tp[2]))
        series.append(("generated, common positions", pos[2]))
        stem = "plots/dlogp-%s-%s" % (la, lb)
        emit(plot_dlogp(series, stem, "%s vs %s: |dlogp| per position" % (la, lb)))
        stem2 = "plots/match-%s-%s" % (la, lb)
        emit(plot_match(pos[0], pos[1], stem2, "%s vs %s: generated streams, token match by position" % (la, lb)))
        pair_plots[(la, lb)] = (stem + ".png", stem2 + ".png")
    rows = []
    for r in routes:
        for w in a["widths"]:
            for st in batch[(r["label"], w, a["max_tokens"])].get("state_list", []):
                rows.append((r["label"], w, st))
    emit(plot_batched(rows, labels, "plots/batched", "batched repeats vs solo, %d tokens, %d rounds" % (
        a["max_tokens"], a["rounds"])))
    for gp in gp_files:
        runner_cwd = run.cwd
        run.cwd = os.path.join(work, "plots")
        try:
            run.run(["gnuplot", os.path.basename(gp)])
        finally:
            run.cwd = runner_cwd
        run.commands[-1]["command"] = "(cd plots && %s)" % run.commands[-1]["command"]

    # 6. the page
    versions = {}
    for t in ("1b-gen", "1b-agree", "1b-logprobs", "1b-batchrep", "gnuplot", "pandoc"):
        try:
            v = subprocess.run([tools[t], "--version"], capture_output=True, text=True, timeout=30).stdout
            versions[t] = (v.splitlines() or ["?"])[0]
        except (OSError, subprocess.SubprocessError):
            versions[t] = "?"
    facts = machine_facts()
    if source:
        versions["source"] = source
    first = {}
    for r in routes:
        with open(os.path.join(work, "gen/%s.r0.jsonl" % r["label"])) as f:
            line = f.readline()
        first[r["label"]] = json.loads(line) if line.strip() else {}
        if r["kind"] == "url":
            sm = server_models(r["url"])
            m = first[r["label"]].setdefault("model", {})
            if isinstance(m, str):
                m = first[r["label"]]["model"] = {"name": m}
            first[r["label"]]["_server"] = sm
            if isinstance(sm.get("sha256"), str) and not m.get("sha256"):
                m["sha256"] = sm["sha256"] + " (its /v1/models)"
    html = ["pandoc", "-f", "gfm", "-t", "html5", "-s", "--metadata", None, "-o", "report.html", "report.md"]
    run.commands.append({"command": "# report.md: written by 1b-report from the JSON reports above"})
    run.commands.append({"command": " ".join(shlex.quote(w) for w in html[:6]) + " --metadata title=... "
                                    "-o report.html report.md"})
    md = page(a, routes, requests, prompts, gen_agree, names, tf, batch, plan, pair_plots, run.commands,
              versions, facts, first, here, time.time() - t_start)
    write(os.path.join(work, "report.md"), md)
    html[7] = "title=%s" % md.splitlines()[0].lstrip("# ")
    run.run(html, record=False)
    manifest = {"1b-report": VERSION, "settings": {k: a[k] for k in (
        "max_tokens", "repeat", "rounds", "widths", "lengths", "top_logprobs", "thinking", "match_by",
        "threads", "quick")}, "prompts": prompts, "routes": [
            {k: (shown_url(v) if k == "url" else v) for k, v in r.items()} for r in routes],
        "versions": versions, "machine": facts, "commands": run.commands,
        "teacher_forced_unavailable": {k: v["error"] for k, v in tf.items() if "error" in v}}
    write(os.path.join(work, "report.json"), json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    os.close(lock)
    exchange(work, out)
    main.work = None
    if not a["quiet"]:
        say("wrote %s" % out)
    return 0


def page(a, routes, requests, prompts, ga, names, tf, batch, plan, pair_plots, commands, versions, facts,
         first, here, seconds):
    L = []
    model_name = None
    for r in routes:
        m = first[r["label"]].get("model") or {}
        if m.get("sha256"):
            model_name = m.get("name")
            break
    rnames = ", ".join(r["label"] for r in routes)
    L.append("# Determinism report: %s on %s\n" % (model_name or (a["model"] and os.path.basename(a["model"])) or "server models", rnames))
    L.append("Made by `1b-report` %s on %s in %.0f s. Every number below is one of the measuring tools' "
             "own (1b-agree, 1b-batchrep), read from the JSON reports kept beside this page; the "
             "definitions are those of 1b-agree(1) and 1b-batchrep(1).\n" % (
                 VERSION, time.strftime("%Y-%m-%d %H:%M:%S %Z"), seconds))
    L.append("## Summary\n")
    L.extend(summary(a, routes, ga, names, tf, batch))
    L.append("## Setup\n")
    L.append("%d requests from `%s`, %d tokens each, greedy (temperature 0), top_logprobs %d, "
             "cache_prompt false, %d repeats per route%s; tokens matched by %s.\n" % (
                 len(requests), os.path.basename(prompts), a["max_tokens"], a["top_logprobs"], a["repeat"],
                 ", thinking " + a["thinking"] if a["thinking"] else "", a["match_by"]))
    rows = []
    for r in routes:
        m = first[r["label"]].get("model") or {}
        if r["kind"] == "device":
            what = "in process, `-d %s`, model `%s`" % (r["route"], r["model"])
        else:
            what = "server `%s`" % shown_url(r["url"])
            slots = (first[r["label"]].get("_server") or {}).get("parallel")
            if isinstance(slots, int):
                what += ", %d slots" % slots
        rows.append([r["label"], what, m.get("name", "–"), m.get("sha256", "–")])
    L.append(md_table(["route", "what", "model", "sha256"], rows))

    # repetition
    L.append("## Repetition per route (requests served one at a time)\n")
    L.append("Each request run %d times on each route; repeatable means every repeat is identical "
             "to the first: the same tokens and the same float32 bits of every log-probability and "
             "top alternative.\n" % a["repeat"])
    rows = []
    for i, inp in enumerate(ga.get("inputs", [])):
        rep = inp.get("repeatable")
        rows.append([names[inp["name"]], inp["records"], inp["ids"], inp["tokens"], inp["repeats"],
                     "yes" if rep else ("no" if rep is False else "– (one repeat)"),
                     len(inp.get("not_repeatable", [])), inp["nonf32_values"], inp["records_without_logprobs"]])
    L.append(md_table(["route", "records", "ids", "tokens", "repeats", "repeatable", "not repeatable",
                       "not float32", "without logprobs"], rows))

    # agreement
    L.append("## Agreement between routes\n")
    pairs = ga.get("pairs", [])
    if not pairs:
        L.append("One route only: no pair to compare.\n")
    else:
        L.append("### Generated streams\n")
        L.append("Each route's own greedy stream, first repeat. Aligned positions are those both "
                 "streams have; common positions carry the same token; token match is common / "
                 "aligned; exact-bit is the share of common positions whose log-probabilities have "
                 "the same float32 bits; |dlogp| is over common positions only.\n")
        L.append(md_table(["pair", "records", "aligned", "common", "token match", "exact-bit",
                           "max \\|dlogp\\|", "mean \\|dlogp\\|", "verdict"],
                          [pair_row(p, names) for p in pairs]))
        for p in pairs:
            m = p.get("max_at")
            if m:
                L.append("- %s vs %s: largest \\|dlogp\\| at id %s position %d: %s (%s) vs %s (%s)\n" % (
                    names[p["a"]], names[p["b"]], md_cell(json.dumps(m.get("id"))), m.get("pos", -1),
                    md_cell(tok_text(m["a"])), names[p["a"]], md_cell(tok_text(m["b"])), names[p["b"]]))
        L.append("\n#### First divergences, with each route's top-2 margin there\n")
        rows = []
        for p in pairs:
            for q in p.get("prompts", []):
                d = q.get("first_divergence")
                if d:
                    rows.append(["%s vs %s" % (names[p["a"]], names[p["b"]]), json.dumps(q["id"]), d["pos"],
                                 "%d/%d" % (q.get("len_a", 0), q.get("len_b", 0)),
                                 tok_text(d["a"]), tok_text(d["b"])])
        if rows:
            L.append(md_table(["pair", "id", "position", "lengths", "first route's token (margin)",
                               "second route's token (margin)"], rows))
        else:
            L.append("No stream diverges: every pair chose the same tokens everywhere.\n")
        L.append("\n### Teacher-forced: every position comparable\n")
        L.append("Each route's tokens (first repeat) scored on the other route by 1b-logprobs, so "
                 "that both sides carry the same token at every position.\n")
        rows = []
        notes = []
        for ra in routes:
            for rb in routes:
                if ra is rb:
                    continue
                k = "%s-on-%s" % (ra["label"], rb["label"])
                t = tf.get(k, {})
                if "error" in t:
                    notes.append("- %s's tokens on %s: not scored: %s\n" % (ra["label"], rb["label"], md_cell(t["error"])))
                    continue
                p = t["pairs"][0]
                rows.append(["%s's tokens on %s" % (ra["label"], rb["label"])] + pair_row(p, None)[1:])
        L.append(md_table(["scored", "records", "aligned", "common", "token match", "exact-bit",
                           "max \\|dlogp\\|", "mean \\|dlogp\\|", "verdict"], rows))
        L.extend(notes)
        L.append("\n### Plots\n")
        for (la, lb), (p1, p2) in pair_plots.items():
            L.append("![%s vs %s: distribution of |dlogp|](%s)\n" % (la, lb, p1))
            L.append("![%s vs %s: token match share along the generated position](%s)\n" % (la, lb, p2))
        L.append("The histograms count positions by |dlogp| on a log scale (bit-exact positions, "
                 "|dlogp| = 0, are counted in the legend); the match plot is, at each generated "
                 "position, the share of records whose two streams carry the same token there.\n")

    # batched
    L.append("## Batched repeats (the same request N times at once, R rounds)\n")
    L.append("1b-batchrep releases %s byte-identical copies of the first request together, %d rounds "
             "of %d tokens, and fingerprints each copy (token ids and the float32 bits of every "
             "log-probability). A state is one distinct answer over all copies of all rounds; "
             "identical round to round counts the same-index copies of consecutive rounds that match. "
             "Every copy is also scored against one solo request.\n" % (
                 "/".join(str(w) for w in a["widths"]), a["rounds"], a["max_tokens"]))
    rows, rows2 = [], []
    for r in routes:
        for w in a["widths"]:
            b = batch[(r["label"], w, a["max_tokens"])]
            rows.append(batch_row(r["label"], w, b))
            rows2.append(solo_row([r["label"], w], b))
    L.append(md_table(["route", "width", "rounds", "copies", "states", "identical per round",
                       "identical round to round",
                       "worst \\|dlogp\\| in the mixture", "verdict"], rows))
    for r in routes:
        slots = (first[r["label"]].get("_server") or {}).get("parallel")
        wide = [w for w in a["widths"] if isinstance(slots, int) and w > slots]
        if wide:
            L.append("\n%s has %d slots: at width %s copies waited for a slot (a control, not a "
                     "batch of that width).\n" % (r["label"], slots, ", ".join(map(str, wide))))
    L.append("\nBatched against solo: copies identical to the solo answer, each copy's mean \\|dlogp\\| "
             "over common positions and its share of aligned positions that keep the solo token "
             "(min / median / max over the copies).\n\n")
    L.append(md_table(["route", "width", "identical", "mean \\|dlogp\\| min", "median", "max",
                       "same token min", "median", "max"], rows2))
    L.append("\n![batched vs solo, per width](plots/batched.png)\n")

    # length
    L.append("## Generated length\n")
    L.append("Width %d, %d rounds, the same request decoded to %s tokens; every copy scored against "
             "the solo answer of the same length.\n\n" % (
                 LENGTH_WIDTH, a["rounds"], "/".join(str(n) for n in a["lengths"])))
    rows = []
    for r in routes:
        for n in a["lengths"]:
            b = batch[(r["label"], LENGTH_WIDTH, n)]
            rows.append(solo_row([r["label"], n], b) + [b.get("states")])
    L.append(md_table(["route", "tokens", "identical", "mean \\|dlogp\\| min", "median", "max",
                       "same token min", "median", "max", "states"], rows))

    # how
    L.append("\n## How this report was made\n")
    L.append("Run in the report directory, in this order:\n")
    L.append("```\n" + "\n".join(c["command"] for c in commands) + "\n```\n")
    rows = [["1b-report", VERSION], ["tools", here]] + [[k, v] for k, v in versions.items()]
    rows += [["machine", facts.get("system", "?")], ["cpu", facts.get("cpu", "?")],
             ["cpus", "%s (%s available)" % (facts.get("cpus"), facts.get("cpus_available", "?"))],
             ["memory", "%s GiB" % facts.get("memory_gib", "?")]]
    for r in routes:
        m = first[r["label"]].get("model") or {}
        rows.append(["model of %s" % r["label"], "%s, sha256 %s" % (m.get("name", "?"), m.get("sha256", "–"))])
    L.append(md_table(["", ""], rows))
    L.append("\nFiles: `requests.jsonl` (the requests as sent), `gen/` (every route's records), `tf/` "
             "(teacher-forced records), `agree/` (1b-agree's JSON reports and tables), `batch/` "
             "(1b-batchrep's), `plots/` (PNG, with their data and gnuplot scripts), `report.json` "
             "(settings, routes, commands, versions, machine).\n")
    return "\n".join(L)


def summary(a, routes, ga, names, tf, batch):
    """one line per route and per pair, in the tools' own words and numbers"""
    out = []
    for inp in ga.get("inputs", []):
        label = names[inp["name"]]
        rep = inp.get("repeatable")
        line = "- **%s**: %s over %d repeats" % (label, "bitwise repeatable" if rep else (
            "not repeatable" if rep is False else "repetition not measured"), inp["repeats"])
        states = [(w, batch[(label, w, a["max_tokens"])]) for w in a["widths"]]
        same = [w for w, b in states if b.get("states") == 1 and (b.get("vs_solo") or {}).get("identical") ==
                (b.get("vs_solo") or {}).get("copies")]
        if len(same) == len(states):
            line += "; batched, every copy at every width (%s) is one state, the solo answer" % (
                "/".join(str(w) for w, _ in states))
        else:
            line += "; batched: " + ", ".join("%d state%s at width %d (%s/%s identical to solo)" % (
                b.get("states"), "" if b.get("states") == 1 else "s", w, (b.get("vs_solo") or {}).get("identical"),
                (b.get("vs_solo") or {}).get("copies")) for w, b in states)
        out.append(line + ".")
    for p in ga.get("pairs", []):
        la, lb = names[p["a"]], names[p["b"]]
        line = "- **%s vs %s**: %s on generated streams (token match %s, exact-bit %s, max \\|dlogp\\| %s)" % (
            la, lb, "bit-identical" if p.get("exact") else "not bit-identical", rate(p.get("token_match")),
            rate(p.get("exact_bit_rate")), dlogp(p.get("max_abs_dlogp")))
        tfs = []
        for x, y in ((la, lb), (lb, la)):
            t = tf.get("%s-on-%s" % (x, y), {})
            if "pairs" in t:
                q = t["pairs"][0]
                tfs.append("%s's tokens on %s: max %s, mean %s" % (x, y, dlogp(q.get("max_abs_dlogp")),
                                                                   dlogp(q.get("mean_abs_dlogp"))))
        if tfs:
            line += "; teacher-forced, " + "; ".join(tfs)
        out.append(line + ".")
    return out + [""]


def pair_row(p, names):
    verdict = "exact" if p.get("exact") else "differ"
    label = "%s vs %s" % (names[p["a"]], names[p["b"]]) if names else ""
    return [label, p["records"], p["aligned"], p["common"], rate(p.get("token_match")),
            rate(p.get("exact_bit_rate")), dlogp(p.get("max_abs_dlogp")), dlogp(p.get("mean_abs_dlogp")), verdict]


def batch_row(label, w, b):
    rr = b.get("round_to_round") or {}
    per = " ".join("%s/%d" % (x.get("identical"), len(x.get("states") or [])) for x in b.get("per_round") or [])
    return [label, w, b.get("rounds"), b.get("copies"), b.get("states"), per or "–",
            "%s/%s" % (rr.get("identical"), rr.get("pairs")), dlogp(b.get("worst_abs_dlogp")), b.get("verdict")]


def solo_row(head, b):
    vs = b.get("vs_solo") or {}
    m, s = vs.get("mean_abs_dlogp") or {}, vs.get("same_token") or {}
    return head + ["%s/%s" % (vs.get("identical"), vs.get("copies")),
                   dlogp(m.get("min")), dlogp(m.get("median")), dlogp(m.get("max")),
                   rate(s.get("min")), rate(s.get("median")), rate(s.get("max"))]


def on_signal(sig, frame):
    raise Interrupted(sig)


if __name__ == "__main__":
    main.work = None
    main.runner = None
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    status = 0
    try:
        status = main(sys.argv[1:])
    except Fail as e:
        say(e.msg)
        status = e.status
    except Interrupted as e:
        status = -e.sig
    except KeyboardInterrupt:
        status = -signal.SIGINT
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        if main.runner:
            main.runner.kill()
        if main.work:
            shutil.rmtree(main.work, ignore_errors=True)
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)
