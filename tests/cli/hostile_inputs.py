#!/usr/bin/env python3
"""Hostile-input catalogue for the ropecheck command line.

Plays every case of reliability-2.md sections 1-3 and 5 that a test can reproduce cheaply, plus the
defects fixed since, and asserts for each:
  - the exit code (2 for unusable input, 0 for odd but valid input);
  - for exit 2: stderr is exactly one line, starting "ropecheck: error: ", holding the expected words;
  - the destination (--out / --report) is absent, or unchanged when it existed before;
  - no temporary (`.NAME.partial-PID`, `.NAME.tmp-PID`, `.NAME.old-PID`) is left in the work folder.

With --instrumented (ROPECHECK built with ASan + UBSan, tests/CMakeLists.txt cli_asan_hostile_inputs) every
case runs the same except those under an address-space limit (RLIMIT_AS): ASan reserves terabytes of
address space for its shadow memory at start, so such a process cannot start at all; they are listed as
skipped. In every mode a sanitizer report in stderr fails the case.

Usage: hostile_inputs.py ROPECHECK [-k SUBSTRING] [--plugins DIR] [--instrumented]
       (a few seconds; exit 0 when every case holds)
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import zipfile

FAILURES = []
COUNT = 0
SKIPPED = []


def tree_digest(path):
    """sha256 over names and contents of a file or folder; None when absent."""
    if not os.path.lexists(path):
        return None
    h = hashlib.sha256()
    if os.path.isfile(path):
        with open(path, "rb") as f:
            h.update(f.read())
        return h.hexdigest()
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(root, name)
            h.update(os.path.relpath(p, path).encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def leftovers(folder):
    out = []
    for name in os.listdir(folder):
        if name.startswith(".") and (".partial-" in name or ".tmp-" in name or ".old-" in name):
            out.append(name)
        elif ".tmp." in name:
            out.append(name)
    return out


class Catalogue:
    def __init__(self, exe, work, only, instrumented=False):
        self.exe = exe
        self.work = work
        self.only = only
        self.instrumented = instrumented

    def case(self, name, args, rc=2, words=(), dest=None, env=None, preexec=None, timeout=60, absent=()):
        """Runs `ropecheck ARGS` in the work folder and checks the contract (see the module doc)."""
        global COUNT
        if self.only and self.only not in name:
            return None
        if self.instrumented and preexec is limit_memory:
            SKIPPED.append(name)
            print(f"skip       {name} (instrumented: ASan cannot start under an address-space limit)")
            return None
        COUNT += 1
        dest_path = os.path.join(self.work, dest) if dest else None
        before = tree_digest(dest_path) if dest_path else None
        full_env = dict(os.environ)
        full_env.update(env or {})
        t0 = time.monotonic()
        p = subprocess.run([self.exe] + args, cwd=self.work, capture_output=True, env=full_env,
                           preexec_fn=preexec, timeout=timeout)
        seconds = time.monotonic() - t0
        err = p.stderr.decode("utf-8", "replace")
        problems = []
        if p.returncode != rc:
            problems.append(f"exit {p.returncode}, expected {rc}")
        if "Sanitizer" in err or "runtime error:" in err:
            problems.append(f"sanitizer report: {err[:2000]!r}")
        if rc == 2:
            lines = err.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if len(lines) != 1 or not lines[0].startswith("ropecheck: error: "):
                problems.append(f"stderr is not one 'ropecheck: error:' line: {err[:300]!r}")
            for w in words:
                if w not in err:
                    problems.append(f"stderr lacks {w!r}: {err[:300]!r}")
            for w in absent:
                if w in err:
                    problems.append(f"stderr has {w!r}: {err[:300]!r}")
            if dest_path and tree_digest(dest_path) != before:
                problems.append(f"{dest} changed or appeared although the run was refused")
        left = leftovers(self.work)
        if left:
            problems.append(f"temporaries left behind: {left}")
            for name in left:
                shutil.rmtree(os.path.join(self.work, name), ignore_errors=True)
                if os.path.lexists(os.path.join(self.work, name)):
                    os.unlink(os.path.join(self.work, name))
        if problems:
            FAILURES.append(f"{name}: ropecheck {' '.join(args)[:200]}\n    " + "\n    ".join(problems))
        print(f"{'ok  ' if not problems else 'FAIL'} {seconds:5.2f}s {name}")
        return p

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    def write(self, name, text):
        mode = "wb" if isinstance(text, bytes) else "w"
        with open(self.path(name), mode) as f:
            f.write(text)
        return name


def deep(n=200000):
    return "[" * n + "]" * n


HF_BASE = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
           "max_position_embeddings": 131072}
SPEC_BASE = {"name": "t", "family": "rope",
             "rope": {"head_dim": 128, "base": 10000, "layout": "half_split"}}


def hf_text(**over):
    cfg = dict(HF_BASE)
    cfg.update(over)
    return json.dumps(cfg)


def json_cases(c):
    """Section 1 (configs), spec JSON and manifests: deep nesting and malformed values."""
    # Defect 4: 200,000 `[` as a value crashed the message builder (SIGSEGV).
    for key in ("rope_theta", "head_dim", "rope_scaling", "num_attention_heads"):
        text = hf_text()[:-1] + f', "{key}": ' + deep() + "}"
        c.write(f"deep-{key}.json", text)
        c.case(f"hf deep {key} (spec)", ["spec", "--hf-config", f"deep-{key}.json"], 2, ["nests deeper than 64"])
        c.case(f"hf deep {key} (golden)", ["golden", "--hf-config", f"deep-{key}.json", "--positions", "0:4",
                                           "--out", "o"], 2, ["nests deeper than 64"], dest="o")
    c.write("deep-ropetype.json", hf_text(rope_scaling={"rope_type": "X"}).replace('"X"', deep()))
    c.case("hf deep rope_type", ["spec", "--hf-config", "deep-ropetype.json"], 2, ["nests deeper"])
    c.write("deep-unclosed.json", "[" * 200000)
    c.case("hf deep unclosed", ["spec", "--hf-config", "deep-unclosed.json"], 2, ["malformed JSON"])
    c.write("deep-toplevel.json", deep())
    c.case("hf deep top level", ["spec", "--hf-config", "deep-toplevel.json"], 2, ["nests deeper"])
    spec = json.dumps(SPEC_BASE).replace("10000", deep())
    c.write("deep-spec.json", spec)
    c.case("spec deep rope.base", ["spec", "--spec", "deep-spec.json"], 2, ["nests deeper"])
    c.case("golden spec deep rope.base", ["golden", "--spec", "deep-spec.json", "--positions", "0:4", "--out", "o"],
           2, ["nests deeper"], dest="o")
    # Shallow wrong-typed values: a short excerpt, one line.
    c.write("list-theta.json", hf_text(rope_theta=[[[[[[10000]]]]]]))
    c.case("hf theta nested list", ["spec", "--hf-config", "list-theta.json"], 2,
           ["'rope_theta': must be a number, got [[[[...]]]]"])
    # Control characters echoed from a value stay on one line (defect 15).
    c.write("type-newline.json", hf_text(rope_scaling={"rope_type": "warp\nfake line\x1b[31m"}))
    c.case("hf rope_type with newline and ESC", ["spec", "--hf-config", "type-newline.json"], 2,
           ["unknown rope type", "\\n"])
    c.write("type-long.json", hf_text(rope_scaling={"rope_type": "w" * 100000}))
    c.case("hf rope_type 100k chars", ["spec", "--hf-config", "type-long.json"], 2, ["unknown rope type"])
    # Malformed configs that already passed (reliability-2 section 1): kept passing.
    simple = {
        "truncated": ('{"hidden_size": 4096, "num_attention', ["malformed JSON"]),
        "empty": ("", ["malformed JSON"]),
        "comment": ('// c\n' + hf_text(), ["malformed JSON"]),
        "nan": (hf_text().replace("500000.0", "NaN"), ["malformed JSON"]),
        "overflow": (hf_text().replace("500000.0", "1e400"), ["number overflow"]),
        "toplevel-array": ("[1, 2]", ["must be a JSON object"]),
        "theta-string": (hf_text(rope_theta="10000"), ["'rope_theta': must be a number"]),
        "theta-bool": (hf_text(rope_theta=True), ["'rope_theta': must be a number"]),
        "theta-one": (hf_text(rope_theta=1), ["'rope.base'", "must be > 1"]),
        "heads-zero": (hf_text(num_attention_heads=0), ["num_attention_heads", "must be > 0"]),
        "headdim-float": (hf_text(head_dim=127.5), ["'head_dim': must be an integer"]),
        "scaling-list": (hf_text(rope_scaling=[1, 2]), ["'rope_scaling': must be an object"]),
        "unknown-type": (hf_text(rope_scaling={"rope_type": "warp"}), ["unknown rope type \"warp\""]),
        "linear-no-factor": (hf_text(rope_scaling={"rope_type": "linear"}), ["factor", "missing required key"]),
        "prf-zero": (hf_text(partial_rotary_factor=0), ["partial_rotary_factor"]),
        "non-utf8": (b'{"model_type": "\xff\xfe", "hidden_size": 4096}', ["malformed JSON"]),
        "utf16": (hf_text().encode("utf-16"), ["malformed JSON"]),
        "nul-byte": (hf_text().replace("llama", "lla\\u0000ma").encode().replace(b"\\u0000", b"\x00"),
                     ["malformed JSON"]),
    }
    for name, (text, words) in simple.items():
        c.write(f"cfg-{name}.json", text)
        c.case(f"hf {name}", ["spec", "--hf-config", f"cfg-{name}.json"], 2, words)
    c.case("hf missing file", ["spec", "--hf-config", "does-not-exist.json"], 2, ["cannot read"])
    os.makedirs(c.path("a-directory.json"), exist_ok=True)
    c.case("hf directory", ["spec", "--hf-config", "a-directory.json"], 2, ["not a regular file"])
    # Odd but valid.
    c.write("cfg-ok-bom.json", "\ufeff" + hf_text())
    c.case("hf BOM accepted", ["spec", "--hf-config", "cfg-ok-bom.json"], 0)
    c.write("cfg-deep-ignored.json", hf_text()[:-1] + ', "unrelated": ' + deep(60) + "}")
    c.case("hf ignored key 60 deep accepted", ["spec", "--hf-config", "cfg-deep-ignored.json"], 0)
    # Spec JSON.
    for name, (mut, words) in {
        "unknown-key": ({"extra": 1}, ["unknown key"]),
        "odd-head": ({"rope": {"head_dim": 127, "base": 10000, "layout": "half_split"}}, ["rope.head_dim"]),
        "base-list": ({"rope": {"head_dim": 128, "base": [1, [2, [3, [4]]]], "layout": "half_split"}},
                      ["'rope.base': must be a number, got [1,[2,[3,[...]]]]"]),
        "family": ({"family": "alibi"}, ["family"]),
        # MLA layout (SPEC_FORMAT.md "MLA"): the slice must fit the head; two key layouts.
        "mla-offset-past-head": ({"rope": {"head_dim": 192, "rotary_dim": 64, "rotary_offset": 130, "base": 10000,
                                           "layout": "interleaved"}}, ["'rope.rotary_offset' = 130", "(128)"]),
        "mla-offset-negative": ({"rope": {"head_dim": 192, "rotary_dim": 64, "rotary_offset": -2, "base": 10000,
                                          "layout": "interleaved"}}, ["'rope.rotary_offset' = -2"]),
        "mla-key-layout": ({"rope": {"head_dim": 192, "rotary_dim": 64, "key_layout": "shared", "base": 10000,
                                     "layout": "interleaved"}}, ["rope.key_layout", "shared"]),
    }.items():
        s = dict(SPEC_BASE)
        s.update(mut)
        c.write(f"spec-{name}.json", json.dumps(s))
        c.case(f"spec {name}", ["spec", "--spec", f"spec-{name}.json"], 2, words)


def manifest_cases(c, golden):
    """Golden sets given to `check` with a tampered manifest (section 3)."""
    with open(os.path.join(golden, "manifest.json")) as f:
        manifest_text = f.read()

    def tampered(name, text):
        d = c.path(name)
        shutil.copytree(golden, d)
        with open(os.path.join(d, "manifest.json"), "w") as f:
            f.write(text)
        return name

    m = json.loads(manifest_text)
    deep_spec = json.dumps(m).replace('"spec": {', '"spec": ' + deep() + ', "spec_was": {', 1)
    gd = tampered("set-deep-spec", deep_spec)
    for mode in (["--candidate", os.path.join(golden, "outputs_f32.safetensors")], ["--kernel", "builtin:accurate"]):
        c.case(f"check manifest deep spec {mode[0]}", ["check", "--golden", gd] + mode + ["--report", "r.json"], 2,
               ["manifest.json", "nests deeper"], dest="r.json")
    m2 = json.loads(manifest_text)
    m2["generator"] = json.loads(deep(100))
    c.case("check manifest deep generator", ["check", "--golden", tampered("set-deep-gen", json.dumps(m2)),
                                             "--kernel", "builtin:accurate"], 2, ["nests deeper"])
    c.case("check manifest truncated", ["check", "--golden", tampered("set-trunc", manifest_text[:100]),
                                        "--kernel", "builtin:accurate"], 2, ["malformed JSON"])
    # A data file replaced by a FIFO (reading it would block) or a link to /dev/zero (never ends): named
    # for what it is, not "missing".
    for name, make, words in (("fifo", lambda p: os.mkfifo(p), ["is a FIFO (named pipe), not a regular file"]),
                              ("dev-zero", lambda p: os.symlink("/dev/zero", p),
                               ["is a character device, not a regular file"])):
        d = tampered(f"set-{name}", manifest_text)
        os.unlink(c.path(d, "outputs_f32.safetensors"))
        make(c.path(d, "outputs_f32.safetensors"))
        c.case(f"check golden data file is a {name}", ["check", "--golden", d, "--kernel", "builtin:accurate"], 2,
               ["'outputs_f32.safetensors' listed in the manifest"] + words, timeout=20)
    m3 = json.loads(manifest_text)
    m3["format_version"] = 2
    c.case("check manifest v2", ["check", "--golden", tampered("set-v2", json.dumps(m3)),
                                 "--kernel", "builtin:accurate"], 2, ["unsupported format_version 2"])


def record(name, problems, seconds=0.0):
    global COUNT
    COUNT += 1
    if problems:
        FAILURES.append(f"{name}:\n    " + "\n    ".join(problems))
    print(f"{'ok  ' if not problems else 'FAIL'} {seconds:5.2f}s {name}")


def wait_for_partial(c, out, proc, timeout=30):
    """Waits until `proc` has made its temporary folder `.OUT.partial-PID`; returns its name."""
    want = f".{out}.partial-{proc.pid}"
    t0 = time.monotonic()
    while not os.path.exists(c.path(want)):
        if proc.poll() is not None or time.monotonic() - t0 > timeout:
            return None
        time.sleep(0.002)
    return want


def destination_cases(c):
    """Section 5 (atomicity and destinations) and defects 6, 7, 8, 10, 11."""
    golden = ["golden", "--preset", "llama-3.1-8b", "--quiet", "--dtypes", "f32"]
    if c.only and c.only not in "destinations":
        return
    # --out DIR/ (defect 8): the set lands at DIR, nothing else is left.
    c.case("golden --out DIR/", golden + ["--positions", "0:4", "--out", "slash/"], 0)
    problems = [] if os.path.isfile(c.path("slash", "manifest.json")) else ["slash/manifest.json missing"]
    record("golden --out DIR/ wrote DIR", problems)
    c.case("golden --out existing DIR/ refused", golden + ["--positions", "0:4", "--out", "slash/"], 2,
           ["already exists"], dest="slash")
    c.case("golden --out DIR/ --overwrite", golden + ["--positions", "0:4", "--out", "slash/", "--overwrite",
                                                      "--seed", "7"], 0)
    with open(c.path("slash", "manifest.json")) as f:
        record("golden --overwrite replaced the set", [] if json.load(f)["generator"]["seed"] == 7 else ["old seed"])
    # --overwrite replaces ropecheck's outputs (or an empty folder), never a source tree or a file.
    os.makedirs(c.path("srctree", "include"))
    c.write("srctree/main.cpp", "int main() {}\n")
    c.case("golden --out a source tree --overwrite refused", golden + ["--positions", "0:4", "--out", "srctree",
                                                                     "--overwrite"], 2,
           ["'srctree' is not empty and holds no ropecheck output", "not replaced"], dest="srctree")
    c.write("plainfile", "x")
    c.case("drift --out a file --overwrite refused", ["drift", "--preset", "llama-3.1-8b", "--max-pos", "64",
                                                      "--no-plots", "--quiet", "--no-uniqueness", "--out", "plainfile",
                                                      "--overwrite"], 2, ["is not a folder; not replaced"],
           dest="plainfile")
    os.makedirs(c.path("emptydir"))
    c.case("golden --out an empty folder --overwrite", golden + ["--positions", "0:4", "--out", "emptydir",
                                                                "--overwrite"], 0)
    for bad in (".", "..", "/"):
        c.case(f"golden --out {bad} --overwrite refused", golden + ["--positions", "0:4", "--out", bad,
                                                                   "--overwrite"], 2, ["names no folder"])
    c.case("drift --out DIR/", ["drift", "--preset", "llama-3.1-8b", "--max-pos", "64", "--no-plots", "--quiet",
                                "--no-uniqueness", "--out", "dslash/"], 0)
    # A folder that appears while golden runs is not replaced without --overwrite (defect 7).
    t0 = time.monotonic()
    p = subprocess.Popen([c.exe] + golden + ["--positions", "0:2048", "--out", "race"], cwd=c.work,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    problems = []
    if wait_for_partial(c, "race", p) is None:
        problems.append("no temporary folder seen")
    p.send_signal(signal.SIGSTOP)
    os.mkdir(c.path("race"))
    with open(c.path("race", "first-run.txt"), "w") as f:
        f.write("first")
    p.send_signal(signal.SIGCONT)
    _, err = p.communicate()
    if p.returncode != 2 or b"appeared while golden was running" not in err or err.count(b"\n") != 1:
        problems.append(f"exit {p.returncode}, stderr {err[:200]!r}")
    if os.listdir(c.path("race")) != ["first-run.txt"]:
        problems.append(f"race/ now holds {os.listdir(c.path('race'))}")
    if leftovers(c.work):
        problems.append(f"left {leftovers(c.work)}")
    record("golden: --out created during the run is not replaced", problems, time.monotonic() - t0)
    # Signals remove the temporary folder (defect 10); the run dies of the signal.
    for cmd, out in ((golden + ["--positions", "0:2048"], "sig"),
                     (["drift", "--preset", "llama-3.1-8b", "--max-pos", "65536", "--no-plots", "--quiet"], "dsig")):
        for sig in (signal.SIGINT, signal.SIGTERM):
            t0 = time.monotonic()
            p = subprocess.Popen([c.exe] + cmd + ["--out", out], cwd=c.work, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            problems = []
            if wait_for_partial(c, out, p) is None:
                problems.append("no temporary folder seen")
            time.sleep(0.05)
            p.send_signal(sig)
            rc = p.wait()
            if rc != -sig:
                problems.append(f"exit {rc}, expected death by signal {sig}")
            left = [n for n in os.listdir(c.work) if out in n]
            if left:
                problems.append(f"left {left}")
                for n in left:
                    shutil.rmtree(c.path(n), ignore_errors=True)
            record(f"{cmd[0]} killed by {signal.Signals(sig).name}: nothing left", problems, time.monotonic() - t0)
    # Stale temporaries of dead processes are removed by the next run to the same --out.
    dead = subprocess.Popen(["true"])
    dead.wait()
    for n in (f".stale.partial-{dead.pid}", f".stale.old-{dead.pid}"):
        os.makedirs(c.path(n))
        with open(c.path(n, "big.bin"), "wb") as f:
            f.write(b"x" * 1000)
    c.case("golden removes stale partial folders of dead processes", golden + ["--positions", "0:4", "--out",
                                                                               "stale"], 0)
    # props --report: checked before the suite runs (nothing printed), written atomically (defect 6).
    props = ["props", "--target", "hf-fp32", "--preset", "llama-3.1-8b", "--cases", "2", "--only", "norm"]
    for name, rep, words in (("missing parent", "no/such/p.json", ["--report", "no such directory"]),
                             ("a directory", "slash", ["--report", "is a directory"])):
        p = c.case(f"props --report {name} refused before the run", props + ["--report", rep], 2, words)
        if p is not None:
            record(f"props --report {name}: nothing printed", [] if p.stdout == b"" else [f"stdout {p.stdout[:100]!r}"])
    c.case("props --report written", props + ["--report", "p.json"], 0)
    record("props --report is JSON", [] if json.load(open(c.path("p.json")))["target"] else ["no target"])
    if os.path.exists("/dev/full"):
        os.symlink("/dev/full", c.path("full.json"))
        # A link is written through, never replaced: to /dev/full the write fails (exit 2, one line),
        # never a 0-byte report with exit 0, and the link stays.
        c.case("props --report through a link to /dev/full", props + ["--report", "full.json"], 2,
               ["--report full.json", "No space left on device"])
        record("props --report left the link to /dev/full a link", [] if os.path.islink(c.path("full.json")) else
               ["the link was replaced"])
    output_destination_cases(c)
    c.case("check --report a directory", ["check", "--golden", "G", "--kernel", "builtin:accurate", "--report",
                                          "slash"], 2, ["is a directory"], dest="slash")
    c.case("check --max-memory not a size", ["check", "--golden", "G", "--kernel", "builtin:accurate", "--max-memory",
                                             "lots", "--report", "mm-report.json"], 2,
           ["--max-memory: 'lots' is not a size"], dest="mm-report.json")
    c.case("check --map without a candidate name", ["check", "--golden", "G", "--kernel", "builtin:accurate", "--map",
                                                    "q_rot.f32=", "--report", "mm-report.json"], 2,
           ["--map 'q_rot.f32=': expected GOLDEN_NAME=CANDIDATE_NAME"], dest="mm-report.json")


def output_destination_cases(c):
    """File outputs write through what is not a regular file (a device, a FIFO, a link) and `-` is stdout."""
    check = ["check", "--golden", "G", "--kernel", "builtin:accurate", "--only", "q_rot.f32"]
    # A character device: a copy of /dev/null made here (a regression then replaces the copy, not the
    # machine's /dev/null, as it did for root); /dev/null itself only when not root.
    null = c.path("null-device")
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError:
        null = "/dev/null" if os.geteuid() != 0 else None
    if null:
        c.case("check --report to a character device", check + ["--report", null, "--junit", null], 0)
        record("the character device is still one", [] if stat.S_ISCHR(os.stat(null).st_mode) else ["replaced"])
    # A link to a report: the link stays, its file gets the report.
    c.write("real-report.json", "old")
    os.symlink("real-report.json", c.path("link-report.json"))
    c.case("check --report through a link", check + ["--report", "link-report.json"], 0)
    problems = [] if os.path.islink(c.path("link-report.json")) else ["the link was replaced"]
    with open(c.path("real-report.json")) as f:
        if not f.read().startswith("{"):
            problems.append("the linked file did not get the report")
    record("check --report through a link keeps the link", problems)
    # A FIFO: written through while a reader drains it.
    fifo = c.path("report.fifo")
    os.mkfifo(fifo)
    t0 = time.monotonic()
    reader = subprocess.Popen(["cat", fifo], stdout=subprocess.PIPE)
    c.case("check --junit to a FIFO", check + ["--junit", "report.fifo"], 0)
    out = reader.communicate(timeout=30)[0]
    record("the FIFO carried the JUnit XML", [] if out.startswith(b"<?xml") and stat.S_ISFIFO(os.stat(fifo).st_mode)
           else [f"read {out[:80]!r}"], time.monotonic() - t0)
    # `-`: the report on stdout, the summary on stderr; /dev/stdout (a pipe here) is the same.
    for dest in ("-", "/dev/stdout"):
        p = c.case(f"check --report {dest}", check + ["--report", dest], 0)
        if p is not None:
            try:
                ok = json.loads(p.stdout)["pass"] is True and b"PASS" in p.stderr
            except ValueError:
                ok = False
            record(f"check --report {dest}: stdout is the JSON report, the summary on stderr",
                   [] if ok else [f"stdout {p.stdout[:120]!r}"])
    c.case("check --report - --junit -", check + ["--report", "-", "--junit", "-"], 2,
           ["--junit -: standard output already carries --report"])
    c.case("check --report - --junit /dev/stdout", check + ["--report", "-", "--junit", "/dev/stdout"], 2,
           ["--junit /dev/stdout: standard output already carries --report"])
    c.case("check --report to a socket", check + ["--report", "/dev/log"], 2, ["is a socket"]) \
        if os.path.exists("/dev/log") and stat.S_ISSOCK(os.stat("/dev/log").st_mode) else None
    os.symlink("nowhere.json", c.path("dangling.json"))
    c.case("check --report through a link to nothing", check + ["--report", "dangling.json"], 2,
           ["a symbolic link to nothing"])


def limit_memory():
    """4 GB of address space, 8 MiB thread stacks: 1024 threads cannot start (reliability-2 defect 5)."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (4_000_000_000, 4_000_000_000))
    resource.setrlimit(resource.RLIMIT_STACK, (8 << 20, 8 << 20))


