"""check(): candidate tensors, or a kernel (a Python callable) run on the golden inputs, against a
golden set, by the library's checker (the one `ropecheck check` uses); the report as an object."""
from __future__ import annotations

import html
import inspect
import json
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from . import _core, _kv_cache, _stores
from ._arrays import DTYPES, InputError, dtype_name, from_thd, to_numpy, to_thd
from ._check_attention import AttentionKernel, Parts, ScoresKernel, collect
from ._golden import Golden

Kernel = Callable[[Any, Any, np.ndarray], tuple[Any, Any]]

# Called with every report check() makes (the pytest plugin's --ropecheck-report keeps them).
report_sinks: list[Callable[["Report"], None]] = []


class TensorResult:
    """One golden output's figures (checker/CHECK_REPORT.md, `tensors[]`)."""

    def __init__(self, j: dict):
        self.json = j
        self.name: str = j["golden"]
        self.candidate: str = j["candidate"]
        self.verdict: str = j["verdict"]["state"]
        self.passed: bool = self.verdict == "pass"
        self.reason: str = j["verdict"]["reason"]
        self.best_class: str | None = j["best_class"]
        # Per class, strictest first: "satisfied", "violated" or "not-tested" (no violation, but
        # saturated bounds: an all-zero output would pass there; never satisfied).
        self.classes: dict[str, str] = {c["class"]: c["state"] for c in j["classes"]}
        # Per class, the smallest position where its bound is saturated (None: never).
        self.saturated_from: dict[str, int | None] = {c["class"]: c["first_saturated_position"] for c in j["classes"]}
        m = j["metrics"]
        self.max_ulps: float = m["max_ulps"]
        self.max_abs_error: float = m["max_abs_error"]
        self.max_rel_error: float = m["max_rel_error"]
        self.nmse: float = m["nmse"]
        self.worst_score: float = j["verdict"]["worst_score"]
        self.violations: int = j["verdict"]["violations"]
        self.first_violating_position: int | None = j["verdict"]["first_violating_position"]

    def __repr__(self) -> str:
        return f"<TensorResult {self.name}: {self.verdict}, worst score {self.worst_score:.4g}>"


