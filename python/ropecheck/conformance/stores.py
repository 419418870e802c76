"""Store adapters (_stores_run.py): real quantizers on rotated keys, as the engines write their caches.

`gguf-py`: gguf-py's `gguf.quants.quantize` (Q8_0, Q4_0: the converter's numpy port of ggml's
quantize_row_q8_0_ref / q4_0_ref) on keys rotated the Hugging Face way: transformers' own Llama
rotary classes (torch_impls.hf_rotate) where torch and transformers are installed, else the same
recipe op for op in numpy (_hf_numpy.py); the cell's note says which. A llama.cpp q8_0 / q4_0 KV cache
holds these blocks, 32 consecutive channels of one head each.

`mlx-lm-kv-cache`: mlx_lm's own `QuantizedKVCache(group_size=64, bits=4 | 8).update_and_fetch`
(mlx_lm/models/cache.py, mx.quantize's affine mode) on keys rotated by the RoPE module mlx_lm's model
files build (mlx.MlxLm.layer: mx.fast.rope), appended in contiguous runs with their offsets as a
generation loop does. cache.py is loaded from the installed mlx_lm under a package of ours that does
not run mlx_lm/__init__.py (which imports transformers and huggingface_hub to load checkpoints; cache.py
and the base.py it imports need only mlx): mlx_lm's code, not a copy, installed without its
dependencies as for `mlx-lm`.

`torch-float8` (opt-in, torch): Hugging Face's recipe in torch (transformers), then vLLM's dynamic
per-token FP8 quantization (QuantFP8's native path: scale = (amax / 448).clamp(min=1 / (448 * 512)),
(x / scale).clamp(-448, 448)) and torch's `.to(torch.float8_e4m3fn)` cast, in float32 on the CPU."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any

import numpy as np

from .._golden import Golden
from . import _hf_numpy
from ._adapter import Declined, rope_section
from ._stores_run import StoreAdapter
from .mlx import MLX_INSTALL, MlxLm, _to_mx
from .torch_impls import TORCH_INSTALL

GGUF_INSTALL = "pip install gguf==0.19.0 (pinned in tests/python/requirements.txt)"


def hf_family_supported(spec: dict[str, Any], group: int) -> str | None:
    """None when the Hugging Face Llama recipe (both paths) rotates this spec and its head_dim splits
    into the stores' groups of `group` channels, else why not."""
    if spec.get("family") != "rope":
        return "not a RoPE spec"
    rope = rope_section(spec)
    kind = rope.get("scaling", {"type": "none"})["type"]
    if kind not in _hf_numpy.SCALINGS:
        return (f"scaling '{kind}': the store cells rotate with Hugging Face's Llama recipe "
                f"({', '.join(_hf_numpy.SCALINGS)})")
    for key in ("mrope", "rotary_offset", "key_layout"):
        if key in rope:
            return f"{key}: not the Llama layout the store cells rotate"
    if rope["layout"] != "half_split":
        return "interleaved pairs: not the Llama layout the store cells rotate"
    if "k_norm" in spec or "k_norm" in rope:
        return "k_norm: the store cells rotate without a norm"
    if rope["head_dim"] % group:
        return f"head_dim {rope['head_dim']} is not a multiple of the store groups ({group})"
    return None


def _hf_keys(golden: Golden) -> tuple[np.ndarray, str]:
    """The set's keys rotated the Hugging Face way in float32, [tokens, heads, head_dim], and which
    recipe rotated them."""
    spec = golden.spec.to_dict()
    positions = np.asarray(golden["positions"]).reshape(-1)
    k = np.asarray(golden["k"], dtype=np.float32)
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        return (_hf_numpy.rotate(rope_section(spec), positions, k),
                "keys rotated by Hugging Face's recipe in numpy (transformers absent)")
    from .torch_impls import hf_rotate

    kt = torch.from_numpy(k.transpose(1, 0, 2).copy())[None]  # [1, heads, tokens, head_dim]
    _, kr = hf_rotate(spec, positions, "f32", kt, kt)
    return (kr[0].numpy().transpose(1, 0, 2).copy(),
            "keys rotated by transformers (the family's RotaryEmbedding + apply_rotary_pos_emb)")