def thread_cases(c):
    """A worker thread that cannot be created: exit 2 with one line, nothing left (defect 5)."""
    c.case("golden --threads 1024 under a 4 GB limit",
           ["golden", "--preset", "llama-3.1-8b", "--positions", "0:4", "--out", "thr", "--threads", "1024"], 2,
           ["--threads 1024: cannot start worker thread"], dest="thr", preexec=limit_memory)
    c.case("drift --threads 1024 under a 4 GB limit",
           ["drift", "--preset", "llama-3.1-8b", "--max-pos", "1024", "--no-plots", "--quiet", "--out", "thr",
            "--threads", "1024"], 2, ["cannot start worker thread"], dest="thr", preexec=limit_memory)
    c.case("check builtin --threads 1024 under a 4 GB limit (OpenMP)",
           ["check", "--golden", "G1k", "--kernel", "builtin:accurate", "--threads", "1024", "--report", "thr.json"],
           2, ["--threads 1024: cannot start 1024 threads"], dest="thr.json", preexec=limit_memory,
           absent=["UNSUPPORTED"])


def npy_bytes_header(shape, descr="<f4"):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, ", ".join(map(str, shape)) + ",")
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()


def size_cases(c):
    """Sizes estimated before allocating (defect 14)."""
    golden = ["golden", "--preset", "llama-3.1-8b", "--out", "huge"]
    # golden holds its positions and one block of tokens (about 32 MiB of output), whatever the set's size.
    c.case("golden 2^20 positions over --max-memory 16M", golden + ["--positions", "0:1048576", "--max-memory", "16M"],
           2, ["--positions (1048576 tokens)", "needs about", "the --max-memory limit of 16.0 MiB"],
           dest="huge")
    c.case("golden 2^20 positions x 4096 heads: more than the disk holds", golden + ["--positions", "0:1048576",
                                                                                     "--heads", "4096"], 2,
           ["--heads 4096", "TiB on disk, more than the"], dest="huge")
    c.case("golden --max-memory below the estimate", golden + ["--positions", "0:4", "--max-memory", "1K"], 2,
           ["the --max-memory limit of 1.0 KiB"], dest="huge")
    c.case("golden --max-memory not a size", golden + ["--positions", "0:4", "--max-memory", "lots"], 2,
           ["--max-memory: 'lots' is not a size"], dest="huge")
    spec = dict(SPEC_BASE)
    spec["rope"] = {"head_dim": 1 << 20, "base": 10000, "layout": "half_split"}
    c.write("spec-headdim-2p20.json", json.dumps(spec))
    c.case("golden head_dim 2^20 x 65536 positions refused", ["golden", "--spec", "spec-headdim-2p20.json",
                                                              "--positions", "0:65536", "--out", "huge"], 2,
           ["head_dim 1048576", "needs about"], dest="huge")
    # spec estimates its 2^29 frequencies before resolving them (the 4 GB limit is the machine's here).
    spec["rope"] = {"head_dim": 1 << 30, "base": 10000, "layout": "half_split"}
    c.write("spec-headdim-2p30.json", json.dumps(spec))
    c.case("spec head_dim 2^30 under a 4 GB limit", ["spec", "--spec", "spec-headdim-2p30.json"], 2,
           ["head_dim 1073741824 at --digits 45 needs about", "GiB this machine has", "--max-memory raises"],
           preexec=limit_memory)
    c.case("spec head_dim 2^30 over --max-memory", ["spec", "--spec", "spec-headdim-2p30.json", "--max-memory", "64G"],
           2, ["head_dim 1073741824", "needs about 308.1 GiB", "the --max-memory limit of 64.0 GiB"])
    c.case("spec --max-memory below the estimate", ["spec", "--preset", "llama-3.1-8b", "--max-memory", "1K"], 2,
           ["head_dim 128", "the --max-memory limit of 1.0 KiB"])
    c.case("spec --max-memory not a size", ["spec", "--preset", "llama-3.1-8b", "--max-memory", "lots"], 2,
           ["--max-memory: 'lots' is not a size"])
    c.case("spec --max-memory above the estimate", ["spec", "--preset", "llama-3.1-8b", "--max-memory", "1G"], 0)
    # drift estimates before it makes its output folder: the uniqueness pass over 2^24 positions, a
    # head_dim of 2^20 (the exact rows and one chunk of inputs), a --max-memory below the estimate.
    drift = ["drift", "--no-plots", "--quiet", "--out", "huge"]
    c.case("drift 2^24 positions over --max-memory 256M", drift + ["--preset", "llama-3.1-8b", "--max-pos", "16777216",
                                                                 "--max-memory", "256M"], 2,
           ["drift over", "(--max-pos 16777216, --window 256, --per-octave 64) x --heads 4 x head_dim 128",
            "needs about", "the --max-memory limit of 256.0 MiB"], dest="huge")
    spec["rope"] = {"head_dim": 1 << 20, "base": 10000, "layout": "half_split", "max_position_embeddings": 1024}
    c.write("spec-headdim-2p20-drift.json", json.dumps(spec))
    c.case("drift head_dim 2^20 refused", drift + ["--spec", "spec-headdim-2p20-drift.json", "--recipes", "hf"], 2,
           ["head_dim 1048576 x 1 candidates", "needs about", "this machine has"], dest="huge")
    c.case("drift --compare --max-memory below the estimate", drift + ["--preset", "llama-3.1-8b", "--max-pos", "1024",
                                                                     "--compare", "hf,accurate", "--max-memory", "1K"],
           2, ["x 2 candidates", "the --max-memory limit of 1.0 KiB"], dest="huge")
    c.case("drift --max-memory not a size", drift + ["--preset", "llama-3.1-8b", "--max-pos", "1024", "--max-memory",
                                                     "x"], 2, ["--max-memory: 'x' is not a size"], dest="huge")
    # An .npz member that inflates far beyond anything the golden set could compare it with: refused
    # from its declared size, before inflating (16 MiB each here; the probe used 3 x 1 GiB).
    member = npy_bytes_header([1 << 22]) + bytes(1 << 24)
    with zipfile.ZipFile(c.path("bomb.npz"), "w", zipfile.ZIP_DEFLATED) as z:
        for name in ("q_rot.f32.npy", "b.npy", "c.npy"):
            z.writestr(name, member)
    c.case("check .npz bomb refused before inflating", ["check", "--golden", "G", "--candidate", "bomb.npz",
                                                        "--report", "r.json"], 2,
           ["member 'q_rot.f32.npy' declares", "more than the"], dest="r.json")


