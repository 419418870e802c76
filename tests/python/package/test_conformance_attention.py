"""The attention-output adapters (conformance/onnxruntime_gqa.py, conformance/mlx_attention.py): each
`attention_fn(spec, dtype)` callable, run on fixed-seed inputs, against a plain NumPy binary64
softmax(Q K^T scale + causal mask) V computed from the same rotated Q and K the implementation
attends with. A sanity check of the wiring (heads, layout, mask, scale, positions), not a class: the
accuracy classes of attention outputs come with the attention golden blocks."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ropecheck
from ropecheck._arrays import DTYPES

U = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}  # unit roundoff of each dtype
U_ACC = 2.0 ** -24  # accumulations in f32 (ERROR_MODEL.md 16.2: every class accumulates in f32 or better)


def attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Binary64 output [T, G, Dv] and probabilities [G, T, T] of causal attention on rotated Q [T, G, D],
    K [T, D] and V [T, Dv]."""
    s = np.einsum("igd,jd->gij", Q, K) * scale
    s[:, np.triu(np.ones((len(K), len(K)), bool), 1)] = -np.inf
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("gij,jc->igc", p, V), p


def output_bound(Q, K, V, o, p, scale: float, dtype: str, eq: np.ndarray) -> np.ndarray:
    """Per-element bound [T, G, Dv] on |candidate - o| from the attention arithmetic of ERROR_MODEL.md
    16.2 (u_acc = f32, u_mid and the store = `dtype`), with rotated queries off by at most eq [T, G, D]
    per channel and keys exact: the score error of 16.3 (sigma * sum_c eq_c |K_c|, the accumulation
    gamma_D(u_acc) and 3 u_mid relative to sigma * sum_c |Q_c| |K_c|), the per-key roundings of 16.4 as
    logit errors (subtraction, exp within 2 ulp, probability held in u_mid), the crude bound B0 of
    16.4 and its common factor eta, the weighted sum gamma_N(u_acc) M_o and the final store."""
    u, D, N = U[dtype], Q.shape[2], len(K)
    gamma = lambda n: n * U_ACC / (1 - n * U_ACC)  # noqa: E731  Higham's gamma_n
    cplus = np.einsum("igd,jd->gij", np.abs(Q) + eq, np.abs(K)) * scale
    internal = np.einsum("igd,jd->gij", eq, np.abs(K)) * scale + (gamma(D) + 3 * u) * cplus
    s = np.einsum("igd,jd->gij", Q, K) * scale
    visible = np.tril(np.ones((N, N), bool))
    spread = np.where(visible, s, -np.inf).max(-1) - np.where(visible, s, np.inf).min(-1)  # W, per row
    e_s = np.where(visible, internal, 0).max(-1)
    eps = internal + ((spread + 2 * e_s) * U_ACC + 4 * U_ACC + u)[..., None]
    big_e = np.where(visible, eps, 0).max(-1, keepdims=True)
    factor = np.where(visible, np.expm1(eps + big_e), 0)  # e^(eps_k + E) - 1, visible keys only
    dev = np.abs(V[None, None, :, :] - o.transpose(1, 0, 2)[:, :, None, :])  # [G, T, N, Dv]: |V_k - o|
    b0 = np.einsum("gij,gijc->igc", p * factor, dev)
    eta = gamma(N + 1) + 2 * U_ACC + u
    m_o = np.einsum("gij,jc->igc", p, np.abs(V))
    pre = b0 + eta * (np.abs(o) + b0) + gamma(N) * (1 + eta) * np.exp(2 * big_e.max()) * m_o
    return pre + u * (np.abs(o) + pre) + 1e-30


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, layout: str) -> np.ndarray:
    """x [T, H, D] rotated in binary64 by tables [T, pairs] (the attention factor folded in), pairs as
    the layout says; channels past the rotary ones pass through."""
    pairs = cos.shape[1]
    a = np.arange(0, 2 * pairs, 2) if layout == "interleaved" else np.arange(pairs)
    b = a + 1 if layout == "interleaved" else a + pairs
    c, s = cos[:, None, :], sin[:, None, :]
    y = x.copy()
    y[..., a], y[..., b] = x[..., a] * c - x[..., b] * s, x[..., b] * c + x[..., a] * s
    return y


# Preset, first position, tokens, group, value_dim: half-split with llama3 scaling at 4090 (past
# 4096 inside the block), interleaved partial rotary (gpt-j: 64 of 256) with a value width other than
# head_dim, YaRN's attention factor at 70000.
CASES = [("llama-3.1-8b", 4090, 24, 4, 128), ("gpt-j-6b", 0, 20, 2, 96), ("qwen2.5-7b-yarn", 70000, 16, 2, 128)]