class GgufPy(StoreAdapter):
    name = "gguf-py"
    title = ("gguf-py gguf.quants.quantize Q8_0 / Q4_0 (ggml's reference quantizers in numpy) on Hugging "
             "Face-rotated keys")
    distributions = ("gguf", "numpy")
    install = GGUF_INSTALL
    stores = ("q8_0", "q4_0")

    def __init__(self) -> None:
        self._recipe = ""

    def load(self) -> None:
        import gguf  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        return hf_family_supported(spec, 32)

    def note(self, spec: dict[str, Any]) -> str | None:
        return self._recipe or None

    def quantize(self, golden: Golden) -> dict[str, np.ndarray]:
        from gguf import GGMLQuantizationType, quants

        kr, self._recipe = _hf_keys(golden)
        t, h, d = kr.shape
        out = {}
        for store in self.stores:
            blocks = quants.quantize(kr.reshape(t * h, d), getattr(GGMLQuantizationType, store.upper()))
            out[f"k_rot.{store}"] = np.asarray(blocks, dtype=np.uint8).reshape(t, h, d // 32, -1)
        return out


def load_mlx_lm_cache():
    """mlx_lm/models/cache.py of the installed mlx_lm (and the base.py it imports), without running
    mlx_lm's __init__: under a package name of ours whose __path__ is mlx_lm's folder."""
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'mlx_lm'")
    root = list(spec.submodule_search_locations)[0]
    for name, path in (("_ropecheck_mlx_lm", root), ("_ropecheck_mlx_lm.models", os.path.join(root, "models"))):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
    return importlib.import_module("_ropecheck_mlx_lm.models.cache")


class MlxLmKvCache(StoreAdapter):
    name = "mlx-lm-kv-cache"
    title = "mlx_lm QuantizedKVCache(group_size=64, bits=4 / 8) after mlx_lm's RoPE (mx.fast.rope), MLX CPU"
    distributions = ("mlx-lm", "mlx", "mlx-cpu")
    install = MLX_INSTALL + " && pip install --no-deps mlx-lm==0.32.2"
    stores = ("int4g64", "int8g64")

    def __init__(self) -> None:
        self._rope = MlxLm()
        self._cache = None

    def load(self) -> None:
        self._rope.load()
        if self._cache is None:
            self._cache = load_mlx_lm_cache()

    def supports(self, spec: dict[str, Any]) -> str | None:
        return hf_family_supported(spec, 64) or self._rope.supports(spec)

    def quantize(self, golden: Golden) -> dict[str, np.ndarray]:
        import mlx.core as mx

        self.load()
        layer = self._rope.layer(golden.spec.to_dict())
        positions = np.asarray(golden["positions"], dtype=np.int64).reshape(-1)
        breaks = [0] + [i for i in range(1, len(positions)) if positions[i] != positions[i - 1] + 1] + [len(positions)]
        out = {}
        with mx.stream(mx.cpu):
            k = _to_mx(np.asarray(golden["k"]), "f32").transpose(1, 0, 2)[None]  # [1, heads, tokens, head_dim]
            for store in self.stores:
                cache = self._cache.QuantizedKVCache(group_size=64, bits=int(store[3]))
                for a, b in zip(breaks, breaks[1:]):  # a generation loop's appends, each after its RoPE
                    keys = layer(k[:, :, a:b, :], offset=int(positions[a]))
                    (words, scales, biases), _ = cache.update_and_fetch(keys, keys)
                for suffix, x in (("", words), (".scales", scales), (".biases", biases)):
                    out[f"k_rot.{store}{suffix}"] = np.array(x[0]).transpose(1, 0, 2).copy()
        return out


class TorchFloat8(StoreAdapter):
    name = "torch-float8"
    title = ("torch .to(float8_e4m3fn) with vLLM's dynamic per-token scale after Hugging Face's recipe "
             "(transformers), torch CPU")
    distributions = ("torch", "transformers")
    install = TORCH_INSTALL
    stores = ("e4m3fn",)  # saturate (the clamp before the cast), per-token: the --stores defaults

    def __init__(self) -> None:
        self._recipe = ""

    def load(self) -> None:
        import torch  # noqa: F401
        import transformers  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        return hf_family_supported(spec, 1)

    def note(self, spec: dict[str, Any]) -> str | None:
        return self._recipe or None

    def quantize(self, golden: Golden) -> dict[str, np.ndarray]:
        import ml_dtypes
        import torch

        kr, self._recipe = _hf_keys(golden)
        if not self._recipe.startswith("keys rotated by transformers"):
            raise Declined("transformers is not installed: " + self.install)
        x = torch.from_numpy(kr)
        fp8_max = torch.finfo(torch.float8_e4m3fn).max  # 448
        amax = x.abs().reshape(x.shape[0], -1).max(dim=-1).values  # per token, over every head and channel
        scale = (amax / fp8_max).clamp(min=1.0 / (fp8_max * 512.0))
        codes = (x / scale[:, None, None]).clamp(min=-fp8_max, max=fp8_max).to(torch.float8_e4m3fn)
        return {"k_rot.e4m3fn": codes.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn),
                "k_rot.e4m3fn.scale": scale.numpy().astype(np.float32)}
