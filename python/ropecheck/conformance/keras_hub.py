"""Keras Hub's `keras_hub.layers.RotaryEmbedding` on the JAX backend (KERAS_BACKEND=jax, set here
when unset; a process that already imported keras with another backend is declined).

The layer is built from the spec as a Keras Hub model builds it: max_wavelength = base, rope_type
"linear" with scaling_factor = factor (1 without scaling) or "yarn" with factor, beta_fast, beta_slow,
original_max_position_embeddings and truncate; the golden positions are passed as `positions`, and
the layer's dtype is the activation dtype. It computes the inverse frequencies, angles and cos / sin
in float32 and rotates in the layer's compute dtype, so a correct layer lands in fp32-angle for f32
and in the table class of f16 / bf16. It rotates every channel of the feature axis in the half-split
layout: partial rotary is applied, as Keras Hub's GPT-NeoX does, to the first rotary_dim channels
(the rest copied); interleaved pairs, mrope, llama3 / LongRoPE / dynamic scaling and YaRN with an
explicit attention factor or mscale are not expressible."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._arrays import DTYPES
from .._golden import Golden
from ._adapter import Adapter, Declined, rope_section

_KERAS_DTYPE = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


class KerasHub(Adapter):
    name = "keras-hub"
    title = "keras_hub.layers.RotaryEmbedding, Keras on JAX (CPU)"
    distributions = ("keras-hub", "keras", "jax", "jaxlib")
    install = ("scripts/install-deps --keras (pip install keras==3.15.1 tokenizers==0.23.3 && "
               "pip install --no-deps keras-hub==0.32.0; jax[cpu] 0.10.2 from the requirements)")
    dtypes = ("f32", "f16", "bf16")
    expected = {"f32": "fp32-angle", "f16": "f16-table", "bf16": "bf16-table"}

    def load(self) -> None:
        os.environ.setdefault("KERAS_BACKEND", "jax")
        import keras
        import keras_hub  # noqa: F401

        if keras.backend.backend() != "jax":
            raise ImportError(f"keras runs on the {keras.backend.backend()} backend here (KERAS_BACKEND=jax is needed)")

    def supports(self, spec: dict[str, Any]) -> str | None:
        rope = rope_section(spec)
        if spec.get("family") != "rope":
            return "not a RoPE spec"
        if rope.get("layout") != "half_split":
            return "interleaved pairs: the layer rotates half-split only"
        if "mrope" in rope:
            return "mrope: the layer takes one position stream"
        scaling = rope.get("scaling", {"type": "none"})
        kind = scaling["type"]
        if kind not in ("none", "linear", "yarn"):
            return f"{kind} scaling: the layer has linear, dynamic (another formula) and yarn only"
        extra = sorted(set(scaling) & {"attention_factor", "mscale", "mscale_all_dim"})
        if extra:
            return f"yarn with {', '.join(extra)}: the layer's attention factor is 0.1 ln(factor) + 1 only"
        return None

    def layer(self, spec: dict[str, Any], dtype: str):
        import keras_hub

        rope = rope_section(spec)
        scaling = rope.get("scaling", {"type": "none"})
        kwargs: dict[str, Any] = {"max_wavelength": rope["base"], "dtype": _KERAS_DTYPE[dtype]}
        if scaling["type"] == "linear":
            kwargs["scaling_factor"] = scaling["factor"]
        elif scaling["type"] == "yarn":
            length = rope.get("max_position_embeddings", 0)
            original = scaling.get("original_max_position_embeddings", length)
            kwargs.update(rope_type="yarn", scaling_factor=scaling.get("factor", length / original),
                          original_max_position_embeddings=original, beta_fast=scaling.get("beta_fast", 32.0),
                          beta_slow=scaling.get("beta_slow", 1.0), truncate=scaling.get("truncate", True))
        return keras_hub.layers.RotaryEmbedding(**kwargs)

    def run(self, golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        if dtype not in self.dtypes:
            raise Declined(f"{dtype}: not a dtype of this adapter")
        spec = golden.spec.to_dict()
        rotary = rope_section(spec).get("rotary_dim") or rope_section(spec)["head_dim"]
        layer = self.layer(spec, dtype)
        positions = np.asarray(golden["positions"], dtype=np.int64).reshape(-1)
        out = []
        for name in ("q", "k"):
            x = golden[name].astype(DTYPES[dtype])[None]           # [1, tokens, heads, head_dim]
            y = np.asarray(layer(x[..., :rotary], positions=positions))
            out.append(np.concatenate([y.astype(DTYPES[dtype]), x[..., rotary:]], axis=-1)[0])
        return out[0], out[1]