def option_cases(c):
    """Positions and numeric options (section 2, defects 12 and 13)."""
    g = ["golden", "--preset", "llama-3.1-8b", "--dtypes", "f32", "--quiet"]
    c.case("golden position 2^53 without --seq-len", g + ["--positions", "9007199254740992", "--out", "p53"], 0)
    c.case("golden position 2^53+1 refused", g + ["--positions", "9007199254740993", "--out", "p53b"], 2,
           ["--positions", "outside [0, 2^53]"], dest="p53b")
    for seed, words in (("-1", ["--seed: '-1' is not a non-negative integer"]),
                        ("-5", ["is not a non-negative integer"]),
                        ("18446744073709551616", ["above 2^64-1"]),
                        ("99999999999999999999999", ["above 2^64-1"]),
                        ("1.5", ["not a non-negative integer"])):
        c.case(f"golden --seed {seed}", g + ["--positions", "0:4", "--out", "sd", f"--seed={seed}"], 2, words,
               dest="sd")
    c.case("golden --seed 2^64-1 accepted", g + ["--positions", "0:4", "--out", "sdmax",
                                                 "--seed", "18446744073709551615"], 0)
    c.case("props --seed -1", ["props", "--target", "hf-fp32", "--seed=-1"], 2, ["--seed"])
    c.case("props --seed 2^64", ["props", "--target", "hf-fp32", "--seed", "18446744073709551616"], 2, ["above 2^64-1"])
    c.case("props --max-pos 2^62", ["props", "--target", "hf-fp32", "--max-pos", "4611686018427387904"], 2,
           ["--max-pos must be at most 2^53"])
    c.case("props --max-pos -1", ["props", "--target", "hf-fp32", "--max-pos=-1"], 2, ["--max-pos must be >= 0"])
    d = ["drift", "--preset", "llama-3.1-8b", "--no-plots", "--quiet", "--max-pos", "64", "--out", "dr"]
    c.case("drift --seq-len -5", d + ["--seq-len=-5"], 2, ["--seq-len"], dest="dr")
    c.case("drift --seq-len 2^62", d + ["--seq-len", "4611686018427387904"], 2, ["--seq-len", "not in range"],
           dest="dr")
    c.case("drift --seed -1", d + ["--seed=-1"], 2, ["--seed"], dest="dr")
    ds = d + ["--scores", "--recipes", "builtin:hf"]  # drift --scores: bad pairs, modes it does not combine with
    c.case("drift --scores --pairs bad syntax", ds + ["--pairs", "dist:"], 2, ["--pairs", "dist:"], dest="dr")
    c.case("drift --scores --pairs past 2^24", ds + ["--pairs", "pair:16777216:0"], 2, ["beyond", "2^24"], dest="dr")
    c.case("drift --scores --pairs too many values", ds + ["--pairs", "tail:131072:1"], 2, ["more than 2^24 values"],
           dest="dr")
    c.case("drift --scores on a sinusoidal spec", ["drift", "--preset", "transformer-base", "--scores", "--max-pos", "64",
                                                   "--no-plots", "--out", "dr"], 2, ["RoPE only"], dest="dr")
    c.case("drift --scores --compare", d + ["--scores", "--compare", "builtin:hf,builtin:meta"], 2,
           ["--scores", "--compare"], dest="dr")
    c.case("drift --pairs without --scores", d + ["--pairs", "pair:4:1"], 2, ["--pairs needs --scores"], dest="dr")
    c.case("drift --scores --class unknown", ds + ["--class", "nope"], 2, ["--class"], dest="dr")
    c.case("golden --threads -1", g + ["--positions", "0:4", "--out", "t", "--threads=-1"], 2, ["--threads"], dest="t")
    c.case("golden --heads 0", g + ["--positions", "0:4", "--out", "t", "--heads", "0"], 2, ["--heads"], dest="t")
    c.case("golden --positions 1.5", g + ["--positions=1.5", "--out", "t"], 2, ["--positions"], dest="t")
    c.case("golden --positions empty item", g + ["--positions=5,,6", "--out", "t"], 2, ["empty item"], dest="t")
    c.case("golden --positions too many", g + ["--positions=0:1099511627776", "--out", "t"], 2,
           ["more than 67108864 positions"], dest="t")


