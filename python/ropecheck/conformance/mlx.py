"""MLX on the CPU (the mlx-cpu wheel on Linux): the operator `mlx.core.fast.rope` (`mlx-fast-rope`)
and mlx_lm's RoPE classes as mlx_lm's model files build them (`mlx-lm`).

What MLX 0.32.4 computes on the CPU, measured: mx.fast.rope's output is bit for bit that of the
op graph mlx/fast.cpp falls back to (f32, f16 and bf16, both pairings, base and freqs): positions
float32(t + offset) * scale; the inverse frequency of pair j exp(-j * f32(ln(base) / (dims / 2)))
in float32, or reciprocal(freqs[j]) when `freqs` is given. `freqs` are periods (base^(2j/d): what
mlx_lm's Llama3RoPE, YarnRoPE and SuScaledRoPE pass), not inverse frequencies. cos / sin in float32,
cast to the activation dtype, and the rotation in that dtype (each product and the sum rounded to
it): Hugging Face's arithmetic, so fp32-angle for f32 and the dtype's table class for f16 / bf16.

mx.fast.rope has no attention factor: YaRN and LongRoPE multiply the rotary channels by it first, in
the activation dtype (mlx_lm's YarnRoPE and SuScaledRoPE; `mlx-fast-rope` does the same), one
rounding more than HF's folding it into cos / sin.

mlx-fast-rope: traditional = interleaved pairs, dims = rotary_dim (the other channels pass through);
no scaling or linear: `base`, scale = 1 / factor; every other scaling: `freqs` = 1 / w of the exact
inverse frequencies (binary64, at the golden set's seq_len) rounded once to f32, so the operator is
judged on its own arithmetic. One token per batch row, positions as the documented vector of
per-example offsets.

mlx-lm: rope_utils.initialize_rope(dims, base, traditional, scaling_config,
max_position_embeddings) with the Hugging Face rope_scaling dict (default, linear, llama3, yarn), as
llama.py, qwen2.py, gemma3_text.py, gpt_oss.py, deepseek_v3.py and gptj.py call it; for LongRoPE the
SuScaledRoPE phi3.py builds (dynamic NTK is declined: mlx_lm takes its base from each call's
length). traditional = interleaved pairs, as the model files set it (DeepSeek-V3 and GPT-J rotate
interleaved, in place: unlike HF's DeepSeek-V3 there is no de-interleaving). Positions in contiguous
runs, each called with offset = its first position, as mlx_lm's KV cache passes it. rope_utils.py is
loaded from the installed mlx_lm folder by path: mlx_lm's __init__ imports transformers (to load
checkpoints) and the RoPE classes need only mlx, so mlx-lm can be installed without its dependencies
(transformers and some twenty more packages, about 220 MB, with them)."""
from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np

from .._arrays import DTYPES
from .._golden import Golden
from ._adapter import Adapter, Declined, rope_section

MLX_INSTALL = "pip install mlx==0.32.4 mlx-cpu==0.32.4"


def _to_mx(a: np.ndarray, dtype: str):
    import mlx.core as mx

    a = np.ascontiguousarray(a.astype(DTYPES[dtype]))
    if dtype == "bf16":  # numpy has no bfloat16 buffer format: through the bits
        return mx.array(a.view(np.uint16)).view(mx.bfloat16)
    return mx.array(a)


def _to_numpy(y, dtype: str) -> np.ndarray:
    import mlx.core as mx

    if dtype == "bf16":
        return np.array(y.view(mx.uint16)).view(DTYPES["bf16"])
    return np.array(y)


def periods(golden: Golden) -> np.ndarray:
    """mx.fast.rope's `freqs` for the golden set: 1 / w of the exact inverse frequencies (binary64, at
    the set's seq_len), rounded once to f32."""
    w = golden.spec.inverse_frequencies(golden.manifest["seq_len"])
    return (1.0 / w).astype(np.float32)


