"""Hugging Face's Llama rotation (LlamaRotaryEmbedding + apply_rotary_pos_emb) in float32, op for op in
numpy: the store adapters' rotation where transformers is not installed. The same recipe as
examples/pytorch_users/hf_rope_numpy.py (test_conformance_stores.py holds the two equal bit for bit),
for the scalings it covers (none, linear, llama3) and float32 activations, the dtype a quantized store
is written from. numpy 2 keeps float32 when a Python scalar meets a float32 array (NEP 50), as torch."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

SCALINGS = ("none", "linear", "llama3")  # what modeling_rope_utils computes that this file follows


def _rdiv(scalar: float, t: np.ndarray) -> np.ndarray:
    """torch's `scalar / tensor` is `tensor.reciprocal() * scalar` (torch/_tensor.py __rdiv__)."""
    return (np.float32(1) / t) * np.float32(scalar)


def inv_freq(rope: dict[str, Any]) -> np.ndarray:
    """float32 inv_freq as modeling_rope_utils computes it (_compute_default_rope_parameters, linear,
    _compute_llama3_parameters)."""
    dim = rope.get("rotary_dim") or rope["head_dim"]
    exponent = np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim)
    w = _rdiv(1.0, np.power(np.float32(rope["base"]), exponent))
    scaling = rope.get("scaling", {"type": "none"})
    if scaling["type"] == "linear":
        return w / np.float32(scaling["factor"])
    if scaling["type"] != "llama3":
        return w
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = _rdiv(2 * math.pi, w)
    w_llama = np.where(wavelen > np.float32(old / low), w / np.float32(factor), w)
    smooth = (_rdiv(old, wavelen) - np.float32(low)) / np.float32(high - low)
    smoothed = (np.float32(1) - smooth) * w_llama / np.float32(factor) + smooth * w_llama
    medium = ~(wavelen < np.float32(old / high)) & ~(wavelen > np.float32(old / low))
    return np.where(medium, smoothed, w_llama).astype(np.float32)


def rotate(rope: dict[str, Any], positions: np.ndarray, x: np.ndarray) -> np.ndarray:
    """x [tokens, heads, head_dim] (float32) rotated at positions [tokens]: float32 angle (one product),
    cos / sin in float32, q * cos + rotate_half(q) * sin, the pass-through channels kept."""
    rotary = rope.get("rotary_dim") or rope["head_dim"]
    freqs = np.asarray(positions).reshape(-1).astype(np.float32)[:, None] * inv_freq(rope)[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
    x = np.asarray(x, dtype=np.float32)
    x_rot, x_pass = x[..., :rotary], x[..., rotary:]
    half = rotary // 2
    rotated_half = np.concatenate([-x_rot[..., half:], x_rot[..., :half]], axis=-1)
    return np.concatenate([x_rot * cos + rotated_half * sin, x_pass], axis=-1)
