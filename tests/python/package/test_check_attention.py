"""check(golden, scores=...) and check(golden, attention=...): a candidate's attention scores or
attention outputs as an array or from a Python callable (fn(q, k, query_positions, key_positions) ->
[G][N]; fn(q, k, v, positions[, sinks=]) -> [T][G][Dv]), judged with the score and output classes
(ERROR_MODEL.md 16.3, 16.4); bad returns are the CLI's one-line errors or failures; the report is the
CLI's."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ropecheck
from conftest import run_cli

PAIRS = "causal:0:10,pair:131060:131000,pair:4100:4090"


@pytest.fixture(scope="module")
def g():
    return ropecheck.golden("llama-3.1-8b", positions="0:4", heads=2, dtypes=("f32", "bf16"), seed=3, scores=PAIRS)


def rotate_f32(x: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Hugging Face's half-split RoPE in f32 (f32 inverse frequencies and angles) of x [N][..., D] at
    positions [N]."""
    w = ropecheck.Spec.from_preset("llama-3.1-8b").inverse_frequencies().astype(np.float32)
    emb = positions.astype(np.float32)[:, None] * w[None, :]
    shape = (len(positions),) + (1,) * (x.ndim - 2) + (len(w),)
    cos, sin = np.cos(emb).reshape(shape), np.sin(emb).reshape(shape)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h].astype(np.float32), x[..., h:].astype(np.float32)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def scores_kernel(query_offset: int = 0):
    seen = {}

    def scores(q, k, query_positions, key_positions):
        seen.update(q=q, k=k, qp=query_positions, kp=key_positions)
        n = len(query_positions)
        Q = rotate_f32(np.broadcast_to(q, (n,) + q.shape), query_positions + query_offset)  # [N][G][D]
        K = rotate_f32(np.broadcast_to(k, (n,) + k.shape), key_positions)                   # [N][D]
        return (np.einsum("ngd,nd->gn", Q, K) * np.float32(1 / np.sqrt(q.shape[-1]))).astype(np.float32)
    scores.seen = seen
    return scores


def test_a_scores_callable_gets_the_sets_inputs_and_lands_in_its_class(g):
    fn = scores_kernel()
    r = ropecheck.check(g, scores=fn, dtypes=["f32"])
    assert r.passed and r.scores["passed"] == r.scores["elements"] == 2 * g["score_positions"].shape[0]
    assert r.scores["golden"] == "scores.f32" and r.tensors == {} and r.not_tested == []
    assert r.json["candidate_source"] == {"kind": "python-callable", "name": "scores_kernel.<locals>.scores"}
    s = fn.seen
    assert s["q"].dtype == np.float32 and s["q"].shape == (2, 128) and s["k"].shape == (128,)
    np.testing.assert_array_equal(s["qp"], g["score_positions"][:, 0])
    np.testing.assert_array_equal(s["kp"], g["score_positions"][:, 1])
    assert s["qp"].dtype == np.int64
    assert "scores" in str(r) and r.scores["verdict"]["state"] == "pass"


def test_a_query_one_position_off_fails_and_is_diagnosed(g):
    r = ropecheck.check(g, scores=scores_kernel(query_offset=1), dtypes=["f32"])
    assert r.verdict == "fail" and r.scores["failed"] > 0
    assert r.scores["diagnosis"]["match"] is not None and "position" in r.scores["diagnosis"]["conclusion"]


def test_arrays_of_each_kind_pass_exact(g):
    assert ropecheck.check(g, scores=g["scores.bf16"], cls="exact").passed  # ml_dtypes bfloat16
    r = ropecheck.check(g, scores=g["scores.f32"], cls="exact")
    assert r.passed and r.scores["candidate"] == "scores"

    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.asarray(g["scores.f32"])
    assert ropecheck.check(g, scores=ArrayLike(), cls="exact").passed


def test_rotations_and_scores_in_one_check(g):
    def rope(q, k, positions):
        return rotate_f32(q, positions), rotate_f32(k, positions)
    r = ropecheck.check(g, rope, scores=scores_kernel(), dtypes=["f32"])
    assert r.passed and set(r.tensors) == {"q_rot.f32", "k_rot.f32"} and r.scores["passed"] > 0
    assert r.json["candidate_source"]["name"] == "test_rotations_and_scores_in_one_check.<locals>.rope, " \
                                                 "scores_kernel.<locals>.scores"