def props_store_cases(c):
    """props --stores: the storage properties of an own recipe; bad input refused before any run."""
    p = ["props", "--kernel", "builtin:hf", "--cases", "1"]
    c.case("props --stores unknown store", p + ["--stores", "e4m3"], 2, ["--stores: 'e4m3'", "unknown store"])
    c.case("props --stores empty list", p + ["--stores", ","], 2, ["--stores: empty list"])
    c.case("props --stores with a given scale", p + ["--stores", "e4m3fn:scale=0.0625"], 2, ["a given scale is not a storage property's"])
    c.case("props --stores with a scale over every token", p + ["--stores", "e4m3fn:per-tensor"], 2,
           ["a scale over every token is not a storage property's"])
    c.case("props --stores with a plugin-free target", ["props", "--target", "hf-fp32", "--stores", "q8_0"], 2,
           ["--stores: give --kernel builtin:RECIPE"])
    c.case("props --stores with a cuda kernel", ["props", "--kernel", "cuda:hf", "--stores", "q8_0"], 2,
           ["has no store of its own"])
    c.case("props --stores head_dim the store cannot group", p + ["--stores", "int4g128", "--preset", "gpt-neox-20b"], 2,
           ["--stores: 'int4g128'"])
    c.case("props --stores on a sinusoidal spec", p + ["--stores", "q8_0", "--preset", "transformer-base"], 2,
           ["need a RoPE spec"])
    c.case("props --stores --only a suite property", p + ["--stores", "q8_0", "--only", "norm"], 2,
           ["--only: unknown storage property 'norm'"])
    c.case("props --stores --dtype refused", p + ["--stores", "q8_0", "--dtype", "f32"], 2, ["--dtype: not with --stores"])
    c.case("props --stores --shard refused", p + ["--stores", "q8_0", "--shard", "1/2", "--report", "s.json"], 2,
           ["--shard: not with --stores"], dest="s.json")
    c.case("props --stores --max-pos 2^62", p + ["--stores", "q8_0", "--max-pos", "4611686018427387904"], 2,
           ["--max-pos must be at most 2^53"])
    c.case("props --stores --report into a missing folder", p + ["--stores", "q8_0", "--report", "no/such/r.json"], 2,
           ["--report"])

    d = ["drift", "--preset", "llama-3.1-8b", "--max-pos", "64", "--recipes", "builtin:hf", "--out", "dst"]
    c.case("drift --stores unknown store", d + ["--stores", "int3g64"], 2, ["--stores: 'int3g64'"], dest="dst")
    c.case("drift --stores empty list", d + ["--stores", ","], 2, ["--stores: empty list"], dest="dst")
    c.case("drift --stores with a scale over every token", d + ["--stores", "e5m2:per-head"], 2,
           ["a scale over every token is not drift's"], dest="dst")
    c.case("drift --stores with --scores", d + ["--stores", "q8_0", "--scores"], 2, ["--stores: not with --scores"],
           dest="dst")
    c.case("drift --stores with --compare", ["drift", "--preset", "llama-3.1-8b", "--max-pos", "64", "--compare",
                                             "builtin:hf,builtin:meta", "--stores", "q8_0", "--out", "dst"], 2,
           ["--stores: not with --compare"], dest="dst")
    c.case("drift --stores head_dim the store cannot group", ["drift", "--preset", "gpt-neox-20b", "--max-pos", "64",
                                                              "--recipes", "builtin:hf", "--stores", "int4g128",
                                                              "--out", "dst"], 2, ["--stores: 'int4g128'"], dest="dst")


