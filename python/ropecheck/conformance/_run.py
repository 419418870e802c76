"""Runs adapters over presets and judges every cell (implementation x preset x dtype) with the
checker: the strictest accuracy class held, per class the first violating position and the worst
margin (largest error / bound), the verdict against the class the implementation is expected to hold,
and the differential diagnosis of a failure."""
from __future__ import annotations

import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from .. import _check, _golden, _spec
from ._adapter import Adapter, Declined, NotTested
from ._stores_run import StoreCell, run_stores

# Positions and heads of the published matrix: the first 64 positions and 8 log-spaced ones up to
# 131071 (where long-context scalings and f32 angles differ most), 2 heads.
DEFAULT_POSITIONS = "0:64,log:131071:8"
DEFAULT_HEADS = 2
GOLDEN_DTYPES = ("f32", "f16", "bf16")
# Added to the positions of mrope presets (unless they have triples or a grid already): a 4 x 6 image
# block from position 64, so the temporal, height and width streams differ.
MROPE_GRID = "grid:64:4:6"
# The attention block the attention adapters' cells are judged on (golden --attention): 64 causal
# tokens at positions 4032..4095, the set's heads as one query group sharing one key / value head;
# inside every preset's original context, where fp32-angle's outputs are not saturated.
ATTENTION_BLOCK = "causal:4032:64"

# Cell states. pass / fail / not-tested are the checker's verdicts against the expected class;
# "error": the implementation raised on valid input (counts as a failure). A cell the implementation
# declines (it cannot express the preset's variant or has no kernel for the dtype) is "not-tested" with
# `declined` set and its reason, as `ropecheck check`, `props` and `drift --compare` judge a spec a
# kernel declines. "not-applicable" is how matrices written before said declined; read as declined.
STATES = ("pass", "fail", "error", "not-tested", "not-applicable")


@dataclass
class Cell:
    impl: str
    preset: str
    dtype: str
    state: str
    expected: str | None = None
    strictest: str | None = None            # the strictest class q_rot and k_rot (those judged) satisfy
    reason: str = ""
    worst_score: float | None = None        # largest error / bound of the expected class
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)  # class -> held, first position, margin
    diagnosis: str | None = None            # the diagnosis' conclusion (failures)
    diagnosis_match: str | None = None
    seq_len: int | None = None              # what dynamic / LongRoPE were resolved with
    note: str = ""                          # the adapter's stated difference from Hugging Face, if any
    seconds: float = 0.0
    declined: bool = False                  # not tested because the implementation declined it (reason says why)

    def is_declined(self) -> bool:
        return self.declined or self.state == "not-applicable"


@dataclass
class AdapterRun:
    name: str
    title: str
    state: str                 # "run", "not-run", or "carried" (not installed; cells from an earlier run)
    install: str
    reason: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    requested: bool = False    # named with --impl (a not-run adapter then makes the run not-tested)
    carried_from: str = ""     # "carried": the date its cells were measured


@dataclass
class Matrix:
    positions: str
    heads: int
    seed: int
    adapters: list[AdapterRun]
    cells: list[Cell]
    versions: dict[str, str]
    date: str = ""
    command: str = ""
    attention_block: str = ""  # the block the attention cells are judged on ("" when none ran)
    store_cells: list[StoreCell] = field(default_factory=list)  # quantized stores (_stores_run.py)

    def verdict(self) -> str:
        """fail when any cell failed or errored; not-tested when nothing failed but a cell was not
        tested (a declined one included) or an adapter named with --impl did not run; else pass."""
        states = {c.state for c in [*self.cells, *self.store_cells]}
        if states & {"fail", "error"}:
            return "fail"
        if states & {"not-tested", "not-applicable"} or any(a.requested and a.state != "run" for a in self.adapters):
            return "not-tested"
        if not any(c.state == "pass" for c in [*self.cells, *self.store_cells]):
            return "not-tested"  # nothing was judged at all
        return "pass"

    def to_dict(self) -> dict[str, Any]:
        return {"format": "ropecheck-conformance", "format_version": 1, "date": self.date, "command": self.command,
                "positions": self.positions, "heads": self.heads, "seed": self.seed, "verdict": self.verdict(),
                "attention_block": self.attention_block, "versions": self.versions, "adapters": [asdict(a) for a in self.adapters],
                "cells": [asdict(c) for c in self.cells], "store_cells": [asdict(c) for c in self.store_cells]}


