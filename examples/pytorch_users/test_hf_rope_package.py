"""The Hugging Face Llama RoPE (hf_rope_numpy.py beside this file, op for op) checked with the Python
package, in a pytest file: no files, no CLI, no JSON by hand. The same kernel in torch runs when
torch is installed (opt-in: `pip install torch`; skipped with that line otherwise).

    pytest examples/pytorch_users/test_hf_rope_package.py
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ropecheck

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_rope_numpy import hf_apply, hf_cos_sin, hf_inv_freq  # noqa: E402

# The class each activation dtype lands in (docs/guide/checking-kernels.md, "Accuracy classes").
EXPECTED = {"bf16": "bf16-table", "f16": "f16-table", "f32": "fp32-angle"}


def hf_llama_rope(q, k, positions, spec):
    """LlamaRotaryEmbedding + apply_rotary_pos_emb for q, k [tokens, heads, head_dim] in q.dtype."""
    rope = spec.to_dict()["rope"]
    if rope["layout"] != "half_split" or positions.ndim != 1 or rope["scaling"]["type"] not in ("none", "linear", "llama3"):
        raise NotImplementedError("HF Llama code: half-split, 1-D positions, default / linear / llama3 scaling")
    inv_freq, att = hf_inv_freq(rope)
    cos, sin = hf_cos_sin(inv_freq, att, positions, q.dtype)
    return hf_apply(q, cos, sin, rope["rotary_dim"]), hf_apply(k, cos, sin, rope["rotary_dim"])


@pytest.fixture(scope="module")
def llama31():
    return ropecheck.golden("llama-3.1-8b", positions="0:4096:331,log:131071:4", heads=2, dtypes=("f32", "f16", "bf16"))


def hf_for(spec):
    def rope(q, k, positions):
        return hf_llama_rope(q, k, positions, spec)
    return rope


@pytest.mark.parametrize("dt", ["bf16", "f16", "f32"])
def test_hf_lands_in_its_class(llama31, dt):
    ropecheck.assert_rope(llama31, hf_for(llama31.spec), dtypes=[dt], cls=EXPECTED[dt])
    if dt != "f32":  # and not in the stricter fp32-angle: the table is rounded to the activation dtype
        assert not ropecheck.check(llama31, hf_for(llama31.spec), dtypes=[dt], cls="fp32-angle").passed


def test_the_bf16_inv_freq_bug_is_caught(llama31):
    import ml_dtypes

    def buggy(q, k, positions):  # model.to(torch.bfloat16) casts the inv_freq buffer too
        rope = llama31.spec.to_dict()["rope"]
        inv_freq, att = hf_inv_freq(rope)
        inv_freq = inv_freq.astype(ml_dtypes.bfloat16).astype(np.float32)
        cos, sin = hf_cos_sin(inv_freq, att, positions, q.dtype)
        return hf_apply(q, cos, sin, 128), hf_apply(k, cos, sin, 128)

    r = ropecheck.check(llama31, buggy, dtypes=["f32"])
    assert r.verdict == "fail" and r.tensors["q_rot.f32"].first_violating_position == 1


def test_hf_property_suite():
    r = ropecheck.props(hf_llama_rope, "llama-3.1-8b", cases=20, max_pos=1000000, only=["relative_shift", "norm", "linear_scaling"])
    assert r.passed, str(r)


def test_the_same_in_torch(llama31):
    torch = pytest.importorskip("torch", reason="torch is opt-in: pip install torch")

    def torch_rope(q, k, positions):  # q, k: numpy; the kernel works in torch, returns torch tensors
        rope = llama31.spec.to_dict()["rope"]
        inv_freq = torch.from_numpy(hf_inv_freq(rope)[0])
        freqs = torch.from_numpy(positions).float()[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        qt, kt = torch.from_numpy(q), torch.from_numpy(k)
        cos, sin = emb.cos().to(qt.dtype)[:, None, :], emb.sin().to(qt.dtype)[:, None, :]

        def rotate_half(x):
            return torch.cat((-x[..., 64:], x[..., :64]), dim=-1)

        return qt * cos + rotate_half(qt) * sin, kt * cos + rotate_half(kt) * sin

    ropecheck.assert_rope(llama31, torch_rope, dtypes=["f32"], cls="fp32-angle")