def score_cases(c):
    """golden --scores PAIRS / --attention BLOCK: a bad pair set or block, a sinusoidal spec, too many pairs
    or tokens, a bad soft-cap, a shard is refused with one line and nothing written."""
    g = ["golden", "--preset", "llama-3.1-8b", "--dtypes", "f32", "--quiet", "--positions", "0:4", "--out", "sc"]
    for arg, words in (("causal:0", ["--scores: 'causal:0'"]),
                       ("dist:10:0", ["--scores: 'dist:10:0'"]),
                       ("pair:-1:0", ["--scores: 'pair:-1:0'"]),
                       ("pair:9007199254740993:0", ["--scores"]),
                       ("bogus:1:2", ["--scores: 'bogus:1:2'"]),
                       ("causal:0:4,,pair:1:0", ["--scores", "empty item"]),
                       ("", ["--scores"])):
        c.case(f"golden --scores {arg!r}", g + [f"--scores={arg}"], 2, words, dest="sc")
    c.case("golden --scores too many pairs", g + ["--scores", "full:0:5000"], 2,
           ["--scores", "more than", "scores per dtype"], dest="sc")
    c.case("golden --scores too many pairs x heads", g + ["--scores", "full:0:1024", "--heads", "8"], 2,
           ["scores per dtype"], dest="sc")
    c.case("golden --scores on a sinusoidal spec",
           ["golden", "--preset", "transformer-base", "--positions", "0:4", "--out", "sc", "--quiet",
            "--scores", "causal:0:4"], 2, ["--scores: needs a RoPE spec"], dest="sc")
    c.case("golden --scores with --shard", g + ["--scores", "causal:0:4", "--shard", "1/2"], 2,
           ["--scores: not with --shard"], dest="sc")
    c.case("golden --scores accepted", g + ["--scores", "causal:0:4,dist:65536:2"], 0)
    for arg, words in (("causal:0", ["--attention: 'causal:0'"]),
                       ("full:0:4:2", ["--attention: 'full:0:4:2'"]),
                       ("dist:10:2", ["--attention: 'dist:10:2'"]),
                       ("causal:0:0", ["N must be in [1, 65536]"]),
                       ("causal:0:65537", ["N must be in [1, 65536]"]),
                       ("causal:0:4:0", ["W must be >= 1"]),
                       ("causal:9007199254740990:8", ["past 2^53"]),
                       ("causal:-1:4", ["--attention"])):
        c.case(f"golden --attention {arg!r}", g + [f"--attention={arg}"], 2, words, dest="sc")
    c.case("golden --softcap without --scores / --attention", g + ["--softcap", "30"], 2,
           ["--softcap: only with --scores or --attention"], dest="sc")
    c.case("golden --sinks without --attention", g + ["--sinks"], 2, ["--sinks: only with"], dest="sc")
    for bad, why in [("e4m3", "unknown store 'e4m3'"), ("e4m3fn:per-tensr", "not an FP8 option"),
                     ("e4m3fn:per-tensor:per-head", "one scale option"),
                     ("int4g48", "group size"), ("int8g64:f64", "not a scale dtype"), ("q8_0,q8_0", "named twice"),
                     ("q4_0:x", "takes no options"), ("", None),
                     ("e4m3fn:scale=0", "scale '0' is not a positive normal"),
                     ("e4m3fn:scale=-1", "scale '-1' is not a positive normal"),
                     ("e4m3fn:scale=nan", "scale 'nan' is not a positive normal"),
                     ("e4m3fn:scale=inf", "scale 'inf' is not a positive normal"),
                     ("e4m3fn:scale=1e39", "scale '1e39' is not a positive normal"),
                     ("e4m3fn:scale=0x1p-4", "scale '0x1p-4' is not a number"),
                     ("e4m3fn:scale=1:per-token", "one scale option"),
                     ("e4m3fn:scale=1/2/3", "lists 3 per-head scales for 1 head")]:
        if why:
            c.case(f"golden --stores {bad}", g + ["--stores", bad], 2, ["--stores: ", why], dest="st")
    c.case("golden --stores with --shared-out",
           [a for a in g if a not in ("--out", "sc")] + ["--stores", "q8_0", "--shard", "1/2", "--shared-out", "sc"], 2,
           ["--stores: not with --shared-out"], dest="sc")
    c.case("golden --stores per-tensor with --shard", g + ["--stores", "e4m3fn:per-tensor", "--shard", "1/2"], 2,
           ["takes its scale over every token: not with --shard"], dest="sc")
    c.case("golden --stores per-head past what is held whole",
           ["golden", "--preset", "llama-3.1-8b", "--dtypes", "f32", "--quiet", "--positions", "0:65537", "--heads", "2",
            "--out", "sc", "--stores", "e5m2:per-head"], 2,
           ["holds q and k whole in memory: at most 16777216 values a tensor, not 16777472"], dest="sc")
    for item in ("e4m3fn:per-tensor", "e4m3fn", "q8_0"):  # any store: it once ended in an internal message
        c.case(f"golden --stores {item} on an MLA spec",
               ["golden", "--preset", "deepseek-v3-mla", "--positions", "0:4", "--out", "sc", "--quiet", "--stores",
                item], 2, ["--stores: not with an MLA spec yet"], dest="sc")
    for cap in ("0", "-3", "inf", "nan"):
        c.case(f"golden --softcap {cap}", g + ["--attention", "causal:0:4", f"--softcap={cap}"], 2, ["softcap"],
               dest="sc")
    c.case("golden --attention on a sinusoidal spec",
           ["golden", "--preset", "transformer-base", "--positions", "0:4", "--out", "sc", "--quiet",
            "--attention", "causal:0:4"], 2, ["--attention: needs a RoPE spec"], dest="sc")
    c.case("golden --attention with --shard", g + ["--attention", "causal:0:4", "--shard", "1/2"], 2,
           ["--attention: not with --shard"], dest="sc")
    c.case("golden --attention too large for --max-memory", g + ["--attention", "causal:0:65536", "--max-memory",
                                                                 "1M"], 2, ["--attention"], dest="sc")
    c.case("golden --scores on an MLA spec",
           ["golden", "--preset", "deepseek-v3-mla", "--positions", "0:4", "--out", "sc", "--quiet",
            "--scores", "causal:0:4"], 2, ["--scores: not offered for the MLA layout"], dest="sc")
    c.case("golden --attention on a spec with the Q/K norm stage",
           ["golden", "--preset", "qwen3-8b", "--positions", "0:4", "--out", "sc", "--quiet", "--attention", "causal:0:4"],
           2, ["--attention: not offered for specs with the Q/K norm stage"], dest="sc")
    c.case("golden --attention accepted", g + ["--attention", "causal:7:6:3", "--softcap", "30", "--sinks", "--overwrite"], 0)