def test_bad_returns_are_the_clis_errors_and_failures(g):
    with pytest.raises(ropecheck.InputError, match=r"^scores.f32: candidate tensor 'scores.f32' has shape \[2, 3\]"):
        ropecheck.check(g, scores=lambda q, k, a, b: np.zeros((2, 3), np.float32), dtypes=["f32"])
    with pytest.raises(ropecheck.InputError, match="is f64 but the golden tensor is f32"):
        ropecheck.check(g, scores=lambda q, k, a, b: np.array(g["scores.f64"]), dtypes=["f32"])
    with pytest.raises(ropecheck.InputError, match="^scores=: not an array: str"):
        ropecheck.check(g, scores=lambda q, k, a, b: "scores", dtypes=["f32"])
    nan = np.array(g["scores.f32"])
    nan[1, 5] = np.nan
    r = ropecheck.check(g, scores=lambda q, k, a, b: nan, dtypes=["f32"], diagnose=False)
    assert r.verdict == "fail" and r.scores["nonfinite"] == 1 and r.scores["failed"] >= 1


def test_a_declining_callable_is_not_tested(g):
    def declines(q, k, a, b):
        raise NotImplementedError("no llama3 scaling in this kernel")
    r = ropecheck.check(g, scores=declines, dtypes=["bf16"])
    assert r.verdict == "not-tested" and not r.passed and "no llama3 scaling" in r.declined
    assert r.not_tested == ["scores.bf16"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(scores=lambda q, k, a, b: q), "one dtype per check"),
    (dict(scores=lambda q, k, a, b: q, dtypes=["f16"]), "'f16' is not an output dtype"),
    (dict(attention=np.zeros(3)), "has no attention block"),
    (dict(), "nothing to check"),
])
def test_bad_requests_raise(g, kwargs, match):
    with pytest.raises(ropecheck.InputError, match=match):
        ropecheck.check(g, **kwargs)


def test_no_scores_in_the_set_and_kernel_names_refuse():
    plain = ropecheck.golden("llama-3.1-8b", positions="0:2", dtypes=("f32",))
    with pytest.raises(ropecheck.InputError, match="has no attention scores"):
        ropecheck.check(plain, scores=np.zeros((1, 1), np.float32))
    scored = ropecheck.golden("llama-3.1-8b", positions="0:2", dtypes=("f32",), scores="pair:3:1")
    with pytest.raises(ropecheck.InputError, match="not with a kernel name"):
        ropecheck.check(scored, "builtin:hf", scores=scored["scores.f32"])


