#!/usr/bin/env python3
"""The doc test: runs every code block of README.md and docs/guide/*.md, so the documentation cannot
rot (docs/development/documentation.md).

    run_doc_blocks.py --ropecheck build/release/cli/ropecheck [--phase cli|python] [--list] [FILE...]

Phase `cli` (ctest `docs_blocks`) runs the ```sh and ```console blocks with `ropecheck` on PATH and
first checks the links (check_links.py); phase `python` (tests/python/package/test_doc_blocks.py, after
`pip install .`) runs the ```python blocks and the blocks marked `package` with the interpreter that
runs this script. The blocks of one file run in order in one temporary folder, which holds links to
the build folder of the binary under test (as build/release) and to examples/, so that paths written
from the repository root work; ROPECHECK_REPO names the repository. Skipped blocks are counted and printed with their reason; a
block of the other phase is counted as such. Exit 0 when every block of the phase ran as written.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_links  # noqa: E402
from doc_blocks import Block, DocError, console_commands, excerpt_problem, logical_lines, parse  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DEFAULT_FILES = ["README.md", "docs/guide/*.md"]
BLOCK_TIMEOUT = 600
PY_DRIVER = r"""
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
ns = {"__name__": "__doc_test__"}
for b in blocks:
    print(f"doc-test: python block {b['where']}", flush=True)
    try:
        exec(compile(b["code"], b["where"], "exec"), ns)
    except BaseException:
        traceback.print_exc()
        print(f"doc-test: FAILED {b['where']}", flush=True)
        sys.exit(1)
"""


class BlockFailure(Exception):
    pass


class Ran:
    """A finished command: its exit code and output (stdout, then stderr, as `stdout`)."""

    def __init__(self, r: subprocess.CompletedProcess):
        self.returncode = r.returncode
        self.stdout = r.stdout + r.stderr
        self.stderr = r.stderr


def run(cmd: list[str] | str, cwd: str, env: dict, shell: bool = False) -> Ran:
    return Ran(subprocess.run(cmd, cwd=cwd, env=env, shell=shell, executable="/bin/bash" if shell else None,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=BLOCK_TIMEOUT))


def tail(r: Ran | str, n: int = 30) -> str:
    """The last lines of the output, stderr's last lines last (where a one-line error is)."""
    text = r if isinstance(r, str) else r.stdout[: len(r.stdout) - len(r.stderr)] + "\n--- stderr:\n" + r.stderr
    lines = text.rstrip("\n").split("\n")
    return "\n".join(("    " + l) for l in lines[-n:])


def sh_script(block: Block) -> str:
    """The block as a bash script: stop at the first failing command; a `# exit N` line must exit N."""
    out = ["set -eo pipefail"]
    for line, expected in logical_lines(block.program()):
        if expected == 0:
            out.append(line)
        else:
            quoted = json.dumps(line.strip())
            out.append(f"set +e; {line}\n__rc=$?; set -e\n"
                       f'[ "$__rc" -eq {expected} ] || {{ echo "doc-test: exit $__rc, expected {expected}: "{quoted}; exit 97; }}')
    return "\n".join(out) + "\n"


def matches(want: str, got: str) -> bool:
    """A line as written, where each `...` stands for any text."""
    return re.fullmatch(".*".join(re.escape(part) for part in want.split("...")), got) is not None


def expect_lines(block: Block, cmd: str, expected: list[str], output: str) -> None:
    """Every expected line, in order, among the output's lines (trailing blanks ignored; `...` and
    blank lines stand for anything, `...` inside a line for any text)."""
    got = [l.rstrip() for l in output.split("\n")]
    at = 0
    for want in expected:
        if not want.strip() or want.strip() == "...":
            continue
        while at < len(got) and not matches(want, got[at]):
            at += 1
        if at == len(got):
            raise BlockFailure(f"{block.where}: `{cmd}` did not print, in order:\n    {want}\n  it printed:\n{tail(output)}")
        at += 1


def run_block(block: Block, cwd: str, env: dict, python: str) -> None:
    for setup in block.setups:
        print(f"    setup: {setup}")
        r = run(setup, cwd, env, shell=True)
        if r.returncode != 0:
            raise BlockFailure(f"{block.where}: setup `{setup}` exited {r.returncode}:\n{tail(r)}")
    for old, new in block.replaces:
        print(f"    replace: {old!r} -> {new!r}")
    if block.kind == "sh":
        r = run(["bash", "-c", sh_script(block)], cwd, env)
        if r.returncode != 0:
            raise BlockFailure(f"{block.where}: exited {r.returncode}:\n{tail(r)}")
    elif block.kind == "console":
        for cmd, expected, lines in console_commands(block, block.program()):
            r = run(["bash", "-o", "pipefail", "-c", cmd], cwd, env)
            if r.returncode != expected:
                raise BlockFailure(f"{block.where}: `{cmd}` exited {r.returncode}, expected {expected}:\n{tail(r)}")
            expect_lines(block, cmd, lines, r.stdout)
    elif block.pytest:
        name = f"test_doc_block_{block.line}.py"
        with open(os.path.join(cwd, name), "w") as f:
            f.write(block.program())
        r = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", name], cwd, env)
        if r.returncode != 0:
            raise BlockFailure(f"{block.where}: pytest exited {r.returncode}:\n{tail(r)}")