def check_score_cases(c):
    """check of a candidate's attention scores (checker/CHECK_REPORT.md, "Attention scores"): a wrong shape
    or dtype, scores under --shard, or a --map to a missing tensor is refused with one line; NaN scores are
    failures (exit 1), as NaN outputs are."""
    subprocess.run([c.exe, "golden", "--preset", "llama-3.1-8b", "--dtypes", "f32", "--quiet", "--positions", "0:4",
                    "--scores", "causal:0:4", "--out", c.path("SCG")], check=True, capture_output=True)
    n = 10  # causal:0:4 pairs, one head
    good = struct.pack(f"<{n}f", *([0.5] * n))
    c.write("sc-shape.safetensors", safetensors_bytes({"scores": ("F32", [1, n - 1], good[:-4])}))
    c.write("sc-f16.safetensors", safetensors_bytes({"scores": ("F16", [1, n], bytes(2 * n))}))
    c.write("sc-nan.safetensors", safetensors_bytes({"scores": ("F32", [1, n], struct.pack("<f", float("nan")) * n)}))
    c.write("sc-ok.safetensors", safetensors_bytes({"scores": ("F32", [1, n], good)}))
    chk = ["check", "--golden", "SCG", "--report", "r.json", "--candidate"]
    c.case("check scores wrong shape", chk + ["sc-shape.safetensors"], 2, ["scores.f32", "shape [1, 9]"], dest="r.json")
    c.case("check scores wrong dtype", chk + ["sc-f16.safetensors"], 2, ["scores.f16", "does not have"], dest="r.json")
    c.case("check scores with --shard", chk + ["sc-ok.safetensors", "--shard", "1/2"], 2,
           ["--shard", "attention scores"], dest="r.json")
    c.case("check scores --map to a missing tensor", chk + ["sc-ok.safetensors", "--map", "scores.f32=nope"], 2,
           ["--map", "no tensor 'nope'"], dest="r.json")
    c.case("check scores NaN fails", chk + ["sc-nan.safetensors", "--only", "scores", "--no-diagnose"], 1)


def check_attention_cases(c):
    """check of a candidate's attention outputs (checker/CHECK_REPORT.md, "Attention outputs"): a wrong
    shape or dtype, outputs under --shard, or a --map to a missing tensor is refused with one line; NaN
    outputs are failures (exit 1); a set with a block and a candidate without outputs is not tested (exit 3)."""
    subprocess.run([c.exe, "golden", "--preset", "llama-3.1-8b", "--dtypes", "f32", "--quiet", "--positions", "0:4",
                    "--attention", "causal:0:3", "--out", c.path("ATG")], check=True, capture_output=True)
    n = 3 * 1 * 128  # T x group x value_dim
    good = struct.pack(f"<{n}f", *([0.5] * n))
    c.write("ao-shape.safetensors", safetensors_bytes({"attention_out": ("F32", [3, 1, 127], good[:-12])}))
    c.write("ao-f16.safetensors", safetensors_bytes({"attention_out": ("F16", [3, 1, 128], bytes(2 * n))}))
    c.write("ao-nan.safetensors",
            safetensors_bytes({"attention_out": ("F32", [3, 1, 128], struct.pack("<f", float("nan")) * n)}))
    c.write("ao-ok.safetensors", safetensors_bytes({"attention_out": ("F32", [3, 1, 128], good)}))
    with open(c.path("ATG/outputs_f32.safetensors"), "rb") as f:  # the set's own q_rot.f32: it passes
        raw = f.read()
    size = struct.unpack("<Q", raw[:8])[0]
    lo, hi = json.loads(raw[8:8 + size])["q_rot.f32"]["data_offsets"]
    c.write("ao-none.safetensors", safetensors_bytes({"q_rot": ("F32", [4, 1, 128], raw[8 + size + lo:8 + size + hi])}))
    chk = ["check", "--golden", "ATG", "--report", "r.json", "--candidate"]
    c.case("check attention outputs wrong shape", chk + ["ao-shape.safetensors"], 2,
           ["attention_out.f32", "shape [3, 1, 127]"], dest="r.json")
    c.case("check attention outputs wrong dtype", chk + ["ao-f16.safetensors"], 2, ["attention_out.f16", "does not have"],
           dest="r.json")
    c.case("check attention outputs with --shard", chk + ["ao-ok.safetensors", "--shard", "1/2"], 2,
           ["--shard", "attention outputs"], dest="r.json")
    c.case("check attention outputs --map to a missing tensor",
           chk + ["ao-ok.safetensors", "--map", "attention_out.f32=nope"], 2, ["--map", "no tensor 'nope'"], dest="r.json")
    c.case("check attention outputs NaN fails", chk + ["ao-nan.safetensors", "--only", "attention_out"], 1)
    c.case("check attention outputs missing: not tested", chk + ["ao-none.safetensors", "--only", "q_rot,attention_out"], 3)
