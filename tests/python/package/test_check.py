"""check(): tensors or a kernel callable against a golden set; the report object."""
from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest

import ropecheck
from conftest import run_cli

POSITIONS = "0:64,log:131071:2"


@pytest.fixture(scope="module")
def g():
    return ropecheck.golden("llama-3.1-8b", positions=POSITIONS, heads=2, dtypes=("f32", "bf16"), seed=1)


def hf_kernel(dtype_table: bool):
    """Hugging Face's Llama RoPE in NumPy: f32 inverse frequencies and angle, cos / sin cast to the
    activation dtype (dtype_table) or kept in f32; llama3 scaling is done exactly (from the spec) to
    keep the kernel short."""
    w = ropecheck.Spec.from_preset("llama-3.1-8b").inverse_frequencies().astype(np.float32)

    def rope(q, k, positions):
        dt = q.dtype
        emb = positions.astype(np.float32)[:, None] * w[None, :]
        emb = np.concatenate([emb, emb], axis=-1)
        cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
        if dtype_table:
            cos, sin = cos.astype(dt), sin.astype(dt)

        def apply(x):
            h = x.shape[-1] // 2
            rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
            return ((x * cos).astype(dt) + (rot * sin).astype(dt)).astype(dt)

        return apply(q), apply(k)

    return rope


def test_the_golden_outputs_pass_exact(g):
    outputs = {n: g[n] for n in g.outputs if not n.endswith(".f64")}
    r = ropecheck.check(g, outputs, cls="exact")
    assert r.passed and r.verdict == "pass" and bool(r)
    assert set(r.tensors) == set(outputs) and all(t.passed for t in r.tensors.values())


def test_one_wrong_element_fails_and_is_named(g):
    outputs = {n: np.array(g[n]) for n in g.outputs if not n.endswith(".f64")}
    q = outputs["q_rot.f32"]
    q[70, 1, 3] = np.nextafter(np.nextafter(q[70, 1, 3], np.float32(10)), np.float32(10))
    r = ropecheck.check(g, outputs, cls="exact")
    assert not r.passed and r.verdict == "fail"
    assert r.tensors["q_rot.f32"].verdict == "fail" and r.tensors["k_rot.f32"].passed
    w = r.worst(1)[0]
    assert (w["tensor"], w["token"], w["head"], w["channel"]) == ("q_rot.f32", 70, 1, 3)
    assert "FAIL" in str(r) and "q_rot.f32" in str(r)


def test_missing_outputs_are_not_tested_never_passed(g):
    r = ropecheck.check(g, {"q_rot.bf16": g["q_rot.bf16"]})
    assert r.verdict == "not-tested" and not r.passed and not r
    assert "k_rot.bf16" in r.not_tested
    narrowed = ropecheck.check(g, {"q_rot.bf16": g["q_rot.bf16"]}, only=["q_rot.bf16"])
    assert narrowed.verdict == "pass"


def test_kernel_callable_lands_in_its_class(g):
    assert ropecheck.check(g, hf_kernel(True), cls="bf16-table", dtypes=["bf16"]).passed
    assert ropecheck.check(g, hf_kernel(False), dtypes=["f32"]).passed  # fp32-angle, the default
    r = ropecheck.check(g, hf_kernel(True), cls="fp32-angle", dtypes=["bf16"])
    assert r.verdict == "fail" and r.tensors["q_rot.bf16"].violations > 0
    assert r.json["candidate_source"] == {"kind": "python-callable", "name": "hf_kernel.<locals>.rope"}


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_layouts_give_the_same_report(g, layout):
    seen = []

    def kernel(q, k, positions):
        seen.append(q.shape)
        to = (lambda a: a[0].transpose(1, 0, 2)) if layout == "bhsd" else (lambda a: a[0])
        back = (lambda a: a.transpose(1, 0, 2)[None]) if layout == "bhsd" else (lambda a: a[None])
        qr, kr = hf_kernel(True)(to(q), to(k), positions)
        return back(qr), back(kr)

    thd = ropecheck.check(g, hf_kernel(True), cls="bf16-table", dtypes=["bf16"])
    other = ropecheck.check(g, kernel, cls="bf16-table", dtypes=["bf16"], layout=layout)
    assert seen[0] == ((1, 2, g.tokens, 128) if layout == "bhsd" else (1, g.tokens, 2, 128))
    assert [t.json["error_stats"] for t in other.tensors.values()] == [t.json["error_stats"] for t in thd.tensors.values()]