def inputs(preset: str, start: int, tokens: int, group: int, value_dim: int, dtype: str):
    spec = ropecheck.Spec.from_preset(preset)
    d = spec.to_dict()["rope"]["head_dim"]
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(DTYPES[dtype])
               for s in ((tokens, group, d), (tokens, d), (tokens, value_dim)))
    return spec, q, k, v, np.arange(start, start + tokens)


def judge(out: np.ndarray, Q, K, V, dtype: str, eq: np.ndarray) -> float:
    """The largest |out - reference| / bound; asserts the bound has teeth (a zero output fails it)."""
    scale = 1.0 / math.sqrt(Q.shape[2])
    o, p = attention(Q, K, V, scale)
    bound = output_bound(Q, K, V, o, p, scale, dtype, eq)
    assert out.shape == o.shape
    assert (np.abs(o) > bound).mean() > 0.5  # a zero output fails most elements
    return float((np.abs(out.astype(np.float64) - o) / bound).max())


def ort_rotated(spec, q, k, v, pos, dtype: str):
    """ORT's own rotated keys (present_key) and queries rotated in binary64 with the same dtype-rounded
    caches, rounded to the dtype, with `eq`: ORT rotates in f32, so those queries differ from its own
    by the two roundings to the dtype (u |Q_c| each) and f32's three roundings of the rotation,
    relative to the pair's norm times the largest table entry (the attention factor included)."""
    from ropecheck.conformance import onnxruntime_gqa as gqa
    from ropecheck.conformance.onnxruntime import caches

    cos, sin = caches(ropecheck.golden(spec, pos, heads=1, dtypes=("f32",)), dtype)
    layout = spec.to_dict()["rope"]["layout"]
    _, present_key = gqa.run_gqa(dtype, q, k, v, cos, sin, layout == "interleaved")
    c64, s64 = cos.astype(np.float64), sin.astype(np.float64)
    Q = rotate(q.astype(np.float64), c64, s64, layout).astype(DTYPES[dtype]).astype(np.float64)
    table = np.abs(c64).max() + np.abs(s64).max()
    eq = (2 * U[dtype] + 3 * U_ACC) * np.sqrt(_pair_norm2(q, layout, cos.shape[1])) * table
    return Q, present_key.astype(np.float64), eq


def _pair_norm2(q: np.ndarray, layout: str, pairs: int) -> np.ndarray:
    """Per channel, the squared norm of its rotary pair (0 on pass-through channels: not rotated)."""
    x = q.astype(np.float64)
    a = np.arange(0, 2 * pairs, 2) if layout == "interleaved" else np.arange(pairs)
    b = a + 1 if layout == "interleaved" else a + pairs
    out = np.zeros_like(x)
    out[..., a] = out[..., b] = x[..., a] ** 2 + x[..., b] ** 2
    return out


def mlx_rotated(spec, q, k, v, pos, dtype: str):
    """The very Q and K mx.fast.rope gives (the call mlx_attention makes): only the attention
    arithmetic differs, so `eq` is zero."""
    import mlx.core as mx

    from ropecheck.conformance import mlx as mlx_adapter

    rope = spec.to_dict()["rope"]
    n = int(pos.max()) + 1
    scaled = rope.get("scaling", {"type": "none"})["type"] not in ("none", "linear")
    freqs = (1.0 / spec.inverse_frequencies(n)).astype(np.float32) if scaled else None
    with mx.stream(mx.cpu):
        Q, K = (mlx_adapter._to_numpy(mlx_adapter.fast_rope(mlx_adapter._to_mx(x, dtype), rope, pos,
                                                            spec.attention_factor(n), freqs), dtype)
                for x in (q, k[:, None, :]))
    return Q.astype(np.float64), K[:, 0].astype(np.float64), np.zeros(Q.shape)


LIBS = {"onnxruntime": ("onnxruntime", ("f32", "f16")), "mlx": ("mlx.core", ("f32", "f16", "bf16"))}


def library(lib: str):
    """attention_fn and the rotated-Q / K reference of `lib` (skipped where its package is missing)."""
    pytest.importorskip(LIBS[lib][0])
    from ropecheck.conformance import mlx_attention
    from ropecheck.conformance import onnxruntime_gqa as gqa

    return (gqa.attention_fn, ort_rotated) if lib == "onnxruntime" else (mlx_attention.attention_fn, mlx_rotated)


