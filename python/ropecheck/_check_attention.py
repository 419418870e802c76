"""check(golden, scores=..., attention=...): a candidate's attention scores or attention outputs, given
as an array or computed by a Python callable on the golden set's own attention inputs
(golden/GOLDEN_FORMAT.md, "Attention scores" and "Attention blocks"); the checker judges them with the
score and output classes of accuracy/ERROR_MODEL.md section 16, as `ropecheck check` does."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from ._arrays import DTYPES, InputError, dtype_name, to_numpy
from ._golden import Golden

# fn(q [G][D], k [D], query_positions [N], key_positions [N]) -> scores [G][N]
ScoresKernel = Callable[[Any, Any, np.ndarray, np.ndarray], Any]
# fn(q [T][G][D], k [T][D], v [T][Dv], positions [T]) -> output [T][G][Dv]; with sinks=[G] when the set has them
AttentionKernel = Callable[..., Any]

# keyword -> (golden base name, what the set needs, how to write one)
_PARTS = {"scores": ("scores", "attention scores", "golden(..., scores=PAIRS) or `ropecheck golden --scores`"),
          "attention": ("attention_out", "attention block", "golden(..., attention=BLOCK) or `ropecheck golden --attention`")}


@dataclass
class Parts:
    """What scores= / attention= add to a check: candidate tensors (name -> array), the names asked
    for, the callables' names, and the reasons of those that declined (NotImplementedError)."""
    tensors: dict[str, Any] = field(default_factory=dict)
    only: list[str] = field(default_factory=list)
    callables: list[str] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)


def one_dtype(golden: Golden, dtypes: Iterable[str] | None, keyword: str) -> str:
    """The one dtype a scores / attention callable runs in: the only one of `dtypes`, else the set's
    only dtype but f64. A check judges one scores tensor (the report has one `scores` object), and a
    callable is run in one dtype, so more than one is refused."""
    have = [d for d in golden.dtypes if d != "f64"] or ["f64"]
    chosen = list(dtypes) if dtypes is not None else have
    if len(chosen) != 1:
        raise InputError(f"{keyword}=: a callable is judged in one dtype per check (the report holds one {keyword} "
                         f"result); pass dtypes=[...] with one of {', '.join(have)}")
    if chosen[0] not in DTYPES or chosen[0] not in golden.dtypes:
        raise InputError(f"dtypes: '{chosen[0]}' is not an output dtype of this golden set ({', '.join(golden.dtypes)})")
    return chosen[0]


def scores_inputs(golden: Golden, dt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(q [G][D], k [D], query_positions [N], key_positions [N]) of the set's scores, q and k cast to
    `dt` (exact: the generator's values are bf16 numbers)."""
    pairs = golden["score_positions"]
    return (golden["score_q"].astype(DTYPES[dt]), golden["score_k"].astype(DTYPES[dt]),
            np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]))


def attention_inputs(golden: Golden, dt: str) -> tuple[tuple, dict[str, Any]]:
    """((q [T][G][D], k [T][D], v [T][Dv], positions [T]), {"sinks": [G] binary64} when the set has
    sinks) of the set's attention block, q / k / v cast to `dt`."""
    args = (golden["attention_q"].astype(DTYPES[dt]), golden["attention_k"].astype(DTYPES[dt]),
            golden["attention_v"].astype(DTYPES[dt]), golden["attention_positions"])
    return args, ({"sinks": golden["attention_sinks"]} if "attention_sinks" in golden else {})


def _call(golden: Golden, keyword: str, fn: Callable[..., Any], dt: str) -> Any:
    if keyword == "scores":
        return fn(*scores_inputs(golden, dt))
    args, kwargs = attention_inputs(golden, dt)
    return fn(*args, **kwargs)


def _array(value: Any, keyword: str) -> np.ndarray:
    try:
        return np.ascontiguousarray(to_numpy(value))
    except InputError as e:
        raise InputError(f"{keyword}=: {e}") from None


def collect(golden: Golden, dtypes: Iterable[str] | None, **given: Any) -> Parts:
    """The Parts of check()'s scores= / attention= values (None: not given). An array is the candidate
    tensor named by its base ("scores", "attention_out"; its dtype picks the golden tensor); a callable
    runs once on the set's inputs in one_dtype()'s dtype and its result is "<base>.<dtype>". Either asks
    for "<base>.<dtype>" alone."""
    parts = Parts()
    for keyword, value in given.items():
        if value is None:
            continue
        base, what, how = _PARTS[keyword]
        if f"{base}.f64" not in golden:
            raise InputError(f"{keyword}=: this golden set has no {what} (write one with {how})")
        if not callable(value):
            a = parts.tensors[base] = _array(value, keyword)
            parts.only.append(f"{base}.{dtype_name(a)}")  # that dtype's, not every dtype's (the CLI's --only base)
            continue
        dt = one_dtype(golden, dtypes, keyword)
        name = getattr(value, "__qualname__", type(value).__name__)
        parts.callables.append(name)
        parts.only.append(f"{base}.{dt}")
        try:
            result = _call(golden, keyword, value, dt)
        except NotImplementedError as e:  # declined: asked for and missing, so not tested
            parts.declined.append(f"{keyword} {dt}: {str(e).splitlines()[0] if str(e) else 'NotImplementedError'}")
            continue
        parts.tensors[f"{base}.{dt}"] = _array(result, keyword)
    return parts
