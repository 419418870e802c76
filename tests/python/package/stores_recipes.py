"""Independent recipes for the store / KV-cache / norm / MLA tests, written from the engines' documented
rules (not from ropecheck's C++): a binary32 RoPE, vLLM's dynamic per-token FP8 quantization, ggml's
q8_0 blocks, FlashInfer's paged append; and a safetensors writer for the same tensors, so the CLI judges
the very bytes Python's check() judged."""
from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np

import ropecheck

SAFETENSORS = {np.dtype(np.float32): "F32", np.dtype(ml_dtypes.bfloat16): "BF16", np.dtype(np.uint8): "U8",
               np.dtype(np.uint32): "U32", np.dtype(np.int32): "I32", np.dtype(np.int64): "I64",
               np.dtype(ml_dtypes.float8_e4m3fn): "F8_E4M3", np.dtype(ml_dtypes.float8_e5m2): "F8_E5M2"}


def write_safetensors(path, tensors: dict) -> None:
    header, data = {}, b""
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": SAFETENSORS[a.dtype], "shape": list(a.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def rope_f32(preset: str):
    """Hugging Face's half-split RoPE in binary32 (inverse frequencies, angle, cos / sin in f32)."""
    w = ropecheck.Spec.from_preset(preset).inverse_frequencies().astype(np.float32)

    def rope(x, positions):
        emb = positions.astype(np.float32)[:, None] * w[None, :]
        emb = np.concatenate([emb, emb], axis=-1)
        cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
        h = x.shape[-1] // 2
        rot = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
        return (x * cos + rot * sin).astype(np.float32)

    return rope


def fp8_per_token(x: np.ndarray, per_tensor_amax: bool = False):
    """vLLM QuantFP8 (dynamic, per token): scale = max(amax / 448, 1 / (448 * 512)) in f32, codes the
    clamped x / scale cast to float8_e4m3fn. per_tensor_amax: the mistake of one amax for every token."""
    amax = np.abs(x).max(axis=(1, 2))
    if per_tensor_amax:
        amax = np.full_like(amax, np.abs(x).max())
    scale = np.maximum(amax / np.float32(448), np.float32(1 / (448 * 512))).astype(np.float32)
    codes = np.clip(x / scale[:, None, None], -448, 448).astype(ml_dtypes.float8_e4m3fn)
    return codes, scale


def q8_0(x: np.ndarray, truncate: bool = False) -> np.ndarray:
    """ggml quantize_row_q8_0_ref: blocks of 32, d = amax / 127, codes roundf(x * (1 / d)) (ties away
    from zero), stored as d (f16, little-endian) then 32 int8. truncate: the mistake of casting the
    product to int8 (toward zero) instead of rounding it."""
    b = x.reshape(*x.shape[:-1], -1, 32)
    d = (np.abs(b).max(axis=-1) / np.float32(127)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (b * inv[..., None]).astype(np.float32).astype(np.float64)
    codes = np.trunc(v) if truncate else np.sign(v) * np.floor(np.abs(v) + 0.5)
    head = d.astype(np.float16).view(np.uint8).reshape(*d.shape, 2)
    return np.concatenate([head, codes.astype(np.int8).view(np.uint8)], axis=-1)


def paged_append(cache, k_rot, v, shift_token: int | None = None) -> None:
    """FlashInfer append_paged_kv_cache (NHD): token t of request b = batch_indices[t] at position p goes
    to page kv_indices[kv_indptr[b] + p // page_size], entry p % page_size. shift_token: the mistake of
    writing that token one entry further."""
    for t, (b, p) in enumerate(zip(cache.batch_indices, cache.positions)):
        page = cache.kv_indices[cache.kv_indptr[b] + p // cache.page_size]
        entry = p % cache.page_size + (1 if t == shift_token else 0)
        cache.k_cache[page, entry] = k_rot[t]
        cache.v_cache[page, entry] = v[t]