@pytest.mark.parametrize("preset,start,tokens,group,value_dim", CASES)
@pytest.mark.parametrize("lib,dtype", [(lib, d) for lib, (_, dts) in LIBS.items() for d in dts])
def test_attention_fn_against_the_reference(lib, dtype, preset, start, tokens, group, value_dim):
    """ORT's GroupQueryAttention and MLX's SDPA output against softmax(QK^T scale + mask) V in binary64
    on the Q and K they attend with."""
    attention_fn, rotated = library(lib)
    spec, q, k, v, pos = inputs(preset, start, tokens, group, value_dim, dtype)
    out = attention_fn(spec, dtype)(q, k, v, pos)
    Q, K, eq = rotated(spec, q, k, v, pos, dtype)
    ratio = judge(out, Q, K, v.astype(np.float64), dtype, eq)
    assert ratio <= 1.0, ratio


@pytest.mark.parametrize("lib", LIBS)
def test_attention_fn_scale_is_passed_and_a_wrong_one_fails_the_sanity_bound(lib):
    """The check has teeth and the scale argument reaches the kernel: a softmax scale 1% too large
    (f32, llama-3.1-8b) fails the bound; the right one given explicitly passes."""
    attention_fn, rotated = library(lib)
    spec, q, k, v, pos = inputs("llama-3.1-8b", 0, 16, 2, 128, "f32")
    Q, K, eq = rotated(spec, q, k, v, pos, "f32")
    for factor, passes in ((1.0, True), (1.01, False)):
        out = attention_fn(spec, "f32", scale=factor / math.sqrt(128))(q, k, v, pos)
        assert (judge(out, Q, K, v.astype(np.float64), "f32", eq) <= 1.0) == passes, factor


# The `onnxruntime-gqa` matrix cells: present_key judged as rotated keys (k_rot only: the operator never
# returns its rotated queries), measured with onnx 1.23.2 / onnxruntime 1.31.1 on positions
# 0:64,log:131071:4 (one head; mrope with the image block the command adds): strictest class, worst
# error / bound of the expected class (to 2 digits), first violating position of fp64-angle.
GQA_MEASURED = {
    ("llama-3.1-8b", "f32"): ("f32-reduced", 0.19, 1),   # half-split, llama3 scaling
    ("llama-3.1-8b", "f16"): ("f16-table", 0.32, 4),
    ("gpt-j-6b", "f32"): ("f32-reduced", 0.19, 1),       # rotary_interleaved = 1, partial rotary 64 of 256
    ("gpt-j-6b", "f16"): ("f16-table", 0.32, 3),
    ("qwen2-vl-7b", "f16"): ("f16-table", 0.29, 2),      # mrope through the caches
    ("phi-3.5-mini", "f16"): ("f16-table", 0.41, 2),     # LongRoPE's attention factor in the caches
}


@pytest.fixture(scope="module")
def golden_sets():
    from ropecheck.conformance._run import MROPE_GRID

    cache: dict[str, ropecheck.Golden] = {}

    def get(preset: str) -> ropecheck.Golden:
        if preset not in cache:
            mrope = "mrope" in ropecheck.Spec.from_preset(preset).to_dict()["rope"]
            positions = "0:64,log:131071:4" + ("," + MROPE_GRID if mrope else "")  # as the command does
            cache[preset] = ropecheck.golden(preset, positions=positions, heads=1, dtypes=("f32", "f16"))
        return cache[preset]
    return get


def gqa_adapter():
    from ropecheck import conformance

    adapter = conformance.adapters(["onnxruntime-gqa"])[0]
    if adapter.missing():
        pytest.skip(f"onnxruntime-gqa not installed: {adapter.install}")
    return adapter


@pytest.mark.parametrize("preset,dtype", sorted(GQA_MEASURED))
def test_onnxruntime_gqa_present_key_measured_classes(preset, dtype, golden_sets):
    from ropecheck import conformance

    adapter = gqa_adapter()
    g = golden_sets(preset)
    q_rot, k_rot = adapter.run(g, dtype)
    assert q_rot is None  # only the keys are judged
    c = conformance.judge(g, dtype, q_rot, k_rot, adapter.expected[dtype])
    strictest, score, first_fp64 = GQA_MEASURED[(preset, dtype)]
    assert (c["state"], c["strictest"]) == ("pass", strictest), c
    assert c["worst_score"] == pytest.approx(score, abs=0.01)
    assert c["classes"]["fp64-angle"]["first_violating_position"] == first_fp64
    # Measured: the fused rotation is the RotaryEmbedding operators' own, bit for bit.
    _, k_contrib = conformance.adapters(["onnxruntime-contrib"])[0].run(g, dtype)
    assert np.array_equal(k_rot, k_contrib)


