"""Implementations that need PyTorch (opt-in: `scripts/install-deps --torch`, or the install line
below): Hugging Face transformers' rotary classes and apply functions, torchtune's
RotaryPositionalEmbeddings, and Liger-Kernel's Triton RoPE (on CPU under TRITON_INTERPRET=1, set
here when no CUDA device is present; natively on a GPU).

Hugging Face: the model family's `<Prefix>Config` is built from the spec (head_dim, heads,
max_position_embeddings, `rope_parameters` with rope_theta, the scaling's keys and
partial_rotary_factor = rotary_dim / head_dim), its `<Prefix>RotaryEmbedding(config)` gives cos / sin
for the golden position_ids in the activation dtype, and the family's `apply_rotary_pos_emb` rotates
(phi-2's attention slices the rotary channels itself: done here the same way). HF computes the
angle in float32 and casts cos / sin to the activation dtype before rotating: fp32-angle for f32, the
dtype's table class for f16 / bf16. Liger takes the same cos / sin and rotates in their dtype
(`liger_rotary_pos_emb`; `liger_rotary_pos_emb_gpt_oss` for gpt-oss's half-width tables, as Liger's
own patch for that model): the same classes."""
from __future__ import annotations

import importlib
import os
from typing import Any

import numpy as np

from .._arrays import DTYPES
from .._golden import Golden
from ._adapter import Adapter, NotTested, rope_section

TORCH_INSTALL = "scripts/install-deps --torch (pip install torch==2.15.0 transformers==5.23.0)"
_TORCH_DTYPE = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}

# preset name prefix -> transformers model module and class prefix
_HF_FAMILIES = (
    ("llama-", "llama", "Llama"), ("mistral-", "mistral", "Mistral"), ("qwen2-7b", "qwen2", "Qwen2"),
    ("qwen2.5-", "qwen2", "Qwen2"), ("phi-3.5-", "phi3", "Phi3"), ("phi-2", "phi", "Phi"),
    ("gpt-neox-", "gpt_neox", "GPTNeoX"), ("gpt-oss-", "gpt_oss", "GptOss"),
    ("deepseek-v3", "deepseek_v3", "DeepseekV3"), ("gemma-3-", "gemma3", "Gemma3"), ("gpt-j-", "gptj", "GPTJ"),
    ("qwen2-vl-", "qwen2_vl", "Qwen2VL"),
)
_SCALING_KEYS = {
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
             "mscale_all_dim", "truncate"),
    "longrope": ("short_factor", "long_factor", "factor", "original_max_position_embeddings", "attention_factor"),
    "dynamic": ("factor",),
}


def _torch_dtype(dtype: str):
    import torch

    return getattr(torch, _TORCH_DTYPE[dtype])


def _to_numpy(t, dtype: str) -> np.ndarray:
    import torch

    t = t.detach().cpu()
    if dtype == "bf16":
        return t.view(torch.int16).numpy().view(DTYPES["bf16"])
    return t.numpy()


def _from_numpy(a: np.ndarray, dtype: str):
    import torch

    if dtype == "bf16":
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def hf_family(spec: dict[str, Any]) -> tuple[str, str] | None:
    for prefix, module, cls in _HF_FAMILIES:
        if spec.get("name", "").startswith(prefix):
            return module, cls
    return None


def hf_rope_parameters(rope: dict[str, Any]) -> dict[str, Any]:
    scaling = rope.get("scaling", {"type": "none"})
    kind = scaling["type"]
    params: dict[str, Any] = {"rope_type": "default" if kind == "none" else kind, "rope_theta": rope["base"]}
    for key in _SCALING_KEYS.get(kind, ()):
        if key in scaling:
            params[key] = scaling[key]
    rotary = rope.get("rotary_dim") or rope["head_dim"]
    if rotary != rope["head_dim"]:
        params["partial_rotary_factor"] = rotary / rope["head_dim"]
    return params