def kv_cache_cases(c):
    """golden --kv-cache FILE and check --kv-cache CACHE (GOLDEN_FORMAT.md / CHECK_REPORT.md, "KV-cache writes"):
    a bad batch description, bad combinations, a cache of the wrong shape or dtype, bad metadata (an index out
    of range, kv_indptr not monotone, a page_size mismatch) are refused with one line and nothing written."""
    batch = {"sequences": [{"cached": 0, "appended": 3}, {"cached": 5, "appended": 1}], "page_size": 2}
    c.write("kv.json", json.dumps(batch))
    g = ["golden", "--preset", "llama-3.1-8b", "--dtypes", "f32", "--quiet", "--out", "KV"]
    for name, over, words in (("layout NDH", {"layout": "NDH"}, ["layout 'NDH'"]),
                              ("unknown key", {"colour": 1}, ["unknown key 'colour'"]),
                              ("too few pages", {"pages": 2}, ["needs 5"]),
                              ("page index out of range", {"page_table": [[0, 9], [1, 2, 3]]}, ["page index 9"]),
                              ("page_size 0", {"page_size": 0}, ["page_size = 0"]),
                              ("slots HND", {"cache": "slots", "layout": "HND"}, ["slot-mapped cache is NHD"])):
        c.write("kv-bad.json", json.dumps({**batch, **over}))
        c.case(f"golden --kv-cache {name}", g + ["--kv-cache", "kv-bad.json"], 2, ["--kv-cache"] + words, dest="KV")
    c.write("kv-trunc.json", '{"sequences": [')
    c.case("golden --kv-cache malformed JSON", g + ["--kv-cache", "kv-trunc.json"], 2, ["malformed JSON"], dest="KV")
    c.case("golden --kv-cache missing file", g + ["--kv-cache", "nope.json"], 2, ["nope.json"], dest="KV")
    c.case("golden --kv-cache with --positions", g + ["--kv-cache", "kv.json", "--positions", "0:4"], 2,
           ["--kv-cache: not with --positions"], dest="KV")
    c.case("golden without --positions or --kv-cache", g, 2, ["--positions or --kv-cache"], dest="KV")
    c.case("golden --kv-cache with --shard", g + ["--kv-cache", "kv.json", "--shard", "1/2"], 2,
           ["--kv-cache: not with --shard"], dest="KV")
    c.case("golden --kv-cache with --scores", g + ["--kv-cache", "kv.json", "--scores", "causal:0:2"], 2,
           ["--kv-cache: not with --scores"], dest="KV")
    c.case("golden --kv-cache on a sinusoidal spec", ["golden", "--preset", "transformer-base", "--quiet", "--out", "KV",
                                                      "--kv-cache", "kv.json"], 2, ["--kv-cache: needs"], dest="KV")
    c.case("golden --kv-cache accepted", g + ["--kv-cache", "kv.json"], 0)
    # KV: 4 tokens, 1 head of 128; the batch needs 2 + 3 pages of 2 slots, and one spare: k_cache [6, 2, 1, 128] (NHD).
    shape, n = [6, 2, 1, 128], 6 * 2 * 128
    ff = b"\xff" * (4 * n)
    i32 = lambda v: struct.pack(f"<{len(v)}i", *v)
    files = {"kv-nok.safetensors": {"v_cache": ("F32", shape, ff)},
             "kv-pagesize.safetensors": {"k_cache": ("F32", [6, 3, 1, 128], b"\xff" * (4 * 6 * 3 * 128))},
             "kv-dtype.safetensors": {"k_cache": ("F16", shape, ff[:2 * n])},
             "kv-indptr.safetensors": {"k_cache": ("F32", shape, ff), "kv_indptr": ("I32", [3], i32([0, 3, 2])),
                                       "kv_indices": ("I32", [5], i32([0, 1, 2, 3, 4])),
                                       "kv_last_page_len": ("I32", [2], i32([1, 2]))},
             "kv-index.safetensors": {"k_cache": ("F32", shape, ff), "kv_indptr": ("I32", [3], i32([0, 2, 5])),
                                      "kv_indices": ("I32", [5], i32([0, 1, 2, 3, 6])),
                                      "kv_last_page_len": ("I32", [2], i32([1, 2]))},
             "kv-slots.safetensors": {"k_cache": ("F32", shape, ff), "slot_mapping": ("I64", [4], bytes(32))},
             "kv-sentinel.safetensors": {"k_cache": ("F32", shape, ff), "sentinel": ("F32", [2], bytes(8))}}
    for name, tensors in files.items():
        with open(c.path(name), "wb") as f:
            f.write(safetensors_bytes(tensors))
    chk = ["check", "--golden", "KV", "--report", "kr.json", "--kv-cache"]
    for name, words in (("kv-nok", ["has no tensor k_cache"]), ("kv-pagesize", ["page_size dimension", "is 3", "is 2"]),
                        ("kv-dtype", ["dtype"]), ("kv-indptr", ["kv_indptr not monotone"]),
                        ("kv-index", ["page index 6", "outside [0, 6)"]), ("kv-slots", ["slot_mapping for the set's paged"]),
                        ("kv-sentinel", ["sentinel must be one element"])):
        c.case(f"check --kv-cache {name}", chk + [name + ".safetensors"], 2, words, dest="kr.json")
    c.case("check --kv-cache with --candidate", chk + ["kv-nok.safetensors", "--candidate", "x.safetensors"], 2,
           ["--kv-cache: not with --candidate"], dest="kr.json")
    c.case("check --kv-cache on a set without a cache", ["check", "--golden", "G", "--report", "kr.json", "--kv-cache",
                                                         "kv-nok.safetensors"], 2, ["not written with --kv-cache"],
           dest="kr.json")
    with open(c.path("kv-empty.safetensors"), "wb") as f:
        f.write(safetensors_bytes({"k_cache": ("F32", shape, ff)}))
    c.case("check --kv-cache nothing written fails", chk + ["kv-empty.safetensors", "--no-diagnose"], 1)
    # --kernel on a KV-cache set: the kernel's fused append is the candidate (kernel_abi.h revision 3).
    for flag, value in (("--junit", "kj.xml"),):
        c.case(f"check --kernel on a KV-cache set with {flag}", ["check", "--golden", "KV", "--report", "kr.json",
                                                                "--kernel", "builtin:accurate", flag, value], 2,
               ["--kernel on a KV-cache set: not with --baseline or --junit"], dest="kr.json")
def check_store_cases(c):
    """check of a candidate's quantized stores (checker/CHECK_REPORT.md, "Quantized stores"): a store of the
    wrong dtype or shape, a missing or misshapen scale, stores under --shard, a --map to a missing tensor are
    refused with one line; a broken code fails (exit 1)."""
    subprocess.run([c.exe, "golden", "--preset", "llama-3.1-8b", "--dtypes", "f32", "--quiet", "--positions", "0:2",
                    "--heads", "1", "--stores", "e4m3fn,q8_0", "--out", c.path("STG")], check=True, capture_output=True)
    codes, scale = bytes(128 * 2), struct.pack("<2f", 0.01, 0.01)
    c.write("st-dtype.safetensors", safetensors_bytes({"q_rot.e4m3fn": ("F8_E5M2", [2, 1, 128], codes),
                                                       "q_rot.e4m3fn.scale": ("F32", [2], scale)}))
    c.write("st-shape.safetensors", safetensors_bytes({"q_rot.q8_0": ("U8", [2, 1, 4, 17], bytes(2 * 4 * 17))}))
    c.write("st-noscale.safetensors", safetensors_bytes({"q_rot.e4m3fn": ("F8_E4M3", [2, 1, 128], codes)}))
    c.write("st-scaleshape.safetensors", safetensors_bytes({"q_rot.e4m3fn": ("F8_E4M3", [2, 1, 128], codes),
                                                            "q_rot.e4m3fn.scale": ("F32", [1, 2], scale)}))
    c.write("st-zero.safetensors", safetensors_bytes({"q_rot.e4m3fn": ("F8_E4M3", [2, 1, 128], codes),
                                                      "q_rot.e4m3fn.scale": ("F32", [2], scale)}))
    chk = ["check", "--golden", "STG", "--report", "r.json", "--candidate"]
    # (uint8 bit patterns are how .npz carries FP8: accepted as the golden format; the other FP8 type is not)
    c.case("check store wrong dtype", chk + ["st-dtype.safetensors"], 2, ["q_rot.e4m3fn", "is e5m2"], dest="r.json")
    c.case("check store wrong shape", chk + ["st-shape.safetensors"], 2, ["q_rot.q8_0", "shape [2, 1, 4, 17]"],
           dest="r.json")
    c.case("check FP8 store without its scale", chk + ["st-noscale.safetensors"], 2,
           ["comes without 'q_rot.e4m3fn.scale'"], dest="r.json")
    c.case("check FP8 store scale of the wrong shape", chk + ["st-scaleshape.safetensors"], 2,
           ["q_rot.e4m3fn.scale", "[1, 2]"], dest="r.json")
    c.case("check store with --shard", chk + ["st-zero.safetensors", "--shard", "1/2"], 2,
           ["--shard", "quantized store"], dest="r.json")
    c.case("check store --map to a missing tensor", chk + ["st-zero.safetensors", "--map", "q_rot.q8_0=nope"], 2,
           ["--map", "no tensor 'nope'"], dest="r.json")
    c.case("check store of zero codes fails", chk + ["st-zero.safetensors", "--only", "q_rot.e4m3fn"], 1)