def test_onnxruntime_gqa_declines_bf16_and_narrow_rotary(golden_sets):
    from ropecheck import conformance

    adapter = gqa_adapter()
    with pytest.raises(conformance.Declined, match="no CPU GroupQueryAttention kernel"):
        adapter.run(golden_sets("llama-3.1-8b"), "bf16")
    assert "multiple of 16" in adapter.supports(ropecheck.Spec.from_preset("gpt-neox-20b").to_dict())  # 24 rotary
    assert adapter.supports(ropecheck.Spec.from_preset("phi-2").to_dict()) is None  # 32 of 80



# The attention cells (`onnxruntime-gqa-attention`, `mlx-attention`): each library's output of the
# block ATTENTION_BLOCK (causal:4032:64, 2 heads as one group, seed 0) judged with the output classes
# through check(golden, attention=fn), measured with onnx 1.23.2 / onnxruntime 1.31.1 and mlx 0.32.4:
# state, strictest class held, worst error / bound of the expected class (to 2 digits), outputs
# saturated under the expected class. Both pairings (llama half-split, gpt-j interleaved partial).
ATTENTION_MEASURED = {
    ("onnxruntime-gqa-attention", "llama-3.1-8b", "f32"): ("pass", "f32-reduced", 0.055, 0),
    ("onnxruntime-gqa-attention", "llama-3.1-8b", "f16"): ("pass", "fp64-angle", 0.073, 0),
    ("onnxruntime-gqa-attention", "gpt-j-6b", "f32"): ("pass", "f32-reduced", 0.049, 0),
    ("onnxruntime-gqa-attention", "gpt-j-6b", "f16"): ("pass", "fp64-angle", 0.22, 0),
    ("mlx-attention", "llama-3.1-8b", "f32"): ("pass", "f32-reduced", 0.0033, 0),
    ("mlx-attention", "llama-3.1-8b", "f16"): ("pass", "fp64-angle", 0.073, 0),
    # bf16-table's output bound reaches the output's magnitude almost everywhere (ERROR_MODEL.md 16.6):
    # not tested, never passed, though every output holds the stricter classes.
    ("mlx-attention", "llama-3.1-8b", "bf16"): ("not-tested", "fp64-angle", 0.12, 15983),
    ("mlx-attention", "gpt-j-6b", "f32"): ("pass", "f32-reduced", 0.0045, 0),
    ("mlx-attention", "gpt-j-6b", "f16"): ("pass", "fp64-angle", 0.26, 0),
}


@pytest.fixture(scope="module")
def attention_matrix():
    from ropecheck import conformance

    chosen = conformance.adapters(["onnxruntime-gqa-attention", "mlx-attention"])
    for a in chosen:
        if a.missing():
            pytest.skip(f"{a.name} not installed: {a.install}")
    return conformance.run(chosen, ["llama-3.1-8b", "gpt-j-6b"])


def test_attention_cells_measured_classes(attention_matrix):
    m = attention_matrix
    assert m.attention_block == "causal:4032:64" and m.to_dict()["attention_block"] == m.attention_block
    cells = {(c.impl, c.preset, c.dtype): c for c in m.cells}
    for key, (state, strictest, score, saturated) in ATTENTION_MEASURED.items():
        c = cells[key]
        assert (c.state, c.strictest) == (state, strictest), (key, c)
        assert c.worst_score == pytest.approx(score, rel=0.05), (key, c.worst_score)
        assert c.classes[c.expected]["saturated"] == saturated, key
        assert (f"{saturated} of" in c.reason) == bool(saturated)
    for preset in ("llama-3.1-8b", "gpt-j-6b"):  # no bf16 GroupQueryAttention on the CPU
        assert cells[("onnxruntime-gqa-attention", preset, "bf16")].is_declined()


def test_an_attention_cell_has_teeth():
    """judge_attention (what an attention cell runs): MLX's output passes fp32-angle, and the same
    pipeline with a softmax scale 1% off fails it."""
    pytest.importorskip("mlx.core")
    from ropecheck import conformance
    from ropecheck.conformance import mlx_attention

    g = ropecheck.golden("llama-3.1-8b", positions="0:4", heads=2, dtypes=("f32",), attention="causal:100:24")
    scale = g.manifest["attention"]["scale_binary64"]
    good = mlx_attention.attention_fn(g.spec, "f32", seq_len=g.manifest["seq_len"], scale=scale)
    assert conformance.judge_attention(g, "f32", good, "fp32-angle")["state"] == "pass"

    def scaled_wrong(q, k, v, positions):  # a softmax scale 1% off
        return mlx_attention.attention_fn(g.spec, "f32", seq_len=g.manifest["seq_len"], scale=scale * 1.01)(q, k, v, positions)
    assert conformance.judge_attention(g, "f32", scaled_wrong, "fp32-angle")["state"] == "fail"