def judge(golden: _golden.Golden, dtype: str, q_rot: Any, k_rot: Any, expected: str) -> dict[str, Any]:
    """The checker on q_rot / k_rot of `dtype` against `expected`; the cell's figures. A tensor given as
    None is not judged (an operator that never returns its rotated queries, e.g. GroupQueryAttention)."""
    tensors = {f"{n}.{dtype}": t for n, t in (("q_rot", q_rot), ("k_rot", k_rot)) if t is not None}
    report = _check.check(golden, tensors, only=list(tensors), cls=expected)
    classes: dict[str, dict[str, Any]] = {}
    for t in report.json["tensors"]:
        for c in t["classes"]:
            cur = classes.setdefault(c["class"], {"held": True, "violations": 0, "first_violating_position": None,
                                                  "worst_margin": 0.0})
            cur["held"] = cur["held"] and c["satisfied"]
            cur["violations"] += c["violations"]
            fp = c["first_violating_position"]
            if fp is not None and (cur["first_violating_position"] is None or fp < cur["first_violating_position"]):
                cur["first_violating_position"] = fp
            m = c["worst_margin"]
            cur["worst_margin"] = None if m is None or cur["worst_margin"] is None else max(cur["worst_margin"], m)
    satisfied = report.json["satisfied_classes"]
    d = report.diagnosis
    return {"state": report.verdict, "reason": report.reason, "strictest": satisfied[0] if satisfied else None,
            "worst_score": _max_or_none(r.worst_score for r in report.tensors.values()), "classes": classes,
            "diagnosis": d["conclusion"] if d else None, "diagnosis_match": d["match"] if d else None}


def judge_attention(golden: _golden.Golden, dtype: str, fn: Callable[..., Any], expected: str) -> dict[str, Any]:
    """The checker on fn's outputs of the set's attention block in `dtype` (check(golden, attention=fn))
    against `expected`, as judge()'s figures: per output class held, violations, saturated outputs and
    the worst margin (no first violating position: outputs are judged per element of the block)."""
    report = _check.check(golden, attention=fn, dtypes=[dtype], cls=expected, diagnose=False)
    a = report.attention[0] if report.attention else None  # one dtype asked: one entry
    if a is None:  # fn declined (NotImplementedError): nothing judged
        return {"state": report.verdict, "reason": report.reason, "strictest": None, "worst_score": None,
                "classes": {}, "diagnosis": None, "diagnosis_match": None}
    classes = {c["class"]: {"held": c["state"] == "satisfied", "violations": c["violations"],
                            "first_violating_position": None, "worst_margin": c["worst_margin"],
                            "saturated": c["saturated"]} for c in a["classes"]}
    held = [name for name, c in classes.items() if c["held"]]
    reason = report.reason
    if a["not_tested"]:
        reason = f"{a['not_tested']} of {a['elements']} outputs saturated under {expected}" + (f"; {reason}" if reason else "")
    return {"state": report.verdict, "reason": reason, "strictest": held[0] if held else None,
            "worst_score": a["verdict"]["worst_score"], "classes": classes, "diagnosis": None, "diagnosis_match": None}


def _max_or_none(values: Iterable[float | None]) -> float | None:
    """The largest value; None (infinite, e.g. a NaN output) when any is None."""
    values = list(values)
    return None if any(v is None for v in values) else max(values)


