"""Quantized stores from Python (golden/GOLDEN_FORMAT.md, "Quantized stores"): a set's stores as NumPy
arrays, and what a kernel returns as a store (FP8 codes with their scale, GGML blocks, MLX's packed codes
with scales and biases) turned into the candidate tensors the checker reads (`q_rot.e4m3fn`,
`q_rot.e4m3fn.scale`, ...). Only shapes and dtypes are checked here: the verdict is the C++ checker's."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ._arrays import DTYPES, InputError, to_numpy

# What each store format carries beside its codes (the suffixes of the candidate tensors' names).
PARTS = {"fp8": ("codes", "scale"), "ggml": ("codes",), "mlx-affine": ("codes", "scales", "biases")}
_FORMS = {"fp8": "(codes, scale)", "ggml": "the blocks' uint8 bytes", "mlx-affine": "(codes, scales, biases)"}


def records(manifest: dict) -> dict[str, dict]:
    """The set's stores by name ("e4m3fn", "q8_0", "int4g64"), the manifest's records; empty without --stores."""
    return {r["name"]: r for r in manifest.get("stores", {}).get("stores", [])}


def pick(manifest: dict, stores: str | None) -> dict:
    """The record of the store a kernel answers: `stores` names it (default: the set's only one)."""
    recs = records(manifest)
    if not recs:
        raise InputError("stores: this golden set has no quantized stores (write it with `golden --stores LIST`)")
    if stores is None:
        if len(recs) > 1:
            raise InputError(f"stores: the set has {len(recs)} stores ({', '.join(recs)}): name the one the kernel "
                             "returns, stores=NAME")
        return next(iter(recs.values()))
    if stores not in recs:
        raise InputError(f"stores: '{stores}' is not a store of this golden set ({', '.join(recs)})")
    return recs[stores]


def _given_scale(record: dict) -> bool:
    """An FP8 store whose scale is the set's (golden --stores e4m3fn:scale=V): the kernel returns codes only."""
    return record.get("scale_source") == "given"


def _parts(record: dict, where: str, value: Any) -> dict[str, Any]:
    """The store's parts by name from a tuple (in PARTS order), a mapping, or one array (GGML blocks)."""
    names = ("codes",) if _given_scale(record) else PARTS[record["format"]]
    if isinstance(value, Mapping):
        missing = [n for n in names if n not in value]
        extra = [n for n in value if n not in names]
        if extra:
            raise InputError(f"{where}: unknown part {extra[0]!r} (a {record['name']} store is {_form(record)})")
    elif isinstance(value, (tuple, list)):
        if len(value) > len(names):
            raise InputError(f"{where}: {len(value)} parts, a {record['name']} store is {_form(record)}")
        value = dict(zip(names, value))
        missing = list(names[len(value):])
    else:
        value, missing = {"codes": value}, list(names[1:])
    if missing:
        raise InputError(f"{where}: the {missing[0]} {'is' if missing[0] == 'scale' else 'are'} missing "
                         f"(a {record['name']} store is {_form(record)})")
    return dict(value)


def _form(record: dict) -> str:
    return "its codes alone (the set gives the scale)" if _given_scale(record) else _FORMS[record["format"]]


def _fitted(golden_shape: tuple, a: np.ndarray, where: str) -> np.ndarray:
    """`a` in the golden tensor's shape: equal, or equal once size-1 axes are dropped (vLLM's [tokens, 1]
    scales) or the last axes are flattened (a GGML row's blocks as one run of bytes)."""
    if a.shape == golden_shape:
        return a
    squeezed = tuple(n for n in a.shape if n != 1) == tuple(n for n in golden_shape if n != 1)
    blocks_flat = len(golden_shape) == 4 and a.shape == (*golden_shape[:2], golden_shape[2] * golden_shape[3])
    if squeezed or blocks_flat:
        return a.reshape(golden_shape)
    raise InputError(f"{where}: shape {list(a.shape)}, the golden store's is {list(golden_shape)}")


def candidate(golden: Any, record: dict, output: str, value: Any) -> dict[str, np.ndarray]:
    """The candidate tensors of one output's store ("q_rot", "k_rot"), named as the golden set's."""
    name = f"{output}.{record['name']}"
    out = {}
    for part, a in _parts(record, f"{name} (what the kernel returned)", value).items():
        tensor = name if part == "codes" else f"{name}.{part}"
        want = golden.info(tensor)
        a = np.ascontiguousarray(to_numpy(a))
        if a.dtype != DTYPES[want[0]]:
            raise InputError(f"{tensor}: dtype {a.dtype}, the store's {part} are {DTYPES[want[0]]}")
        a = _fitted(want[1], a, tensor)
        if part != "codes" and np.isnan(a.astype(np.float64)).any():
            # A NaN scale or bias leaves its whole group undefined: refused, as a NaN input is.
            first = tuple(int(i) for i in np.argwhere(np.isnan(a.astype(np.float64)))[0])
            raise InputError(f"{tensor}: NaN at {list(first)} (a store's {part} must be numbers)")
        out[tensor] = a
    return out


def outputs(golden: Any, record: dict) -> list[str]:
    """The golden store tensors of one store (its codes), manifest order: "q_rot.e4m3fn", "k_rot.e4m3fn"."""
    return [n for n in golden if golden.info(n)[2] == "store" and n.split(".", 1)[1] == record["name"]]
