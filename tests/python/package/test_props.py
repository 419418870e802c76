"""props(): the property suite with a Python kernel as its target."""
from __future__ import annotations

import numpy as np
import pytest

import ropecheck
from conftest import run_cli

_resolved: dict[str, tuple] = {}


def rope64(q, k, positions, spec, inv_freq_dtype=np.float64):
    """RoPE in binary64 from the spec's exact frequencies, rounded once: any half-split / interleaved,
    partial-rotary spec (better than fp32-angle); multimodal declined."""
    if positions.ndim != 1:
        raise NotImplementedError("multimodal positions")
    key = spec.to_json()
    if key not in _resolved:
        _resolved[key] = (spec.to_dict()["rope"], spec.inverse_frequencies(), spec.attention_factor())
    r, w, att = _resolved[key]
    w = w.astype(inv_freq_dtype).astype(np.float64)
    half = r["rotary_dim"] // 2
    theta = positions.astype(np.float64)[:, None] * w[None, :]
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]

    def apply(x):
        y = x.astype(np.float64)
        if r["layout"] == "half_split":
            a, b = slice(0, half), slice(half, 2 * half)
        else:
            a, b = slice(0, 2 * half, 2), slice(1, 2 * half, 2)
        xa, xb = y[..., a].copy(), y[..., b].copy()
        y[..., a], y[..., b] = att * (xa * c - xb * s), att * (xb * c + xa * s)
        return y.astype(x.dtype)

    return apply(q), apply(k)


def bf16_inv_freq(q, k, positions, spec):
    import ml_dtypes
    return rope64(q, k, positions, spec, inv_freq_dtype=ml_dtypes.bfloat16)


# Every property that applies to a RoPE spec without multimodal positions (named ones always count).
ALL_BUT_MROPE = [n for n in ropecheck.property_names()
                 if not n.startswith(("mrope", "sinusoidal")) and n != "store_rounding"]


def test_a_correct_kernel_passes_every_property():
    r = ropecheck.props(rope64, "llama-3.1-8b", cases=15, max_pos=1000000, negative_positions=True, only=ALL_BUT_MROPE)
    assert r.verdict == "pass" and r.passed, str(r)
    assert r.outcome("relative_shift")["cases"] == 15 and r.outcome("inverse")["verdict"] == "pass"


def test_declined_cases_are_not_tested_never_passed():
    r = ropecheck.props(rope64, "qwen2-vl-7b", cases=5, max_pos=1000000, only=["mrope_streams", "norm"])
    assert r.verdict == "not-tested" and not r.passed
    assert r.outcome("mrope_streams")["verdict"] == "not-tested" and r.outcome("norm")["verdict"] == "not-tested"
    assert "NOT TESTED" in str(r)


def test_a_kernel_without_a_spec_argument_declines_derived_specs():
    w = ropecheck.Spec.from_preset("llama-3.1-8b")

    def fixed(q, k, positions):
        return rope64(q, k, positions, w)

    r = ropecheck.props(fixed, w, cases=5, max_pos=1000000, only=["norm", "layout_equivalence"])
    assert r.outcome("norm")["verdict"] == "pass"
    assert r.outcome("layout_equivalence")["verdict"] == "not-tested"
    with pytest.raises(ropecheck.InputError, match="needs spec="):
        ropecheck.props(fixed, None)


def test_the_bug_fails_as_in_the_cli_and_its_reproduce_line_reruns_it(cli):
    args = dict(cases=5, max_pos=1000000, seed=7, only=["uniqueness", "norm"])  # uniqueness shrinks fast
    r = ropecheck.props(bf16_inv_freq, "llama-3.1-8b", **args)
    p = run_cli(cli, "props", "--kernel", "builtin:bf16-inv-freq", "--dtype", "f32", "--preset", "llama-3.1-8b", "--cases", "5",
                "--max-pos", "1000000", "--seed", "7", "--only", "uniqueness,norm")
    assert p.returncode == 1 and r.verdict == "fail"
    assert r.outcome("uniqueness")["verdict"] == "fail" and r.outcome("norm")["verdict"] == "pass"
    assert "FAIL uniqueness" in p.stdout and "FAIL uniqueness" in str(r)
    line = r.outcome("uniqueness")["reproduce"]
    assert line.startswith("ropecheck.props(bf16_inv_freq, ropecheck.Spec.from_preset('llama-3.1-8b')")
    again = eval(line, {"ropecheck": ropecheck, "bf16_inv_freq": bf16_inv_freq})
    assert again.verdict == "fail"
    assert again.outcome("uniqueness")["counterexample"] == r.outcome("uniqueness")["counterexample"]


def test_an_exception_in_the_kernel_fails_the_property_with_its_message():
    def broken(q, k, positions, spec):
        raise ValueError("shapes do not broadcast")

    r = ropecheck.props(broken, "llama-3.1-8b", cases=3, only=["norm"])
    assert r.verdict == "fail"
    assert "ValueError: shapes do not broadcast" in r.outcome("norm")["counterexample"]


def test_wrong_dtype_or_option_is_reported():
    def f32_always(q, k, positions, spec):
        qr, kr = rope64(q, k, positions, spec)
        return qr.astype(np.float32), kr.astype(np.float32)

    r = ropecheck.props(f32_always, "llama-3.1-8b", dtypes=["bf16"], cls="bf16-table", cases=3, only=["norm"])
    assert r.verdict == "fail" and "float32 for bf16 inputs" in r.outcome("norm")["counterexample"]
    with pytest.raises(ropecheck.SpecError, match="cls: unknown class"):
        ropecheck.props(rope64, "llama-3.1-8b", cls="nope")
    with pytest.raises(ropecheck.SpecError):
        ropecheck.props(rope64, "llama-3.1-8b", only=["no_such_property"])