class Report:
    """The checker's report. `passed` is True only for the verdict "pass": "not-tested" (something
    asked for was not tested, or a class bound was saturated) is never passed."""

    def __init__(self, result: _core.CheckResult):
        self._json_text = result.json
        self._summary = result.summary
        self.json: dict = json.loads(result.json)
        self.verdict: str = result.verdict
        self.passed: bool = self.verdict == "pass"
        self.reason: str = self.json["reason"]
        self.tensors: dict[str, TensorResult] = {t["golden"]: TensorResult(t) for t in self.json["tensors"]}
        self.not_tested: list[str] = list(self.json["not_tested"])
        # Classes every tensor satisfies, and those no tensor violates but some tensor does not test
        # (saturated bounds), strictest first: a not-tested class is never in satisfied_classes.
        self.satisfied_classes: list[str] = list(self.json["satisfied_classes"])
        self.not_tested_classes: list[str] = list(self.json["not_tested_classes"])
        # The kernel declined every output asked for (UNSUPPORTED, or an entry point it lacks): its
        # reason; the verdict is then "not-tested". None otherwise.
        self.declined: str | None = self.json["declined"]
        # The diagnosis of a failing check (checker/DIAGNOSIS.md): which known mistake explains the
        # failing elements, ranked; None when the check was not diagnosed.
        self.diagnosis: dict | None = self.json.get("diagnosis")
        # check(..., baseline=): the comparison with the earlier report (a regression fails the verdict).
        self.baseline: dict | None = self.json.get("baseline")
        # check(..., scores=) / check(..., attention=): the judged scores' object and the attention
        # outputs' objects, one per dtype judged (CHECK_REPORT.md, "Attention scores" and "Attention
        # outputs"); None when none was judged.
        self.scores: dict | None = self.json.get("scores")
        self.attention: list[dict] | None = self.json.get("attention")
        # The quantized stores' judgement (CHECK_REPORT.md, "Quantized stores") and a KV-cache write's
        # ("KV-cache writes"); None when none was judged.
        self.stores: dict | None = self.json.get("stores")
        self.kv_cache: dict | None = self.json.get("kv_cache")

    def __bool__(self) -> bool:
        return self.passed

    def worst(self, n: int = 10) -> list[dict]:
        """The n worst elements over every tensor, highest score (error / bound) first; each names
        its tensor, token, position, head, channel, pair, candidate, truth, ulps and score, and whether
        it is saturated (its bound accepts any output of its magnitude: not tested, whatever the score)."""
        rows = [dict(e, tensor=t["golden"]) for t in self.json["tensors"] for e in t["worst"]]
        rows.sort(key=lambda e: -e["score"])
        return rows[:n]

    def to_json(self) -> str:
        """The report as `ropecheck check --report` writes it."""
        return self._json_text

    def __str__(self) -> str:
        return self._summary

    def __repr__(self) -> str:
        return f"<ropecheck.Report {self.verdict}: {len(self.tensors)} tensors{', ' + self.reason if self.reason else ''}>"

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{h}</th>" for h in ("tensor", "verdict", "best class", "max ulp", "max abs error",
                                                   "worst score", "violations", "first violating position"))
        rows = []
        for t in self.tensors.values():
            color = {"pass": "#1a7f37", "fail": "#cf222e"}.get(t.verdict, "#9a6700")
            cells = (html.escape(t.name), f'<b style="color:{color}">{t.verdict}</b>', html.escape(t.best_class or "-"),
                     f"{t.max_ulps:.4g}", f"{t.max_abs_error:.4g}", f"{t.worst_score:.4g}", str(t.violations),
                     "-" if t.first_violating_position is None else str(t.first_violating_position))
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        crit = html.escape(json.dumps(self.json["criterion"]))
        return (f"<p><b>ropecheck check</b>: {html.escape(self.json['spec'])}, criterion {crit}: "
                f"<b>{self.verdict}</b> {html.escape(self.reason)}</p>"
                f"<table><tr>{head}</tr>{''.join(rows)}</table>")


def _candidate_tensors(golden: Golden, candidate: Mapping[str, Any], layout: str) -> list[tuple]:
    out = []
    for name, value in candidate.items():
        a = to_thd(to_numpy(value), layout, name)
        a = np.ascontiguousarray(a)
        out.append((name, dtype_name(a), list(a.shape), a.reshape(-1).view(np.uint8)))
    return out


