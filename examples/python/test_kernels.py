"""A NumPy RoPE kernel and a JAX one, each checked against golden tensors and property-tested with the
Python package (docs/guide/python.md). JAX (`pip install "jax[cpu]"`) is pinned in
tests/python/requirements.txt, so both run in CI; the JAX test is skipped, with that line, where JAX is absent.

    pytest examples/python/test_kernels.py
"""
from __future__ import annotations

import numpy as np
import pytest

import ropecheck

PROPERTIES = ["relative_shift", "attention_shift", "norm", "composition", "layout_equivalence", "partial_passthrough",
              "linear_scaling", "yarn_frequencies", "attention_factor"]


def make_rope(xp, jit=lambda f: f):
    """The fp32 recipe for any half-split / interleaved, partial-rotary spec, in the array module xp
    (numpy or jax.numpy): f32 inverse frequencies (nearest the spec's exact ones), f32 angle, f32
    cos / sin and rotation, one rounding to the storage dtype. jit wraps the two array functions
    (jax.jit for JAX: the kernel as JAX code is written and run, one compiled computation per shape
    instead of one per operation and shape)."""
    cache: dict[str, tuple] = {}

    @jit
    def cos_sin(positions, w, att):
        theta = positions[:, None] * w[None, :]
        return (xp.cos(theta) * att)[:, None, :], (xp.sin(theta) * att)[:, None, :]

    @jit
    def rotate(x, c, s, a, b, rest, order):
        y = x.astype(xp.float32)
        xa, xb = y[..., a], y[..., b]
        out = xp.concatenate([xa * c - xb * s, xb * c + xa * s, y[..., rest]], axis=-1)[..., order]
        return out.astype(x.dtype)

    def rope(q, k, positions, spec):
        if positions.ndim != 1:
            raise NotImplementedError("multimodal positions")
        key = spec.to_json()
        if key not in cache:
            r = spec.to_dict()["rope"]
            half = r["rotary_dim"] // 2
            if r["layout"] == "half_split":
                a, b = np.arange(half), np.arange(half, 2 * half)
            else:
                a, b = np.arange(0, 2 * half, 2), np.arange(1, 2 * half, 2)
            rest = np.arange(2 * half, r["head_dim"])
            order = np.argsort(np.concatenate([a, b, rest]))
            cache[key] = (spec.inverse_frequencies().astype(np.float32), np.float32(spec.attention_factor()),
                          a, b, rest, order)
        w, att, a, b, rest, order = cache[key]
        c, s = cos_sin(positions.astype(np.float32), w, att)
        return rotate(q, c, s, a, b, rest, order), rotate(k, c, s, a, b, rest, order)

    return rope


@pytest.fixture(scope="module")
def golden():
    return ropecheck.golden("qwen2.5-7b-yarn", positions="0:64,log:131071:4", heads=2, dtypes=("f32", "bf16"))


def test_numpy_kernel(golden):
    rope = make_rope(np)
    report = ropecheck.check(golden, lambda q, k, p: rope(q, k, p, golden.spec))   # f32 and bf16
    assert report.passed, str(report)
    assert ropecheck.props(rope, "gpt-j-6b", cases=15, max_pos=1000000, only=PROPERTIES).passed


def test_jax_kernel(golden):
    jax = pytest.importorskip("jax", reason='JAX is not installed: pip install "jax[cpu]==0.10.2"')
    rope = make_rope(jax.numpy, jax.jit)
    report = ropecheck.check(golden, lambda q, k, p: rope(q, k, p, golden.spec), dtypes=["f32"])
    assert report.passed, str(report)
    assert ropecheck.props(rope, "llama-3.1-8b", cases=10, max_pos=1000000, only=PROPERTIES).passed
