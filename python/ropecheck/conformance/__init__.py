"""Conformance of real RoPE implementations: each adapter calls one implementation's own public code
on ropecheck's golden inputs, and the checker judges it (docs/guide/conformance.md).

    from ropecheck import conformance
    m = conformance.run(conformance.adapters(), ["llama-3.1-8b"])   # or: python -m ropecheck.conformance
"""
from __future__ import annotations

from ._adapter import Adapter, Declined, NotTested
from ._run import ATTENTION_BLOCK, DEFAULT_HEADS, DEFAULT_POSITIONS, Cell, Matrix, judge, judge_attention, run
from ._write import markdown, write
from .keras_hub import KerasHub
from .mlx import MlxFastRope, MlxLm
from .mlx_attention import MlxAttention
from .onnxruntime import OnnxContrib, OnnxStandard
from .onnxruntime_gqa import OnnxGqa, OnnxGqaAttention
from ._stores_run import StoreAdapter, StoreCell
from .stores import GgufPy, MlxLmKvCache, TorchFloat8
from .torch_impls import HfTransformers, LigerRope, Torchtune
from .torch_sdpa import TorchSdpaAttention

ADAPTERS: tuple[type[Adapter], ...] = (OnnxStandard, OnnxContrib, OnnxGqa, OnnxGqaAttention, KerasHub, HfTransformers,
                                        TorchSdpaAttention, Torchtune, LigerRope, MlxFastRope, MlxLm, MlxAttention,
                                        GgufPy, MlxLmKvCache, TorchFloat8)


def adapters(names: list[str] | None = None) -> list[Adapter]:
    """The adapters, all or those named (ValueError naming an unknown one)."""
    known = {a.name: a for a in ADAPTERS}
    if names is None:
        return [a() for a in ADAPTERS]
    for n in names:
        if n not in known:
            raise ValueError(f"--impl: unknown implementation '{n}' (known: {', '.join(known)})")
    return [known[n]() for n in names]


__all__ = ["Adapter", "Declined", "NotTested", "Cell", "Matrix", "ADAPTERS", "DEFAULT_HEADS", "DEFAULT_POSITIONS", "adapters",
           "ATTENTION_BLOCK", "judge", "judge_attention", "markdown", "run", "write", "StoreAdapter", "StoreCell"]