def test_a_failing_check_is_diagnosed_as_the_cli_does(g):
    def off_by_one(q, k, positions):
        return hf_kernel(False)(q, k, positions + 1)

    r = ropecheck.check(g, off_by_one, dtypes=["f32"])
    assert r.verdict == "fail" and r.diagnosis is not None
    assert r.diagnosis["match"] == "position-plus-1" and r.diagnosis["ranked"][0]["id"] == "position-plus-1"
    assert "diagnosis:" in str(r) and "position-plus-1" in str(r)
    assert ropecheck.check(g, off_by_one, dtypes=["f32"], diagnose=False).diagnosis is None
    good = ropecheck.check(g, hf_kernel(False), dtypes=["f32"])
    assert good.passed and good.diagnosis is None  # a passing check is diagnosed only when asked
    assert ropecheck.check(g, hf_kernel(False), dtypes=["f32"], diagnose=True).diagnosis["match"] is None


def test_report_json_and_text_are_the_cli_report(cli, g, tmp_path):
    outputs = {n: g[n] for n in g.outputs if n.endswith(".bf16")}
    outputs["q_rot.bf16"] = (g["q_rot.f64"] * 1.001).astype(ml_dtypes.bfloat16)
    import safetensors.numpy as stn
    g.save(tmp_path / "set")
    stn.save_file({n: np.asarray(a) for n, a in outputs.items()}, str(tmp_path / "cand.safetensors"))
    p = run_cli(cli, "check", "--golden", str(tmp_path / "set"), "--candidate", str(tmp_path / "cand.safetensors"),
                "--only", ",".join(outputs), "--report", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    r = ropecheck.check(ropecheck.load(tmp_path / "set"), outputs, only=list(outputs))
    mine, theirs = json.loads(r.to_json()), json.load(open(tmp_path / "r.json"))
    assert mine.pop("candidate_source") == {"kind": "python"}
    theirs.pop("candidate_source")
    assert mine == theirs
    assert str(r) == p.stdout
    html = r._repr_html_()
    assert html.count("<tr>") == 1 + len(outputs) and ">fail<" in html


@pytest.mark.parametrize("kwargs, match", [
    (dict(cls="fp33"), "cls: unknown class 'fp33'"),
    (dict(cls="exact", max_ulp=2), "one criterion"),
    (dict(atol=1e-3), "atol and rtol"),
    (dict(layout="sbhd"), "layout"),
])
def test_bad_options_raise(g, kwargs, match):
    with pytest.raises(ropecheck.InputError, match=match):
        ropecheck.check(g, {"q_rot": np.zeros((1, 1, 1, 1), np.float32)}, **kwargs)


def test_bad_candidates_raise(g):
    with pytest.raises(ropecheck.InputError, match="shape"):
        ropecheck.check(g, {"q_rot.f32": np.zeros((3, 2, 128), np.float32)})
    with pytest.raises(ropecheck.InputError, match="unsupported dtype"):
        ropecheck.check(g, {"q_rot.f32": np.zeros((3, 2, 128), np.int8)})
    with pytest.raises(ropecheck.InputError, match=r"\(q_rot, k_rot\)"):
        ropecheck.check(g, lambda q, k, p: q)
    with pytest.raises(ZeroDivisionError):  # the kernel's own exception passes through
        ropecheck.check(g, lambda q, k, p: (1 / 0, k))


def test_torch_tensors():
    torch = pytest.importorskip("torch", reason="torch not installed: pip install torch (opt-in, large)")
    g = ropecheck.golden("llama-3.1-8b", positions="0:32", heads=2, dtypes=("bf16",))
    r = ropecheck.check(g, {n: torch.from_numpy(np.asarray(g[n].view(np.int16))).view(torch.bfloat16)
                            for n in g.outputs if n.endswith("bf16")}, cls="exact")
    assert r.passed


def test_dlpack_and_array_protocol_objects(g):
    class ArrayLike:
        def __init__(self, a):
            self.a = a

        def __array__(self, dtype=None, copy=None):
            return np.asarray(self.a)

    outputs = {n: ArrayLike(g[n]) for n in g.outputs if n.endswith(".f32")}
    assert ropecheck.check(g, outputs, cls="exact", only=list(outputs)).passed