def _gptj_rotate(spec: dict[str, Any], positions: np.ndarray, dtype: str, q, k):
    """GPT-J's own recipe on q, k [1, tokens, heads, head_dim] (as GPT-J's attention holds them): its
    float32 sin / cos table and apply_rotary_pos_emb on the rotary channels, the result rounded to dtype."""
    import torch
    from transformers.models.gptj import modeling_gptj

    rotary = rope_section(spec)["rotary_dim"]
    positions = torch.from_numpy(np.array(positions, dtype=np.int64).reshape(1, -1))
    table = modeling_gptj.create_sinusoidal_positions(int(positions.max()) + 1, rotary)
    sincos = modeling_gptj.get_embed_positions(table, positions)[0][positions[0]][None]  # as GPTJAttention
    sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
    out = []
    for t in (q, k):
        r = modeling_gptj.apply_rotary_pos_emb(t[..., :rotary], sin, cos)
        out.append(torch.cat([r, t[..., rotary:]], -1).to(_torch_dtype(dtype)))
    return out


def hf_cos_sin(spec: dict[str, Any], positions: np.ndarray, heads: int, x, seq_len: int | None = None):
    """The family's modeling module and its `<Prefix>RotaryEmbedding`'s cos / sin for `positions` ([T],
    or [3][T] for mrope) in x's dtype, the config built from the spec with `heads` attention heads.
    HF resolves dynamic and LongRoPE scaling at max(position_ids) + 1: with seq_len past that (1-D
    positions), seq_len - 1 is appended to the positions and its row dropped from cos / sin, so the
    tables are those of a sequence of seq_len tokens."""
    import torch
    import transformers

    rope = rope_section(spec)
    module_name, prefix = hf_family(spec)  # type: ignore[misc]
    kwargs: dict[str, Any] = dict(
        hidden_size=heads * rope["head_dim"], num_attention_heads=heads, num_key_value_heads=heads,
        head_dim=rope["head_dim"], max_position_embeddings=rope.get("max_position_embeddings") or 4096,
        rope_parameters=hf_rope_parameters(rope))
    config_class, call = f"{prefix}Config", {}
    if module_name == "deepseek_v3":  # the rotary part of DeepSeek's heads, in interleaved pairs
        kwargs.update(qk_rope_head_dim=rope["head_dim"], rope_interleave=True)
    elif module_name == "gemma3":  # one rope per layer type: this preset's as "full_attention"
        config_class = "Gemma3TextConfig"
        kwargs.update(num_hidden_layers=1, layer_types=["full_attention"],
                      rope_parameters={"full_attention": kwargs["rope_parameters"]})
        call = {"layer_type": "full_attention"}
    elif module_name == "qwen2_vl":  # mrope: three position streams, (3, batch, seq) position_ids
        config_class = "Qwen2VLTextConfig"
        kwargs["rope_parameters"]["mrope_section"] = list(rope["mrope"]["section"])
    config = getattr(transformers, config_class)(**kwargs)
    module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
    rotary = getattr(module, f"{prefix}RotaryEmbedding")(config=config)
    positions = np.array(positions, dtype=np.int64)  # a copy: torch wants a writable array
    extend = seq_len is not None and positions.ndim == 1 and seq_len > int(positions.max()) + 1
    if extend:
        positions = np.append(positions, seq_len - 1)
    positions = torch.from_numpy(positions[:, None, :] if positions.ndim == 2 else positions.reshape(1, -1))
    cos, sin = rotary(x, positions, **call)
    return (module, cos[:, :-1], sin[:, :-1]) if extend else (module, cos, sin)


