"""props(): the property suite (props/PROPERTIES.md) with a Python kernel as its target; the suite
calls back into Python for every kernel call."""
from __future__ import annotations

import inspect
import json
from typing import Any, Callable, Iterable

import numpy as np

from . import _core
from ._arrays import DTYPES, InputError, from_thd, to_numpy, to_thd
from ._spec import Spec

Kernel = Callable[[Any, Any, np.ndarray], tuple[Any, Any]]


class PropsReport:
    """The suite's report: one outcome per property and output dtype. `passed` only for "pass"."""

    def __init__(self, result: _core.PropsResult, header: str):
        self._json_text = result.json
        self._summary = result.summary
        self._header = header
        self.json: dict = json.loads(result.json)
        self.verdict: str = result.verdict
        self.passed: bool = self.verdict == "pass"
        self.properties: list[dict] = self.json["properties"]

    def __bool__(self) -> bool:
        return self.passed

    def outcome(self, name: str, dtype: str | None = None) -> dict:
        for p in self.properties:
            if p["name"] == name and (dtype is None or p["dtype"] == dtype):
                return p
        raise KeyError(name)

    def to_json(self) -> str:
        """The report as `ropecheck props --report` writes it."""
        return self._json_text

    def __str__(self) -> str:
        lines = [self._header, self._summary.rstrip("\n")]
        for p in self.properties:
            if p["verdict"] == "fail":
                lines += [f"\nFAIL {p['name']} (output {p['dtype']}): {p['statement']}",
                          f"  counterexample: {p['counterexample']}"]
                if p.get("failing_position") is not None:
                    lines.append(f"  failing position: {p['failing_position']}")
                lines.append(f"  reproduce: {p['reproduce']}")
        if self.verdict == "pass":
            lines.append("all properties hold")
        elif self.verdict == "fail":
            lines.append("a property failed")
        else:
            names = sorted({p["name"] for p in self.properties if p["verdict"] == "not-tested" and p["applicable"]})
            lines.append(f"NOT TESTED: no property failed, but these were not tested: {', '.join(names)}")
        return "\n".join(lines) + "\n"

    def __repr__(self) -> str:
        return f"<ropecheck.PropsReport {self.verdict}: {len(self.properties)} outcomes>"


def _positional_parameters(fn: Callable) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 4
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def property_names() -> list[str]:
    return list(_core.property_names())


def props(fn: Kernel, spec: Spec | str | None = None, *, cases: int = 100, seed: int = 20261121,
          cls: str = "fp32-angle", dtypes: Iterable[str] = ("f32",), max_pos: int = 0,
          only: Iterable[str] | None = None, layout: str = "thd", negative_positions: bool = False) -> PropsReport:
    """Runs the property suite on `fn(q, k, positions) -> (q_rot, k_rot)`, as `ropecheck props` runs
    it on a target claiming class `cls`. `fn(q, k, positions, spec)` is told each case's spec (a Spec):
    the suite also derives variants of `spec` (YaRN, interleaved, partial rotary, ...), which a
    kernel without that argument declines (not tested); with it, `spec` may be None (generated specs).
    Then, per output dtype in `dtypes`, `cases` cases per property
    (RapidCheck, seed `seed`, positions up to `max_pos`, 0: 2^24), generated specs when `spec` is
    None. The kernel gets q and k in the output dtype and `layout`, positions as int64 [tokens]
    ([tokens, 3] for multimodal specs); raising NotImplementedError declines a case (not tested),
    any other exception is a failed call (fails the property, its message in the report)."""
    if isinstance(spec, str):
        spec = Spec.from_preset(spec)
    name = "python:" + getattr(fn, "__qualname__", type(fn).__name__)
    spec_text = "None" if spec is None else f"ropecheck.Spec.from_preset({spec.name!r})"
    if spec is not None and spec.name not in _core.preset_names():
        spec_text = "spec"

    takes_spec = _positional_parameters(fn) >= 4
    if not takes_spec and spec is None:
        raise InputError("props: a kernel fn(q, k, positions) without a spec argument needs spec= (generated specs "
                         "need fn(q, k, positions, spec))")
    given = None if spec is None else spec.to_json()

    def call(x, dtype, shape, positions, which, out_dtype, case_spec):
        if not takes_spec and case_spec.to_json() != given:
            # The suite derives variants of the spec (YaRN, interleaved, partial rotary, ...); a kernel
            # that is not told the spec cannot follow them: those cases are declined, not failed.
            raise NotImplementedError(f"the kernel takes no spec argument and this case's spec is {case_spec.name} "
                                      f"(a variant of {spec.name}); write fn(q, k, positions, spec) to take it")
        a = np.array(x).view(DTYPES[dtype]).reshape(shape).astype(DTYPES[out_dtype])
        q, k = from_thd(a, layout), from_thd(a.copy(), layout)
        args = (q, k, np.array(positions)) + ((Spec(case_spec),) if takes_spec else ())
        result = fn(*args)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise InputError(f"the kernel must return (q_rot, k_rot), got {type(result).__name__}")
        r = to_thd(to_numpy(result[0 if which == "q" else 1]), layout, f"{which}_rot")
        if r.dtype != DTYPES[out_dtype]:
            raise InputError(f"the kernel returned {r.dtype} for {out_dtype} inputs")
        if list(r.shape) != list(shape):
            raise InputError(f"the kernel returned shape {list(r.shape)}, expected {list(shape)}")
        return np.ascontiguousarray(r).reshape(-1).view(np.uint8)

    def reproduce(prop, seed_, cases_, max_position, dtype):
        extra = f", max_pos={max_position}" if max_position > 0 else ""
        return (f"ropecheck.props({getattr(fn, '__name__', 'fn')}, {spec_text}, cls={cls!r}, only=[{prop!r}], "
                f"seed={seed_}, cases={cases_}{extra}, dtypes=[{dtype!r}])")

    dtypes = [dtypes] if isinstance(dtypes, str) else list(dtypes)
    result = _core.props(call, name, None if spec is None else spec._core, cls, dtypes, cases, seed, max_pos,
                         list(only or []), negative_positions, reproduce)
    header = (f"target {name} ({cls}), spec {'generated' if spec is None else spec.name}, seed {seed}, "
              f"{cases} cases per property")
    return PropsReport(result, header)
