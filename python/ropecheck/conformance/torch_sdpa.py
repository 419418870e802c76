"""torch SDPA after the Hugging Face recipe (opt-in, with the other torch adapters: torch_impls.py):
queries and keys rotated exactly as the `hf-transformers` adapter rotates them (the model family's
`<Prefix>RotaryEmbedding` cos / sin in the activation dtype and its `apply_rotary_pos_emb`; GPT-J's
float32 table and rotation, rounded to the dtype), then torch.nn.functional.scaled_dot_product_attention
on the CPU with is_causal=True and enable_gqa=True: G query heads sharing one key / value head, in
HF's [batch, heads, tokens, dim] layout, as transformers' sdpa attention calls it.

The rotated keys this pipeline attends with are hf_rotate's output, the `hf-transformers` cells'
rotation (there judged as rotated tensors: no separate cell here); this module gives the attention
output, [tokens][G][value_dim], for an attention golden block's check."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._arrays import DTYPES
from .._spec import Spec
from ._adapter import Declined
from .torch_impls import HfTransformers, _from_numpy, _to_numpy, hf_rotate


def attention_fn(spec: Spec | str, dtype: str, *, seq_len: int | None = None,
                 scale: float | None = None) -> Callable[..., np.ndarray]:
    """fn(q [T][G][D], k [T][D], v [T][Dv], positions [T]) -> torch SDPA's output [T][G][Dv] in `dtype`
    (f32, f16, bf16): q and k rotated by hf_rotate (Hugging Face's recipe for the preset's family),
    causal by token index, scale 1/sqrt(D) unless given (torch's default). HF's rotary classes resolve
    dynamic / LongRoPE scaling at max(position_ids) + 1: the tables are taken at seq_len (default max
    position + 1, as a golden set takes it) by hf_cos_sin's appended position, so a block inside the
    original context of a golden set made for a longer sequence gets that sequence's (long) factors."""
    if isinstance(spec, str):
        spec = Spec.from_preset(spec)
    spec_dict = spec.to_dict()

    def fn(q, k, v, positions) -> np.ndarray:
        import torch
        import torch.nn.functional as F

        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        q, k, v = (np.asarray(a).astype(DTYPES[dtype]) for a in (q, k, v))
        qt = _from_numpy(q.transpose(1, 0, 2)[None], dtype)              # [1, G, T, D]
        kt = _from_numpy(k[None, None], dtype)                            # [1, 1, T, D]
        vt = _from_numpy(v[None, None], dtype)                            # [1, 1, T, Dv]
        with torch.no_grad():
            qr, kr = hf_rotate(spec_dict, positions, dtype, qt, kt, seq_len)
            out = F.scaled_dot_product_attention(qr.contiguous(), kr.contiguous(), vt, is_causal=True,
                                                 scale=scale, enable_gqa=True)
        return np.ascontiguousarray(_to_numpy(out, dtype)[0].transpose(1, 0, 2))
    return fn


class TorchSdpaAttention(HfTransformers):
    """hf_rotate then F.scaled_dot_product_attention (attention_fn), judged on the golden set's attention
    block. Expected classes (ERROR_MODEL.md 16.2): the rotation's class is `hf-transformers`' (the same
    calls: fp32-angle for f32, f16-table / bf16-table for the half types; GPT-J fp32-angle throughout,
    rounded once to the dtype); the attention arithmetic assumed from torch's CPU SDPA, which takes its
    fused flash-attention kernel here (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp): Q K^T through
    the CPU GEMM accumulating in f32 (f16 / bf16 inputs widened), an online softmax in f32 over key
    blocks, the probabilities rounded to the activation dtype for the P V GEMM (f32 accumulation), the
    output normalized in f32 and rounded once: u_acc = 2^-24, u_mid = the dtype's unit, as the classes
    describe."""
    name = "torch-sdpa-attention"
    title = ("HF transformers' RotaryEmbedding + apply_rotary_pos_emb, then torch "
             "F.scaled_dot_product_attention (causal, GQA): attention output, torch CPU")

    judges = "attention"

    def attention_fn(self, spec: Any, dtype: str, *, seq_len: int, scale: float) -> Callable[..., np.ndarray]:
        if dtype not in self.dtypes:
            raise Declined(f"{dtype}: not a dtype of this adapter")
        return attention_fn(spec, dtype, seq_len=seq_len, scale=scale)