def hf_rotate(spec: dict[str, Any], positions: np.ndarray, dtype: str, q, k, seq_len: int | None = None):
    """Hugging Face's recipe on q [1, Hq, T, D] and k [1, Hk, T, D] (torch, in `dtype`; Hq and Hk may
    differ, cos / sin broadcast over heads): the rotated pair, as the family's attention computes it
    (tables at seq_len when given: hf_cos_sin)."""
    import torch

    if hf_family(spec) == ("gptj", "GPTJ"):
        qr, kr = _gptj_rotate(spec, positions, dtype, q.transpose(1, 2), k.transpose(1, 2))
        return qr.transpose(1, 2), kr.transpose(1, 2)
    module, cos, sin = hf_cos_sin(spec, positions, q.shape[1], q, seq_len)
    rotary = cos.shape[-1]
    if rotary < q.shape[-1] and module.__name__.endswith("modeling_phi"):
        qr, kr = module.apply_rotary_pos_emb(q[..., :rotary], k[..., :rotary], cos, sin)
        return torch.cat([qr, q[..., rotary:]], -1), torch.cat([kr, k[..., rotary:]], -1)
    if module.__name__.endswith("modeling_deepseek_v3"):
        # It takes interleaved pairs and returns them de-interleaved (pair j at channels j and
        # j + R/2: q and k alike, so attention scores are unchanged); put them back in place.
        qr, kr = (torch.stack([t[..., :rotary // 2], t[..., rotary // 2:]], -1).flatten(-2)
                  for t in module.apply_rotary_pos_emb_interleave(q, k, cos, sin))
        return qr, kr
    return module.apply_rotary_pos_emb(q, k, cos, sin)


class _Torch(Adapter):
    dtypes = ("f32", "f16", "bf16")
    expected = {"f32": "fp32-angle", "f16": "f16-table", "bf16": "bf16-table"}
    install = TORCH_INSTALL

    def load(self) -> None:
        import torch  # noqa: F401


class HfTransformers(_Torch):
    name = "hf-transformers"
    title = "Hugging Face transformers: the model family's RotaryEmbedding + apply_rotary_pos_emb, torch CPU"
    distributions = ("transformers", "torch")

    def load(self) -> None:
        import torch  # noqa: F401
        import transformers  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        if spec.get("family") != "rope":
            return "not a RoPE spec"
        if hf_family(spec) is None:
            return "no transformers family mapped for this preset in the adapter"
        mrope = rope_section(spec).get("mrope")
        if mrope and (mrope.get("interleaved") or hf_family(spec) != ("qwen2_vl", "Qwen2VL")):
            return "this mrope (interleaved sections: Qwen3-VL) is not mapped in the adapter"
        return None

    def expected_class(self, spec: dict[str, Any], dtype: str) -> str:
        # GPT-J keeps its sin / cos table in float32 and rotates in float32 whatever the activation
        # dtype (torch promotes), and q / k stay float32 after it: rounded once here to the dtype.
        return "fp32-angle" if hf_family(spec) == ("gptj", "GPTJ") else self.expected[dtype]

    def cos_sin(self, golden: Golden, dtype: str, x):
        return hf_cos_sin(golden.spec.to_dict(), golden["positions"], golden.heads, x)

    def run(self, golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        import torch

        q = _from_numpy(golden["q"].astype(DTYPES[dtype]).transpose(1, 0, 2)[None], dtype)
        k = _from_numpy(golden["k"].astype(DTYPES[dtype]).transpose(1, 0, 2)[None], dtype)
        with torch.no_grad():
            qr, kr = hf_rotate(golden.spec.to_dict(), golden["positions"], dtype, q, k)
        return (np.ascontiguousarray(_to_numpy(qr, dtype)[0].transpose(1, 0, 2)),
                np.ascontiguousarray(_to_numpy(kr, dtype)[0].transpose(1, 0, 2)))


class LigerRope(HfTransformers):
    name = "liger-kernel"
    title = "Liger-Kernel liger_rotary_pos_emb (Triton; TRITON_INTERPRET=1 without a GPU) on HF cos / sin"
    distributions = ("liger-kernel", "triton", "transformers", "torch")
    install = ("scripts/install-deps --torch (pip install torch==2.15.0 transformers==5.23.0 liger-kernel==0.8.5; "
               "triton comes with torch)")

    def load(self) -> None:
        import torch

        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")  # read when triton is first imported
        super().load()
        from liger_kernel.transformers.rope import liger_rotary_pos_emb  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        why = super().supports(spec)
        if why:
            return why
        rope = rope_section(spec)
        if rope.get("layout") != "half_split" or (rope.get("rotary_dim") or rope["head_dim"]) != rope["head_dim"]:
            return "the kernel rotates full-width half-split heads only"
        return None

    def run(self, golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        import torch
        from liger_kernel.transformers import rope as liger_rope

        # As Liger's monkey patch for the model does: gpt-oss's cos / sin are half width.
        apply = liger_rope.liger_rotary_pos_emb
        if hf_family(golden.spec.to_dict()) == ("gpt_oss", "GptOss"):
            apply = liger_rope.liger_rotary_pos_emb_gpt_oss
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cpu" and dtype == "bf16":
            # Measured with triton 3.9.0: its interpreter returns garbage for bf16 tensors (position 0,
            # where the rotation is the identity, included; conformance/FINDINGS.md), so the kernel
            # cannot be judged in bf16 without a GPU.
            raise NotTested("bf16 under TRITON_INTERPRET=1: triton's interpreter computes wrong bf16 values "
                            "(conformance/FINDINGS.md); needs a GPU")
        q = _from_numpy(golden["q"].astype(DTYPES[dtype]).transpose(1, 0, 2)[None], dtype).to(device)
        k = _from_numpy(golden["k"].astype(DTYPES[dtype]).transpose(1, 0, 2)[None], dtype).to(device)
        with torch.no_grad():
            _, cos, sin = self.cos_sin(golden, dtype, q.cpu())
            qr, kr = apply(q.contiguous(), k.contiguous(), cos.to(device), sin.to(device))
        return (np.ascontiguousarray(_to_numpy(qr, dtype)[0].transpose(1, 0, 2)),
                np.ascontiguousarray(_to_numpy(kr, dtype)[0].transpose(1, 0, 2)))


class Torchtune(_Torch):
    name = "torchtune"
    title = "torchtune RotaryPositionalEmbeddings / Llama3ScaledRoPE, torch CPU"
    distributions = ("torchtune", "torch")
    install = "scripts/install-deps --torch (pip install torch==2.15.0 torchtune==0.6.1 torchao==0.10.0)"
    # torchtune rotates in float32 whatever the activation dtype and rounds once at the end.
    expected = {"f32": "fp32-angle", "f16": "fp32-angle", "bf16": "fp32-angle"}

    def load(self) -> None:
        import torch  # noqa: F401
        from torchtune.modules import RotaryPositionalEmbeddings  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        rope = rope_section(spec)
        if spec.get("family") != "rope":
            return "not a RoPE spec"
        if "mrope" in rope:
            return "mrope: one position stream only"
        kind = rope.get("scaling", {"type": "none"})["type"]
        if kind not in ("none", "llama3"):
            return f"{kind} scaling: torchtune has none and llama3 (Llama3ScaledRoPE) only"
        return None

    def run(self, golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        import torch
        from torchtune.modules import RotaryPositionalEmbeddings

        rope = rope_section(golden.spec.to_dict())
        rotary = rope.get("rotary_dim") or rope["head_dim"]
        positions = np.asarray(golden["positions"], dtype=np.int64).reshape(-1)
        length = int(positions.max()) + 1
        scaling = rope.get("scaling", {"type": "none"})
        if scaling["type"] == "llama3":
            from torchtune.models.llama3_1 import Llama3ScaledRoPE

            layer = Llama3ScaledRoPE(rotary, max_seq_len=length, base=rope["base"], scale_factor=scaling["factor"],
                                     low_freq_factor=scaling["low_freq_factor"],
                                     high_freq_factor=scaling["high_freq_factor"],
                                     old_context_len=scaling["original_max_position_embeddings"])
        else:
            layer = RotaryPositionalEmbeddings(rotary, max_seq_len=length, base=rope["base"])
        # torchtune pairs channels (2j, 2j+1); a half-split model's pair j (j, j + R/2) is moved there
        # and back, as torchtune's checkpoint conversion permutes the projection weights.
        order = np.arange(rotary)
        if rope["layout"] == "half_split":
            order = np.stack([np.arange(rotary // 2), np.arange(rotary // 2) + rotary // 2], -1).reshape(-1)
        inverse = np.argsort(order)
        out = []
        with torch.no_grad():
            for name in ("q", "k"):
                x = golden[name].astype(DTYPES[dtype])
                xr = _from_numpy(x[:, :, :rotary][:, :, order][None], dtype)        # [1, tokens, heads, R]
                y = layer(xr, input_pos=torch.from_numpy(positions[None]))
                y = _to_numpy(y, dtype)[0][:, :, inverse]
                out.append(np.ascontiguousarray(np.concatenate([y, x[:, :, rotary:]], -1)))
        return out[0], out[1]
