"""Quantized-store cells (docs/guide/conformance.md, "Quantized stores"): a store adapter rotates a golden
set's keys with a real recipe and quantizes them with a real store implementation into the tensors a
candidate answers a store with (checker/CHECK_REPORT.md, "Quantized stores"); the package's `golden(...,
stores=)` writes the set and `check(..., only=)` judges the tensors with the C++ stores checker, as
`ropecheck golden --stores` / `ropecheck check` do. A cell is one implementation x preset x store, with the checker's counts of passed, failed and not
tested elements and scale groups: a store holds undecidable codes (a tie, or a code within the class's
error budget of a decision boundary), counted not tested, never passed (accuracy/ERROR_MODEL.md 15)."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from .. import _golden
from .._check import check
from .._spec import Spec
from ._adapter import Adapter, Declined, NotTested

class StoreAdapter(Adapter):
    """Subclasses set `stores` (the `--stores` items their candidate answers, k_rot only: a KV cache
    stores keys) and implement `quantize`."""

    judges = "stores"
    dtypes = ("f32",)                     # the rotation's dtype: a store is written from binary32 values
    expected = {"f32": "fp32-angle"}      # Hugging Face's / MLX's float32 recipe (ERROR_MODEL.md 15: E)
    stores: tuple[str, ...] = ()

    def quantize(self, golden: _golden.Golden) -> dict[str, np.ndarray]:
        """The candidate tensors: `k_rot.<store>` and its companions, for every store of the adapter."""
        raise NotImplementedError


@dataclass
class StoreCell:
    impl: str
    preset: str
    store: str                  # the --stores item (q8_0, int4g64, e4m3fn, ...)
    state: str                  # pass / fail / not-tested / error (as Cell.state)
    expected: str | None = None
    tensor: str = ""            # the judged golden store tensor (k_rot.q8_0)
    elements: dict[str, int] = field(default_factory=dict)      # count, passed, failed, not_tested
    scale_groups: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    note: str = ""
    seconds: float = 0.0
    declined: bool = False


def check_stores(golden: _golden.Golden, tensors: dict[str, np.ndarray], names: list[str],
                 cls: str) -> dict[str, dict[str, Any]]:
    """The store entries of the check of `tensors` (only `names`, class `cls`) by golden name, as the CLI's
    report has them (ValueError on a tensor the check refuses, as the CLI's exit 2)."""
    r = check(golden, tensors, only=names, cls=cls, worst=0)
    return {s["golden"]: s for s in (r.stores or {}).get("stores", [])}


def _judge(a: StoreAdapter, golden: _golden.Golden, preset: str) -> list[StoreCell]:
    start = time.perf_counter()
    expected = a.expected["f32"]
    cells = []
    try:
        tensors = {k: np.ascontiguousarray(v) for k, v in a.quantize(golden).items()}
        names = [f"k_rot.{s}" for s in a.stores]
        found = check_stores(golden, tensors, names, expected)
        for s, name in zip(a.stores, names):
            e = found.get(name)
            if e is None:  # not judged: the check's reason is not_tested's
                cells.append(StoreCell(a.name, preset, s, "not-tested", expected, name,
                                       reason="not judged by the check"))
                continue
            reason = ""
            if e["elements"]["not_tested"] or e["scale_groups"]["not_tested"]:
                reason = (f"{e['elements']['not_tested']} codes and {e['scale_groups']['not_tested']} scale groups "
                          f"undecidable under {expected}")
            cells.append(StoreCell(a.name, preset, s, e["verdict"], expected, name, e["elements"], e["scale_groups"],
                                   reason))
    except Declined as e:
        cells = [StoreCell(a.name, preset, s, "not-tested", expected, reason=str(e), declined=True) for s in a.stores]
    except NotTested as e:
        cells = [StoreCell(a.name, preset, s, "not-tested", expected, reason=str(e)) for s in a.stores]
    except Exception as e:  # noqa: BLE001  the implementation failed on valid input: a finding, kept
        last = traceback.extract_tb(e.__traceback__)[-1]
        why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} ({last.filename}:{last.lineno})"
        cells = [StoreCell(a.name, preset, s, "error", expected, reason=why) for s in a.stores]
    seconds = round(time.perf_counter() - start, 3)
    for c in cells:
        c.note = a.note(golden.spec.to_dict()) or ""
        c.seconds = seconds
    return cells


def run_stores(adapters: Iterable[StoreAdapter], presets: Iterable[str], *, positions: str, heads: int, seed: int,
               progress: Callable[[str], None] = lambda line: None) -> list[StoreCell]:
    """Every store adapter (installed: missing() is None) over every preset it supports: one golden set
    per preset with every store asked for, one check per adapter."""
    adapters = list(adapters)
    cells: list[StoreCell] = []
    if not adapters:
        return cells
    for preset in presets:
        spec = Spec.from_preset(preset).to_dict()
        todo = []
        for a in adapters:
            why = a.supports(spec)
            if why is None:
                todo.append(a)
            else:
                cells.append(StoreCell(a.name, preset, "-", "not-tested", reason=why, declined=True))
        if not todo:
            continue
        # one set per preset, every store asked for
        stores = [s for a in todo for s in a.stores]
        golden = _golden.golden(preset, positions, heads, ("f32",), seed, stores=stores)
        for a in todo:
            for c in _judge(a, golden, preset):
                cells.append(c)
                counts = ", ".join(f"{k} {c.elements[k]}" for k in ("passed", "failed", "not_tested") if c.elements)
                progress(f"{a.name} {preset} {c.store}: {c.state}" + (f" ({counts})" if counts else "")
                         + (f" ({c.reason})" if c.state == "error" else "") + f" [{c.seconds:.1f} s]")
    return cells