class _Mlx(Adapter):
    dtypes = ("f32", "f16", "bf16")
    expected = {"f32": "fp32-angle", "f16": "f16-table", "bf16": "bf16-table"}  # HF's arithmetic (above)
    mrope_reason = ""  # why mrope is not applicable, per adapter

    def load(self) -> None:
        import mlx.core  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        if spec.get("family") != "rope":
            return "not a RoPE spec"
        if "mrope" in rope_section(spec):
            return self.mrope_reason
        return None

    def _rotate(self, golden: Golden, dtype: str, x):
        raise NotImplementedError

    def run(self, golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        import mlx.core as mx

        if dtype not in self.dtypes:
            raise Declined(f"{dtype}: not a dtype of this adapter")
        out = []
        with mx.stream(mx.cpu):
            for name in ("q", "k"):
                y = self._rotate(golden, dtype, _to_mx(golden[name], dtype))  # [tokens, heads, head_dim]
                out.append(np.ascontiguousarray(_to_numpy(y, dtype)))
        return out[0], out[1]


class MlxFastRope(_Mlx):
    name = "mlx-fast-rope"
    title = "mlx.core.fast.rope (base / scale, or freqs for the frequency-scaled presets), MLX CPU"
    distributions = ("mlx", "mlx-cpu")
    install = MLX_INSTALL
    mrope_reason = "mrope: one position per token and call (one stream)"

    def _rotate(self, golden: Golden, dtype: str, x):
        rope = rope_section(golden.spec.to_dict())
        freqs = None if rope.get("scaling", {"type": "none"})["type"] in ("none", "linear") else periods(golden)
        return fast_rope(x, rope, golden["positions"], golden.attention_factor, freqs)


def fast_rope(x, rope: dict[str, Any], positions: np.ndarray, att: float, freqs: np.ndarray | None):
    """mx.fast.rope as `mlx-fast-rope` calls it, on x [tokens, heads, head_dim] (an mx array), token t
    at positions[t]; `freqs`: the periods of a frequency-scaled preset (None: base, or scale for
    linear)."""
    import mlx.core as mx

    rotary = rope.get("rotary_dim") or rope["head_dim"]
    scaling = rope.get("scaling", {"type": "none"})
    if att != 1.0:  # the operator has no attention factor: on the input, as mlx_lm does
        x = x.at[..., :rotary].multiply(att)
    kwargs: dict[str, Any] = {"base": rope["base"], "scale": 1.0}
    if scaling["type"] == "linear":
        kwargs["scale"] = 1.0 / scaling["factor"]
    elif freqs is not None:
        kwargs = {"base": None, "scale": 1.0, "freqs": mx.array(freqs)}
    positions = np.asarray(positions, dtype=np.int64).reshape(-1)
    # [batch = tokens, heads, T = 1, head_dim]: each token its own example, offset = its position
    y = mx.fast.rope(x[:, :, None, :], rotary, traditional=rope["layout"] == "interleaved",
                     offset=mx.array(positions.astype(np.int32)), **kwargs)
    return y[:, :, 0, :]


def load_rope_utils():
    """mlx_lm/models/rope_utils.py of the installed mlx_lm, without running mlx_lm's __init__."""
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'mlx_lm'")
    path = os.path.join(list(spec.submodule_search_locations)[0], "models", "rope_utils.py")
    module_spec = importlib.util.spec_from_file_location("_ropecheck_mlx_lm_rope_utils", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"mlx_lm has no {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


class MlxLm(_Mlx):
    name = "mlx-lm"
    title = "mlx_lm rope_utils (nn.RoPE, Llama3RoPE, YarnRoPE, SuScaledRoPE) as mlx_lm's models build them, MLX CPU"
    distributions = ("mlx-lm", "mlx", "mlx-cpu")
    install = "pip install mlx==0.32.4 mlx-cpu==0.32.4 && pip install --no-deps mlx-lm==0.32.2"
    mrope_reason = ("mrope: by design, mlx_lm's 'mrope' rope type is plain nn.RoPE over the text positions (one "
                    "stream; the vision position streams are mlx-vlm's)")

    def __init__(self) -> None:
        self._rope_utils = None

    def load(self) -> None:
        super().load()
        if self._rope_utils is None:
            self._rope_utils = load_rope_utils()

    def supports(self, spec: dict[str, Any]) -> str | None:
        why = super().supports(spec)
        if why:
            return why
        if rope_section(spec).get("scaling", {"type": "none"})["type"] == "dynamic":
            return ("dynamic NTK: mlx_lm's DynamicNTKScalingRoPE takes its base from each call's offset + length, "
                    "not from the whole sequence's")
        return None

    def note(self, spec: dict[str, Any]) -> str | None:
        scaling = rope_section(spec).get("scaling", {"type": "none"})
        if scaling["type"] == "longrope":
            return ("differs from Hugging Face below original_max_position_embeddings: SuScaledRoPE rotates with "
                    "long_factor at every length, HF with short_factor up to it; judged at seq_len past it, where "
                    "both use long_factor (conformance/FINDINGS.md)")
        if scaling["type"] == "yarn" and scaling.get("truncate") is False:
            return ("YarnRoPE always rounds the YaRN correction range: truncate: false is dropped "
                    "(conformance/FINDINGS.md)")
        return None

    def layer(self, spec: dict[str, Any]):
        """The RoPE module mlx_lm's model file builds for this spec."""
        self.load()
        ru = self._rope_utils
        rope = rope_section(spec)
        rotary = rope.get("rotary_dim") or rope["head_dim"]
        scaling = dict(rope.get("scaling", {"type": "none"}))
        kind = scaling.pop("type")
        if kind == "longrope":  # phi3.py builds it directly (initialize_rope passes the same arguments)
            return ru.SuScaledRoPE(rotary, base=rope["base"], max_position_embeddings=rope["max_position_embeddings"],
                                   original_max_position_embeddings=scaling["original_max_position_embeddings"],
                                   short_factor=scaling["short_factor"], long_factor=scaling["long_factor"])
        config = None if kind == "none" else {"rope_type": kind, **scaling}  # the HF config's rope_scaling
        return ru.initialize_rope(rotary, rope["base"], rope["layout"] == "interleaved", scaling_config=config,
                                  max_position_embeddings=rope.get("max_position_embeddings"))

    def _rotate(self, golden: Golden, dtype: str, x):
        import mlx.core as mx

        layer = self.layer(golden.spec.to_dict())
        positions = np.asarray(golden["positions"], dtype=np.int64).reshape(-1)
        xt = x.transpose(1, 0, 2)[None]  # [1, heads, tokens, head_dim], as the attention holds q / k
        breaks = [0] + [i for i in range(1, len(positions)) if positions[i] != positions[i - 1] + 1] + [len(positions)]
        y = mx.concatenate([layer(xt[:, :, a:b, :], offset=int(positions[a])) for a, b in zip(breaks, breaks[1:])],
                           axis=2)
        return y[0].transpose(1, 0, 2)