def _run_kernel(golden: Golden, fn: Kernel, dtypes: Iterable[str], layout: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """fn(q, k, positions) -> (q_rot, k_rot) once per dtype, on the golden inputs cast to it (exact:
    every input value is representable in bf16 and f16); a dtype for which fn raises NotImplementedError
    is declined (not tested), as a plugin that answers UNSUPPORTED. Returns the outputs and the reasons
    of the declined dtypes."""
    if not golden.heads:
        raise InputError("check(golden, fn): a kernel callable needs a RoPE golden set (this one is sinusoidal)")
    out, declined = {}, []
    positions = golden["positions"]
    key = "k_pe" if "k_pe" in golden else "k"  # MLA: one k_pe [tokens, rotary_dim] per token, no head axis
    extra = _kernel_extras(golden, fn)
    for dt in dtypes:
        if dt not in DTYPES or dt not in golden.dtypes:
            raise InputError(f"dtypes: '{dt}' is not an output dtype of this golden set ({', '.join(golden.dtypes)})")
        q = from_thd(golden["q"].astype(DTYPES[dt]), layout)
        k = golden[key].astype(DTYPES[dt]) if key == "k_pe" else from_thd(golden["k"].astype(DTYPES[dt]), layout)
        try:
            result = fn(q, k, positions, **extra)
        except NotImplementedError as e:
            declined.append(f"{dt}: {str(e).splitlines()[0] if str(e) else 'NotImplementedError'}")
            continue
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise InputError(f"the kernel must return (q_rot, k_rot), got {type(result).__name__}")
        out[f"q_rot.{dt}"], out[f"{key}_rot.{dt}"] = result
    return out, declined


def _kernel_extras(golden: Golden, fn: Callable) -> dict[str, Any]:
    """What a norm or MLA set's kernel needs besides q, k and positions, as keyword arguments it takes
    (by name, or **kwargs): q_norm / k_norm (Golden.q_norm: eps, weight_form, weight) and rotary_offset."""
    have = {"q_norm": golden.q_norm, "k_norm": golden.k_norm}
    have = {n: v for n, v in have.items() if v is not None}
    if golden.rotary_offset:
        have["rotary_offset"] = golden.rotary_offset
    if not have:
        return {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature: nothing extra
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return have
    return {n: v for n, v in have.items() if n in params}


def _run_store_kernel(golden: Golden, fn: Callable, record: dict, dtypes: Iterable[str] | None,
                      layout: str) -> tuple[dict[str, np.ndarray], str]:
    """fn(q, k, positions) -> (q_store, k_store) once, on the golden inputs in one dtype (default f32,
    the stores' owners' input), each store as _stores.candidate takes it; and the reason of a kernel that
    declined (NotImplementedError: not tested), else ""."""
    dts = list(dtypes) if dtypes is not None else ["f32"]
    if len(dts) != 1 or dts[0] not in ("f32", "f16", "bf16"):
        raise InputError(f"dtypes: a store kernel runs in one input dtype (f32, f16 or bf16), got {dts}")
    q, k = (from_thd(golden[n].astype(DTYPES[dts[0]]), layout) for n in ("q", "k"))
    try:
        result = fn(q, k, golden["positions"], **_kernel_extras(golden, fn))
    except NotImplementedError as e:
        return {}, f"{record['name']}: {str(e).splitlines()[0] if str(e) else 'NotImplementedError'}"
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise InputError(f"the store kernel must return (q_store, k_store), got {type(result).__name__}")
    out: dict[str, np.ndarray] = {}
    for output, value in zip(("q_rot", "k_rot"), result):
        out.update(_stores.candidate(golden, record, output, value))
    return out, ""


def _as_candidate(golden: Golden, candidate: Any, dtypes: Iterable[str] | None, layout: str,
                  only: Iterable[str] | str | None, parts: Parts) -> tuple[list, str, dict[str, Any], list[str], str]:
    """(tensors, kernel name, candidate_source, only, declined) for _core.check from what check() was
    given (`parts`: its scores= / attention=); declined: the callables' reasons when every one declined."""
    if isinstance(only, str):
        only = only.split(",")
    asked_default = only is None
    if isinstance(candidate, str):  # a kernel by name: the C++ side runs it, as `ropecheck check --kernel`
        if parts.tensors or parts.callables:
            raise InputError("scores= / attention=: not with a kernel name (the checker runs a named kernel's "
                             "rotations only); check them in a call of their own")
        return [], candidate, {}, list(only or []), ""
    names, reasons = [], list(parts.declined)
    tensors: dict[str, Any] = {}
    if candidate is None:
        if not parts.only:
            raise InputError("check: nothing to check (give a candidate, scores= or attention=)")
        only = list(parts.only) if asked_default else only
    elif callable(candidate) and not isinstance(candidate, Mapping):
        dtypes = list(dtypes) if dtypes is not None else [d for d in golden.dtypes if d != "f64"] or ["f64"]
        names.append(getattr(candidate, "__qualname__", type(candidate).__name__))
        tensors, declined = _run_kernel(golden, candidate, dtypes, layout)
        reasons = declined + reasons
        # Every dtype asked for: a declined one is not tested, never left out.
        if asked_default:
            key = "k_pe_rot" if "k_pe" in golden else "k_rot"  # MLA
            only = [f"{b}.{dt}" for dt in dtypes for b in ("q_rot", key)] + parts.only
    elif isinstance(candidate, Mapping):
        tensors = dict(candidate)
    else:
        raise InputError("candidate: expected a mapping of name -> array, a kernel callable or a kernel name, "
                         f"got {type(candidate).__name__}")
    names += parts.callables
    source: dict[str, Any] = {"kind": "python-callable", "name": ", ".join(names)} if names else {"kind": "python"}
    declined = ""
    if names and not tensors and not parts.tensors:
        declined = f"{source['name']} raised NotImplementedError for every dtype ({'; '.join(reasons)})"
    out = _candidate_tensors(golden, tensors, layout)
    out += [(n, dtype_name(a), list(a.shape), a.reshape(-1).view(np.uint8)) for n, a in parts.tensors.items()]
    return out, "", source, list(only or []), declined


def check(golden: Golden, candidate: Mapping[str, Any] | Kernel | str | None = None, *,
          scores: Any | ScoresKernel = None, attention: Any | AttentionKernel = None, cls: str | None = None,
          max_ulp: float | None = None, atol: float | None = None, rtol: float | None = None,
          layout: str = "thd", dtypes: Iterable[str] | None = None, only: Iterable[str] | None = None,
          name_map: Mapping[str, str] | None = None, worst: int = 10, threads: int = 0,
          diagnose: bool | None = None, baseline: str | None = None, max_growth: float = 2.0,
          stores: str | None = None, kv_cache: Any = None) -> Report:
    """Checks `candidate` against `golden` with one criterion (default class fp32-angle; or cls=,
    max_ulp=, atol= with rtol=), exactly as `ropecheck check` does: the same checker entry point, the
    same report.

    candidate: a mapping from tensor name ("q_rot.bf16", or "q_rot" with a bf16 array) to an array
    (NumPy, PyTorch CPU / CUDA, JAX, anything with __dlpack__ or __array__); every golden output is
    asked for unless `only` narrows it (a missing one makes the verdict "not-tested"). Or a kernel
    fn(q, k, positions) -> (q_rot, k_rot), called with the golden inputs in each of `dtypes` (default:
    the set's dtypes but f64); then q_rot and k_rot of those dtypes are what is asked for (a dtype for
    which fn raises NotImplementedError is declined: not tested, "not-tested" when every one is). Or a kernel
    name, as `ropecheck check --kernel` takes it ("builtin:hf", "cuda:hf", "plugin:./librope.so").
    Or None, with scores= or attention=.
    scores: for a set with attention scores (golden(..., scores=PAIRS)), an array [G][N] (its dtype picks
    scores.<dt>) or a callable fn(q [G][D], k [D], query_positions [N], key_positions [N]) -> [G][N]:
    score [h][p] = scale <R(query_positions[p]) q[h], R(key_positions[p]) k>, scale the manifest's
    scores.scale_binary64 (1/sqrt(head_dim)), soft-capped when the set is.
    attention: for a set with an attention block (golden(..., attention=BLOCK)), an array [T][G][Dv] or a
    callable fn(q [T][G][D], k [T][D], v [T][Dv], positions [T]) -> [T][G][Dv] (and sinks=[G] when the
    set has sinks): RoPE on q and k at `positions`, then attention with the manifest's mask, scale and
    soft-cap (its "attention" record). Each callable runs once, in one dtype (dtypes= names it when the
    set has several), on inputs in the golden set's own shapes (`layout` is for q / k only); it may
    raise NotImplementedError to decline (not tested). Given alone, they are all that is asked for.
    layout: "thd" [tokens, heads, head_dim], "bhsd" [batch, heads, seq, head_dim] or "bshd" [batch,
    seq, heads, head_dim] for q / k shaped tensors (a kernel gets batch 1).
    diagnose: None (as `ropecheck check`: a failing check is diagnosed), True (always, every
    tensor: --diagnose) or False (never: --no-diagnose); the result is Report.diagnosis.
    baseline: an earlier report's path (`--baseline`): an error grown past `max_growth` fails.
    stores: for a set written with --stores, the store (its name: "e4m3fn", "q8_0", "int4g64") a kernel
    fn(q, k, positions) -> (q_store, k_store) returns; each store is (codes, scale) for FP8 (codes
    float8_e4m3fn / float8_e5m2, ml_dtypes or torch), the blocks' uint8 bytes for GGML, (codes uint32,
    scales, biases) for MLX, or a mapping of those parts. Only that store is asked for (Report.stores).
    kv_cache: for a set written with --kv-cache, instead of a candidate: a callable fn(q, k, v,
    positions, cache) given the inputs in one dtype and a sentinel-filled Golden.kv_cache(dtype) to
    write into (returning None, k_cache or (k_cache, v_cache)); a KvCache written in place; or the
    written tensors (a mapping of k_cache, v_cache, sentinel and the kernel's own metadata). Judged as `check --kv-cache`
    (Report.kv_cache)."""
    if kv_cache is not None:
        given = [n for n, v in (("scores", scores), ("attention", attention), ("stores", stores), ("only", only),
                                ("name_map", name_map), ("baseline", baseline)) if v is not None]
        if given:
            raise InputError(f"kv_cache: not with {given[0]}= (the cache is the candidate; its k is k_rot)")
        return _check_kv_cache(golden, candidate, kv_cache, dtypes, cls, max_ulp, atol, rtol, worst, threads, diagnose)
    if stores is not None:
        if not callable(candidate) or isinstance(candidate, Mapping):
            raise InputError("stores: names the store a kernel callable returns; check a mapping of store tensors "
                             "without it")
        record = _stores.pick(golden.manifest, stores)
        store_kernel = getattr(candidate, "__qualname__", type(candidate).__name__)
        candidate, store_declined = _run_store_kernel(golden, candidate, record, dtypes, layout)
        only = list(only or _stores.outputs(golden, record))
        layout = "thd"  # the stores come back in the set's shapes; layout was for the kernel's q / k
    parts = collect(golden, dtypes, scores=scores, attention=attention)
    if stores is not None:  # the report names the store kernel, as it names a rotation kernel
        parts.callables.insert(0, store_kernel)
        parts.declined += [store_declined] if store_declined else []
    tensors, kernel, source, only, declined = _as_candidate(golden, candidate, dtypes, layout, only, parts)
    result = _core.check(golden._core, tensors, kernel, cls or "", max_ulp, atol, rtol, only, dict(name_map or {}),
                         worst, threads, json.dumps(source), diagnose, baseline or "", max_growth, declined)
    report = Report(result)
    for sink in report_sinks:
        sink(report)
    return report


def _check_kv_cache(golden: Golden, candidate: Any, kv_cache: Any, dtypes: Iterable[str] | None, cls: str | None,
                    max_ulp: float | None, atol: float | None, rtol: float | None, worst: int, threads: int,
                    diagnose: bool | None) -> Report:
    if candidate is not None:
        raise InputError("kv_cache: the cache is the candidate (its k is k_rot): give no other candidate")
    if callable(kv_cache) and not isinstance(kv_cache, Mapping):
        dts = list(dtypes) if dtypes is not None else [d for d in golden.dtypes if d != "f64"] or ["f64"]
        if len(dts) != 1:
            raise InputError(f"dtypes: a KV-cache kernel writes one cache dtype; name it (the set has {', '.join(dts)})")
        tensors = _kv_cache.run_kernel(golden, kv_cache, dts[0], None)
    elif isinstance(kv_cache, _kv_cache.KvCache):  # written in place: both caches, and its sentinel if declared
        tensors = _kv_cache.candidate_tensors(kv_cache, None)
    else:
        tensors = _kv_cache.candidate_tensors(None, kv_cache)
    report = Report(_core.check_kv_cache(golden._core, tensors, cls or "", max_ulp, atol, rtol, worst, threads, diagnose))
    for sink in report_sinks:
        sink(report)
    return report


def assert_rope(golden: Golden, candidate: Mapping[str, Any] | Kernel, **kwargs: Any) -> Report:
    """check(golden, candidate, **kwargs), raising AssertionError unless the verdict is "pass"; the
    message is the checker's report: per tensor, the classes, the worst elements (token, position,
    head, channel, pair, candidate, truth, ulps) and the error by position."""
    report = check(golden, candidate, **kwargs)
    if not report.passed:
        raise AssertionError(f"ropecheck: {report.verdict}: {report.reason}\n{report}")
    return report