def test_the_report_is_the_clis(cli, g, tmp_path):
    """The same JSON and terminal report as `ropecheck check --candidate FILE --only scores.f32` on the
    same scores (a failing run, so the diagnosis is compared too)."""
    import safetensors.numpy as stn

    bad = scores_kernel(query_offset=1)(*(np.asarray(g[n]) for n in ("score_q", "score_k")),
                                        g["score_positions"][:, 0], g["score_positions"][:, 1])
    g.save(tmp_path / "set")
    stn.save_file({"scores": bad}, str(tmp_path / "cand.safetensors"))
    p = run_cli(cli, "check", "--golden", str(tmp_path / "set"), "--candidate", str(tmp_path / "cand.safetensors"),
                "--only", "scores.f32", "--report", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    r = ropecheck.check(ropecheck.load(tmp_path / "set"), scores=bad)
    mine, theirs = json.loads(r.to_json()), json.load(open(tmp_path / "r.json"))
    assert mine.pop("candidate_source") == {"kind": "python"}
    theirs.pop("candidate_source")
    for j in (mine, theirs):
        j["scores"].get("diagnosis", {}).pop("seconds", None)
    assert mine == theirs and str(r).splitlines()[2:] == p.stdout.splitlines()[2:]


# Attention outputs: check(golden, attention=...) on a block (golden --attention).
@pytest.fixture(scope="module")
def block():
    return ropecheck.golden("llama-3.1-8b", positions="0:2", heads=2, dtypes=("f32",), seed=3,
                            attention="causal:4090:12:8", sinks=True)


def attention_kernel(block_set):
    """RoPE in f32 (rotate_f32), then causal sliding-window attention with sinks in binary64, rounded
    to the inputs' dtype; the window and scale from the manifest's record."""
    rec = block_set.manifest["attention"]
    seen = {}

    def attention(q, k, v, positions, sinks):
        seen.update(q=q, k=k, v=v, positions=positions, sinks=sinks)
        Q, K = rotate_f32(q, positions).astype(np.float64), rotate_f32(k, positions).astype(np.float64)
        s = np.einsum("igd,jd->gij", Q, K) * rec["scale_binary64"]
        i, j = np.indices((len(positions), len(positions)))
        s[:, (j > i) | (j <= i - rec["window"])] = -np.inf
        top = np.maximum(s.max(-1, keepdims=True), sinks[:, None, None])
        p = np.exp(s - top)
        p /= p.sum(-1, keepdims=True) + np.exp(sinks[:, None, None] - top)
        return np.einsum("gij,jc->igc", p, v.astype(np.float64)).astype(q.dtype)
    attention.seen = seen
    return attention


def test_an_attention_callable_gets_the_blocks_inputs_and_lands_in_its_class(block):
    fn = attention_kernel(block)
    r = ropecheck.check(block, attention=fn)
    assert r.passed and r.attention[0]["passed"] == r.attention[0]["elements"] == 12 * 2 * 128, r
    assert r.attention[0]["golden"] == "attention_out.f32" and r.tensors == {} and r.scores is None
    s = fn.seen
    assert s["q"].shape == (12, 2, 128) and s["k"].shape == (12, 128) and s["v"].shape == (12, 128)
    assert s["q"].dtype == np.float32 and list(s["positions"]) == list(range(4090, 4102))
    np.testing.assert_array_equal(s["sinks"], block["attention_sinks"])


def test_bad_attention_returns(block):
    good = attention_kernel(block)
    with pytest.raises(ropecheck.InputError, match=r"^attention_out.f32: candidate tensor 'attention_out.f32' has shape \[12, 256\]"):
        ropecheck.check(block, attention=lambda *a, **kw: good(*a, **kw).reshape(12, 256))
    with pytest.raises(TypeError):  # a callable without sinks= on a set with sinks: its own error
        ropecheck.check(block, attention=lambda q, k, v, positions: q)
    nan = good(*(block[n] for n in ("attention_q", "attention_k", "attention_v", "attention_positions")),
               sinks=block["attention_sinks"])
    nan[3, 1, 7] = np.inf
    r = ropecheck.check(block, attention=nan)
    assert r.verdict == "fail" and r.attention[0]["nonfinite"] == 1

    def declines(q, k, v, positions, sinks):
        raise NotImplementedError("no sinks")
    r = ropecheck.check(block, attention=declines)
    assert r.verdict == "not-tested" and "no sinks" in r.declined and r.not_tested == ["attention_out.f32"]


def test_the_attention_report_is_the_clis(cli, block, tmp_path):
    """The same JSON and terminal report as `ropecheck check --candidate FILE --only attention_out.f32`
    on the same outputs (a failing run: every query 1% too long, so every logit 1% off)."""
    import safetensors.numpy as stn

    inputs = [np.asarray(block[n]) for n in ("attention_q", "attention_k", "attention_v", "attention_positions")]
    out = attention_kernel(block)(inputs[0] * np.float32(1.01), *inputs[1:], sinks=np.asarray(block["attention_sinks"]))
    block.save(tmp_path / "set")
    stn.save_file({"attention_out": out}, str(tmp_path / "cand.safetensors"))
    p = run_cli(cli, "check", "--golden", str(tmp_path / "set"), "--candidate", str(tmp_path / "cand.safetensors"),
                "--only", "attention_out.f32", "--report", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    r = ropecheck.check(ropecheck.load(tmp_path / "set"), attention=out)
    mine, theirs = json.loads(r.to_json()), json.load(open(tmp_path / "r.json"))
    assert mine.pop("candidate_source") == {"kind": "python"}
    theirs.pop("candidate_source")
    assert mine == theirs and str(r).splitlines()[2:] == p.stdout.splitlines()[2:]
