"""Arrays in and out: NumPy, PyTorch (CPU or CUDA), JAX, anything with __dlpack__ or __array__;
bf16 through ml_dtypes; the [tokens, heads, head_dim] layout the checker uses and the batched ones."""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ._core import InputError

DTYPES: dict[str, np.dtype] = {
    "f64": np.dtype(np.float64),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    # The quantized stores' (golden/GOLDEN_FORMAT.md, "The stores file"): GGML blocks' bytes, MLX's packed
    # words, FP8 codes as ml_dtypes' types.
    "u8": np.dtype(np.uint8),
    "u32": np.dtype(np.uint32),
    "e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
# torch's FP8 types, viewed as ml_dtypes' (the same bit patterns).
_TORCH_VIEWS = {"torch.bfloat16": (ml_dtypes.bfloat16, "int16"), "torch.float8_e4m3fn": (ml_dtypes.float8_e4m3fn, "uint8"),
                "torch.float8_e5m2": (ml_dtypes.float8_e5m2, "uint8")}
_NAMES = {v: k for k, v in DTYPES.items()}

# [tokens, heads, head_dim] (the golden sets' own), [batch, heads, seq, head_dim] (Hugging Face's
# q / k), [batch, seq, heads, head_dim] (flash-attention's); batched tokens are batch-major.
LAYOUTS = ("thd", "bhsd", "bshd")


def dtype_name(a: np.ndarray) -> str:
    name = _NAMES.get(a.dtype)
    if name is None:
        raise InputError(f"unsupported dtype {a.dtype} (known: float64, float32, float16, bfloat16, int64, int32, "
                         "uint8, uint32, float8_e4m3fn, float8_e5m2)")
    return name


def to_numpy(x: Any) -> np.ndarray:
    """A host NumPy array of `x` (no copy where the source allows it; a device tensor is copied to
    the host once)."""
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch"):
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if str(t.dtype) in _TORCH_VIEWS:  # NumPy has no bfloat16 / FP8: the bits, viewed as ml_dtypes'
            import torch  # present: x is a torch tensor

            np_type, bits = _TORCH_VIEWS[str(t.dtype)]
            return t.view(getattr(torch, bits)).numpy().view(np_type)
        return t.numpy()
    if hasattr(x, "__array__"):
        return np.asarray(x)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    raise InputError(f"not an array: {type(x).__name__} (expected NumPy, PyTorch, JAX, or anything with "
                     "__dlpack__ or __array__)")


def to_thd(a: np.ndarray, layout: str, name: str) -> np.ndarray:
    """q / k shaped tensors to [tokens, heads, head_dim]; cos / sin / pe (2-D) unchanged."""
    if layout not in LAYOUTS:
        raise InputError(f"layout: must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "thd" or a.ndim == 2:
        return a
    if a.ndim != 4:
        raise InputError(f"candidate '{name}': layout {layout} needs 4 dimensions, got shape {list(a.shape)}")
    if layout == "bhsd":
        a = a.transpose(0, 2, 1, 3)
    return a.reshape(a.shape[0] * a.shape[1], a.shape[2], a.shape[3])


def from_thd(a: np.ndarray, layout: str) -> np.ndarray:
    """[tokens, heads, head_dim] to the layout a kernel takes (batch 1)."""
    if layout not in LAYOUTS:
        raise InputError(f"layout: must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "thd":
        return a
    if layout == "bhsd":
        return a.transpose(1, 0, 2)[None]
    return a[None]
