"""python -m ropecheck.conformance [--impl ...] [--presets ...] [--keep-not-run] --out DIR (docs/guide/conformance.md).
Exit codes as the CLI's: 0 every cell run held its expected class, 1 a cell failed (an implementation
weaker than expected, or one that raised), 3 nothing failed but something asked for was not tested
(a checker not-tested, an adapter named with --impl whose package is missing), 2 unusable input (one
line on stderr, nothing written)."""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys

import numpy as np

from .. import SpecError, __version__, presets as all_presets
from .._spec import Spec
from . import DEFAULT_HEADS, DEFAULT_POSITIONS, adapters, run, write
from ._carry import keep_not_run

EXIT = {"pass": 0, "fail": 1, "not-tested": 3}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as the CLI
        print(f"ropecheck: error: {message}", file=sys.stderr)
        sys.exit(2)


def _list(text: str | None) -> list[str] | None:
    return None if text is None else [x for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m ropecheck.conformance",
                description="Runs every installed adapter over the presets it supports and writes the "
                            "conformance matrix (matrix.md, matrix.json, matrix.png) into --out.")
    p.add_argument("--impl", help="comma-separated implementations (default: every installed one)")
    p.add_argument("--presets", help="comma-separated presets (default: every RoPE preset)")
    p.add_argument("--dtypes", help="comma-separated dtypes among f32,f16,bf16 (default: each implementation's)")
    p.add_argument("--positions", default=DEFAULT_POSITIONS, help=f"golden positions (default {DEFAULT_POSITIONS})")
    p.add_argument("--heads", type=int, default=DEFAULT_HEADS, help=f"heads (default {DEFAULT_HEADS})")
    p.add_argument("--seed", type=int, default=0, help="golden input seed (default 0)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--keep-not-run", action="store_true",
                   help="implementations not installed here keep their rows and cells from --out's matrix.json "
                        "(same positions, heads and seed), marked with the date they were measured")
    p.add_argument("--list", action="store_true", help="list the implementations and exit")
    args = p.parse_args(argv)
    try:
        chosen = adapters(_list(args.impl))
        names = _list(args.presets)
        if names is None:
            # The MLA layout (deepseek-v3-mla: a rotary slice, a k_pe key) and the Q/K norm before the
            # rotation (qwen3-8b) take adapters of their own: not yet.
            own = {"rotary_offset", "key_layout", "q_norm", "k_norm"}
            names = [n for n in all_presets() if Spec.from_preset(n).family == "rope"
                     and not own & set(Spec.from_preset(n).to_dict().get("rope", {}))]
        for n in names:
            Spec.from_preset(n)  # an unknown preset: SpecError with the CLI's message
        dtypes = _list(args.dtypes)
        for d in dtypes or []:
            if d not in ("f32", "f16", "bf16"):
                raise ValueError(f"--dtypes: unknown dtype '{d}' (known: f32, f16, bf16)")
        if args.heads < 1:
            raise ValueError(f"--heads: must be at least 1, got {args.heads}")
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise ValueError(f"--out: '{args.out}' exists and is not a folder")
    except (ValueError, SpecError) as e:
        print(f"ropecheck: error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for a in chosen:
            why = a.missing()
            state = "installed" if why is None else "not installed: " + a.install
            print(f"{a.name}: {a.title}; {state}")
        return 0

    def progress(line: str) -> None:
        print(f"conformance: {line}", file=sys.stderr, flush=True)

    try:
        m = run(chosen, names, positions=args.positions, heads=args.heads, seed=args.seed, dtypes=dtypes,
                requested=_list(args.impl) or (), progress=progress)
    except SpecError as e:  # a bad --positions
        print(f"ropecheck: error: {e}", file=sys.stderr)
        return 2
    if args.keep_not_run:
        for note in keep_not_run(m, args.out, names):
            progress(note)
    m.date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    m.command = "python -m ropecheck.conformance " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    m.versions = {"ropecheck": __version__, "python": platform.python_version(), "numpy": np.__version__}
    for note in write(m, args.out):
        progress(note)
    verdict = m.verdict()
    progress(f"verdict {verdict}; matrix in {args.out}/matrix.md")
    return EXIT[verdict]


if __name__ == "__main__":
    sys.exit(main())
