"""MLX attention on the CPU: mx.fast.rope on queries and keys (exactly as the `mlx-fast-rope` adapter
calls it, mlx.py's fast_rope), then mx.fast.scaled_dot_product_attention with mask="causal", G query
heads sharing one key / value head (MLX's SDPA takes grouped heads as they are).

The rotated keys this pipeline keeps are mx.fast.rope's output on k with the same arguments, layout
and per-token offsets as the `mlx-fast-rope` cells, so they are judged there (no separate cell); this
module gives the attention output, [tokens][G][value_dim], for an attention golden block's check."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .._spec import Spec
from ._adapter import Declined, rope_section
from .mlx import MLX_INSTALL, MlxFastRope, _to_mx, _to_numpy, fast_rope


def attention_fn(spec: Spec | str, dtype: str, *, seq_len: int | None = None,
                 scale: float | None = None) -> Callable[..., np.ndarray]:
    """fn(q [T][G][D], k [T][D], v [T][Dv], positions [T]) -> MLX's attention output [T][G][Dv] in
    `dtype` (f32, f16, bf16): causal by token index, scale 1/sqrt(D) unless given. The frequencies as
    `mlx-fast-rope` gives them: base (or scale for linear), else the periods 1/w of the exact inverse
    frequencies at seq_len (default max position + 1, as a golden set takes it), rounded once to f32;
    the attention factor on the inputs, as mlx_lm does."""
    if isinstance(spec, str):
        spec = Spec.from_preset(spec)
    rope = rope_section(spec.to_dict())
    scaled = rope.get("scaling", {"type": "none"})["type"] not in ("none", "linear")

    def fn(q, k, v, positions) -> np.ndarray:
        import mlx.core as mx

        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        n = seq_len if seq_len is not None else int(positions.max()) + 1
        freqs = (1.0 / spec.inverse_frequencies(n)).astype(np.float32) if scaled else None
        att = spec.attention_factor(n)
        q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
        with mx.stream(mx.cpu):
            qr = fast_rope(_to_mx(q, dtype), rope, positions, att, freqs)            # [T, G, D]
            kr = fast_rope(_to_mx(k[:, None, :], dtype), rope, positions, att, freqs)  # [T, 1, D]
            vs = _to_mx(v[:, None, :], dtype)
            bhtd = [a.transpose(1, 0, 2)[None] for a in (qr, kr, vs)]  # [1, heads, T, dim], SDPA's layout
            out = mx.fast.scaled_dot_product_attention(
                *bhtd, scale=scale if scale is not None else 1.0 / math.sqrt(q.shape[2]), mask="causal")
            return np.ascontiguousarray(_to_numpy(out[0].transpose(1, 0, 2), dtype))
    return fn


class MlxAttention(MlxFastRope):
    """mx.fast.rope then mx.fast.scaled_dot_product_attention (attention_fn), judged on the golden set's
    attention block. Expected classes (ERROR_MODEL.md 16.2): the rotation's class is mlx-fast-rope's
    (the same call: fp32-angle, f16-table, bf16-table); the attention arithmetic assumed from MLX's CPU
    SDPA, which runs the unfused graph (mlx/fast.cpp): q times the scale and Q K^T in the activation
    dtype (the CPU GEMM accumulating in f32), softmax in f32 (precise) stored in the dtype, P V likewise:
    u_acc = 2^-24, u_mid = the dtype's unit, as the classes describe."""
    name = "mlx-attention"
    title = "mlx.core.fast.rope + mx.fast.scaled_dot_product_attention (causal): attention output, MLX CPU"
    install = MLX_INSTALL
    judges = "attention"

    def attention_fn(self, spec: Any, dtype: str, *, seq_len: int, scale: float) -> Callable[..., np.ndarray]:
        if dtype not in self.dtypes:
            raise Declined(f"{dtype}: not a dtype of this adapter")
        return attention_fn(spec, dtype, seq_len=seq_len, scale=scale)