def run(adapters: Iterable[Adapter], presets: Iterable[str], *, positions: str = DEFAULT_POSITIONS,
        heads: int = DEFAULT_HEADS, seed: int = 0, dtypes: Iterable[str] | None = None,
        requested: Iterable[str] = (), progress: Callable[[str], None] = lambda line: None) -> Matrix:
    """Every adapter whose implementation imports, over every preset it supports and every dtype it
    has (narrowed by `dtypes`); adapters that do not import are listed as not run."""
    adapters = list(adapters)
    presets = list(presets)
    requested = set(requested)
    runs: list[AdapterRun] = []
    active: list[Adapter] = []
    for a in adapters:
        why = a.missing()
        runs.append(AdapterRun(a.name, a.title, "not-run" if why else "run", a.install, why or "", a.versions(),
                               a.name in requested))
        if why:
            progress(f"{a.name}: not run ({why}); install: {a.install}")
        else:
            active.append(a)
    stores = [a for a in active if a.judges == "stores"]
    active = [a for a in active if a.judges != "stores"]
    cells: list[Cell] = []
    for preset in presets:
        spec = _spec.Spec.from_preset(preset)
        spec_dict = spec.to_dict()
        todo = [(a, a.supports(spec_dict)) for a in active]
        if not any(why is None for _, why in todo):
            for a, why in todo:
                cells.append(Cell(a.name, preset, "-", "not-tested", reason=why or "", declined=True))
            continue
        spec_positions = positions
        if (spec_dict.get("rope") or {}).get("mrope") and "grid:" not in positions and "/" not in positions:
            # Equal streams would make mrope plain RoPE: an image block gives the streams apart.
            spec_positions = positions + "," + MROPE_GRID
        block = ATTENTION_BLOCK if any(a.judges == "attention" and why is None for a, why in todo) else None
        golden = _golden.golden(spec, spec_positions, heads=heads, dtypes=GOLDEN_DTYPES, seed=seed, attention=block)
        seq_len = None
        if (spec_dict.get("rope") or {}).get("scaling", {}).get("type") in ("dynamic", "longrope"):
            # These resolve with the sequence length: the one that holds every golden position, as
            # Hugging Face takes it (max(position_ids) + 1) and as a caller would build caches for it.
            seq_len = int(golden["positions"].max()) + 1
            golden = _golden.golden(spec, spec_positions, heads=heads, dtypes=GOLDEN_DTYPES, seed=seed,
                                    seq_len=seq_len, attention=block)
        for a, why in todo:
            if why is not None:
                cells.append(Cell(a.name, preset, "-", "not-tested", reason=why, declined=True))
                progress(f"{a.name} {preset}: not tested, declined ({why})")
                continue
            for dt in a.dtypes:
                if dtypes is not None and dt not in dtypes:
                    continue
                cells.append(_cell(a, preset, golden, dt, progress))
                cells[-1].seq_len = seq_len
    block = ATTENTION_BLOCK if any(a.judges == "attention" for a in active) else ""
    if dtypes is not None and "f32" not in dtypes:
        stores = []  # the stores are written from float32 keys
    store_cells = run_stores(stores, presets, positions=positions, heads=heads, seed=seed, progress=progress)
    return Matrix(positions, heads, seed, runs, cells, {}, attention_block=block, store_cells=store_cells)


def _cell(a: Adapter, preset: str, golden: _golden.Golden, dt: str, progress: Callable[[str], None]) -> Cell:
    start = time.perf_counter()
    expected = a.expected_class(golden.spec.to_dict(), dt)
    try:
        if a.judges == "attention":
            m = golden.manifest
            fn = a.attention_fn(golden.spec, dt, seq_len=m["seq_len"], scale=m["attention"]["scale_binary64"])
            figures = judge_attention(golden, dt, fn, expected)
        else:
            q_rot, k_rot = a.run(golden, dt)
            figures = judge(golden, dt, q_rot, k_rot, expected)
    except Declined as e:
        cell = Cell(a.name, preset, dt, "not-tested", expected, reason=str(e), declined=True)
    except NotTested as e:
        cell = Cell(a.name, preset, dt, "not-tested", expected, reason=str(e))
    except Exception as e:  # noqa: BLE001  the implementation failed on valid input: a finding, kept
        last = traceback.extract_tb(e.__traceback__)[-1]
        cell = Cell(a.name, preset, dt, "error", expected,
                    reason=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} ({last.filename}:{last.lineno})")
    else:
        cell = Cell(a.name, preset, dt, expected=expected, **figures)
    cell.note = a.note(golden.spec.to_dict()) or ""
    cell.seconds = round(time.perf_counter() - start, 3)
    line = f"{a.name} {preset} {dt}: {cell.state}"
    if cell.classes:
        line += f", strictest class {cell.strictest or '(none)'}, expected {expected}"
    if cell.reason:
        line += f" ({cell.reason})"
    progress(f"{line} [{cell.seconds:.1f} s]")
    return cell