def run_python_blocks(blocks: list[Block], cwd: str, env: dict, python: str) -> None:
    """Consecutive ```python blocks of one file share one interpreter, as a reader's session would."""
    for b in blocks:
        for setup in b.setups:
            print(f"    setup: {setup}")
            r = run(setup, cwd, env, shell=True)
            if r.returncode != 0:
                raise BlockFailure(f"{b.where}: setup `{setup}` exited {r.returncode}:\n{tail(r)}")
    spec = os.path.join(cwd, ".doc_blocks.json")
    with open(spec, "w") as f:
        json.dump([{"where": b.where, "code": b.program()} for b in blocks], f)
    r = run([python, "-c", PY_DRIVER, spec], cwd, env)
    if r.returncode != 0:
        raise BlockFailure(f"python blocks of {blocks[0].path}: exited {r.returncode}:\n{tail(r, 60)}")


def check_excerpts(parsed: dict[str, list[Block]]) -> list[str]:
    """The blocks marked `excerpt PATH` are still part of PATH (phase cli; nothing runs)."""
    failures = []
    for blocks in parsed.values():
        for b in (b for b in blocks if b.excerpt):
            path = os.path.join(REPO, b.excerpt)
            missing = excerpt_problem(b, open(path, encoding="utf-8").read()) if os.path.exists(path) else "(no such file)"
            print(f"  {'ok' if missing is None else 'FAILED':6} {b.where} ```{b.lang} excerpt of {b.excerpt}")
            if missing is not None:
                failures.append(f"{b.where}: not an excerpt of {b.excerpt}: {missing}")
    return failures


def environment(ropecheck: str, python: str) -> dict:
    env = dict(os.environ)
    dirs = [os.path.dirname(os.path.abspath(ropecheck)), os.path.dirname(os.path.abspath(python))]
    env["PATH"] = os.pathsep.join(dirs + [env.get("PATH", "")])
    env["ROPECHECK_REPO"] = REPO
    env["ROPECHECK_BIN"] = os.path.abspath(ropecheck)
    env.pop("ROPECHECK_CUDA_EMULATION", None)
    return env


def run_file(path: str, blocks: list[Block], phase: str, env: dict, python: str) -> list[str]:
    """Runs the file's blocks of this phase in order; returns the failures."""
    mine = [b for b in blocks if b.phase() == phase]
    if not mine:
        return []
    failures = []
    with tempfile.TemporaryDirectory(prefix="ropecheck-doc-") as cwd:
        # build/release is the build folder of the binary under test (build/release, or another preset's)
        os.mkdir(os.path.join(cwd, "build"))
        os.symlink(os.path.dirname(os.path.dirname(os.path.abspath(env["ROPECHECK_BIN"]))), os.path.join(cwd, "build", "release"))
        os.symlink(os.path.join(REPO, "examples"), os.path.join(cwd, "examples"))
        i = 0
        while i < len(mine):
            b = mine[i]
            group = [b]
            if b.kind == "python" and not b.pytest:
                while i + len(group) < len(mine) and mine[i + len(group)].kind == "python" and not mine[i + len(group)].pytest:
                    group.append(mine[i + len(group)])
            start = time.monotonic()
            try:
                if len(group) > 1 or (b.kind == "python" and not b.pytest):
                    run_python_blocks(group, cwd, env, python)
                else:
                    run_block(b, cwd, env, python)
                status = "ok"
            except (BlockFailure, DocError, subprocess.TimeoutExpired) as e:
                failures.append(str(e))
                status = "FAILED"
            for g in group:
                print(f"  {status:6} {g.where} ```{g.lang} ({time.monotonic() - start:.1f} s)", flush=True)
            if status != "ok":
                break  # later blocks of the file build on this one
            i += len(group)
    return failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ropecheck", default=os.path.join(REPO, "build/release/cli/ropecheck"))
    ap.add_argument("--phase", choices=["cli", "python"], default="cli")
    ap.add_argument("--list", action="store_true", help="list the blocks and what would happen, run nothing")
    ap.add_argument("files", nargs="*", help="Markdown files relative to the repository (default: README.md docs/guide/*.md)")
    a = ap.parse_args()
    files = sorted({os.path.relpath(p, REPO) for pat in (a.files or DEFAULT_FILES) for p in glob.glob(os.path.join(REPO, pat))})
    started = time.monotonic()
    try:
        parsed = {f: parse(f, open(os.path.join(REPO, f), encoding="utf-8").read()) for f in files}
    except DocError as e:
        print(f"doc-test: {e}")
        return 1
    counts = {"run": 0, "skipped": 0, "other phase": 0, "excerpts": 0, "not a program": 0}
    for f, blocks in parsed.items():
        for b in blocks:
            if b.excerpt:
                counts["excerpts"] += 1
            elif b.kind is None:
                counts["not a program"] += 1
            elif b.skip is not None:
                counts["skipped"] += 1
                print(f"  skip   {b.where} ```{b.lang}: {b.skip}")
            elif b.phase() != a.phase:
                counts["other phase"] += 1
            else:
                counts["run"] += 1
    if a.list:
        print(", ".join(f"{v} {k}" for k, v in counts.items()))
        return 0
    failures = check_links.check(REPO) + check_excerpts(parsed) if a.phase == "cli" else []
    env = environment(a.ropecheck, sys.executable)
    for f, blocks in parsed.items():
        failures += run_file(f, blocks, a.phase, env, sys.executable)
    print(f"doc-test ({a.phase}): {len(files)} files; " + ", ".join(f"{v} {k}" for k, v in counts.items()) +
          f"; {time.monotonic() - started:.1f} s")
    for msg in failures:
        print("FAIL " + msg)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