def safetensors_bytes(tensors):
    """tensors: {name: (dtype, shape, raw bytes)} -> a safetensors file."""
    header, data = {}, b""
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def message_cases(c, plugins):
    """Every exit-2 message is one line naming the right thing (defect 15)."""
    c.write("name-newline.safetensors", safetensors_bytes({"q_rot\nfake\x1b[31m": ("F32", [4], bytes(16))}))
    c.case("check candidate tensor name with newline and ESC", ["check", "--golden", "G", "--candidate",
                                                                "name-newline.safetensors"], 2,
           ["no candidate tensor matches", "\\n"])
    c.write("headdim-huge.json", hf_text(head_dim=1048578))
    c.case("hf head_dim above 2^20 says too large", ["spec", "--hf-config", "headdim-huge.json"], 2,
           ["'head_dim': too large: 1048578"])
    c.write("hidden-huge.json", hf_text(hidden_size=10**15, num_attention_heads=1))
    c.case("hf derived head_dim 1e15 says too large", ["spec", "--hf-config", "hidden-huge.json"], 2, ["too large"])
    c.case("golden grid beyond 2^53 names --positions",
           ["golden", "--preset", "qwen2-vl-7b", "--positions=grid:9007199254740992:2:2", "--out", "grid"], 2,
           ["--positions: position 9007199254740993 is beyond 2^53"], dest="grid")
    c.write("bad\nname.json", "{")
    c.case("file name with a newline", ["spec", "--spec", "bad\nname.json"], 2, ["bad\\nname.json"])
    if plugins:
        # An error inside the property suite: no RapidCheck banner before the one line.
        # (A kernel returning an unknown code is a failed check since the isolation work, exit 1: cli_isolation.)
        c.case("props plugin error: one line, no RapidCheck banner",
               ["props", "--kernel", os.path.join(plugins, "test_plugin_wrong_abi.so"), "--preset", "llama-3.1-8b",
                "--cases", "2", "--report", "pr.json"], 2, ["ABI version"],
               dest="pr.json")


def tensor_file_cases(c, golden):
    """Section 3: malformed candidate files that already gave one-line exit 2 (kept that way)."""
    with open(os.path.join(golden, "outputs_f32.safetensors"), "rb") as f:
        good = f.read()
    hlen = struct.unpack("<Q", good[:8])[0]
    q = bytes(16 * 128 * 4)
    files = {
        "zero-bytes.safetensors": (b"", ["too short for the 8-byte header length"]),
        "trunc-7.safetensors": (good[:7], ["too short"]),
        "trunc-header.safetensors": (good[:40], ["runs past the end of the file"]),
        "trunc-data.safetensors": (good[:-100], ["data bytes"]),
        "hlen-2p64.safetensors": (struct.pack("<Q", 2**64 - 1) + good[8:], ["exceeds the limit"]),
        "trailing.safetensors": (good + bytes(64), ["trailing bytes"]),
        "header-deep.safetensors": (struct.pack("<Q", 400000) + (deep(200000)).encode(), ["nests deeper than 8"]),
        "header-not-json.safetensors": (struct.pack("<Q", 4) + b"{{{{", ["not valid JSON"]),
        "header-non-utf8.safetensors": (struct.pack("<Q", 7) + b'{"\xff":1}', ["UTF-8"]),
        "dup-names.safetensors": ((lambda h: struct.pack("<Q", len(h)) + h + q)(
            b'{"q_rot.f32":{"dtype":"F32","shape":[16,1,128],"data_offsets":[0,8192]},'
            b'"q_rot.f32":{"dtype":"F32","shape":[16,1,128],"data_offsets":[0,8192]}}'), ["duplicate tensor name"]),
        "overlap.safetensors": (safetensors_bytes({"q_rot.f32": ("F32", [16, 1, 128], q),
                                                   "k_rot.f32": ("F32", [16, 1, 128], q)}).replace(
            b'"data_offsets": [8192, 16384]', b'"data_offsets": [4096, 12288]'), ["overlaps"]),
        "dtype-bool.safetensors": (safetensors_bytes({"q_rot.f32": ("BOOL", [8192], q[:8192])}), ["unsupported dtype"]),
        "shape-negative.safetensors": (safetensors_bytes({"q_rot.f32": ("F32", [-16, 1, 128], q)}), ["negative"]),
        "shape-overflow.safetensors": (safetensors_bytes({"q_rot.f32": ("F32", [2**62, 4, 0], b"")}), ["over"]),
        "zero-bytes.npy": (b"", ["not a .npy file"]),
        "zero-bytes.npz": (b"", ["not a valid .npz"]),
        "not-a-zip.npz": (b"PK" + bytes(100), ["not a valid .npz"]),
    }
    for name, (data, words) in files.items():
        c.write(name, data)
        c.case(f"check candidate {name}", ["check", "--golden", "G", "--candidate", name, "--report", "r.json"], 2,
               words, dest="r.json")
    c.case("check candidate missing", ["check", "--golden", "G", "--candidate", "nope.safetensors"], 2, ["no such file"])
    c.case("check candidate unknown extension", ["check", "--golden", "G", "--candidate", "d.bin"], 2,
           ["no such file"])
    c.case("check golden is a file", ["check", "--golden", "zero-bytes.npy", "--kernel", "builtin:accurate"], 2,
           ["not a folder"])
    os.makedirs(c.path("EMPTY"), exist_ok=True)
    c.case("check golden empty folder", ["check", "--golden", "EMPTY", "--kernel", "builtin:accurate"], 2,
           ["no manifest.json"])
    c.case("check correct candidate passes", ["check", "--golden", "G", "--candidate",
                                              os.path.join(golden, "outputs_f32.safetensors"), "--report", "ok.json",
                                              "--only", "cos.f32,sin.f32,q_rot.f32,k_rot.f32"], 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ropecheck")
    ap.add_argument("-k", default="", help="run only cases whose name holds this")
    ap.add_argument("--plugins", default="", help="folder of the test plugins (tests/plugins)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--instrumented", action="store_true",
                    help="ROPECHECK is built with ASan: skip the cases under an address-space limit")
    a = ap.parse_args()
    exe = os.path.abspath(a.ropecheck)
    work = tempfile.mkdtemp(prefix="ropecheck-hostile-")
    t0 = time.monotonic()
    try:
        c = Catalogue(exe, work, a.k, a.instrumented)
        golden = os.path.join(work, "G")
        subprocess.run([exe, "golden", "--preset", "llama-3.1-8b", "--positions", "0:16", "--dtypes", "f32,bf16",
                        "--out", golden, "--quiet"], check=True, capture_output=True)
        subprocess.run([exe, "golden", "--preset", "llama-3.1-8b", "--positions", "0:1024", "--dtypes", "f32",
                        "--out", os.path.join(work, "G1k"), "--quiet"], check=True, capture_output=True)
        json_cases(c)
        manifest_cases(c, golden)
        tensor_file_cases(c, golden)
        destination_cases(c)
        thread_cases(c)
        size_cases(c)
        option_cases(c)
        props_store_cases(c)
        score_cases(c)
        check_score_cases(c)
        check_attention_cases(c)
        kv_cache_cases(c)
        check_store_cases(c)
        message_cases(c, os.path.abspath(a.plugins) if a.plugins else "")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{COUNT} cases, {len(FAILURES)} failed, {len(SKIPPED)} skipped, {time.monotonic() - t0:.1f} s")
    for f in FAILURES:
        print("FAIL " + f, file=sys.stderr)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
