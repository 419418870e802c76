"""KV-cache writes from Python (golden/GOLDEN_FORMAT.md, "KV-cache writes"): the metadata a fused
"RoPE + append" kernel is given, a sentinel-filled cache for it to write into, and what it wrote turned
into the tensors `ropecheck check --kv-cache` reads from a file (k_cache, v_cache, sentinel, the
kernel's own metadata). The verdict is the C++ KV-cache checker's (checker/kv_cache.hpp)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ._arrays import DTYPES, InputError, dtype_name, to_numpy

# The tensors a candidate cache may carry (checker/kv_cache.hpp, read_kv_cache_candidate).
NAMES = ("k_cache", "v_cache", "sentinel", "kv_indptr", "kv_indices", "kv_last_page_len", "slot_mapping")
_METADATA = ("batch_indices", "append_indptr", "seq_lens", "kv_indptr", "kv_indices", "kv_last_page_len", "slot_mapping")


class KvCache:
    """One append step's cache for a kernel to write (the set's manifest record `kv_cache`): the
    metadata as NumPy arrays (FlashInfer's kv_indptr / kv_indices / kv_last_page_len / batch_indices /
    append_indptr, vLLM's slot_mapping; None where the cache kind has none), the page table, and
    k_cache / v_cache in `dtype`, every element the sentinel (default: all bytes 0xFF, a NaN), shaped
    [pages, page_size, heads, head_dim] (NHD, and slot-mapped) or [pages, heads, page_size, head_dim]
    (HND). Write the appended tokens' rotated k and their v into them."""

    def __init__(self, golden: Any, dtype: str, sentinel: float | None = None):
        record = golden.manifest.get("kv_cache")
        if record is None:
            raise InputError("kv_cache: this golden set was not written with --kv-cache")
        if dtype not in golden.dtypes:
            raise InputError(f"kv_cache: dtype '{dtype}' is not an output dtype of this golden set "
                             f"({', '.join(golden.dtypes)})")
        self.dtype = dtype
        self.cache: str = record["cache"]
        self.layout: str = record["layout"]
        self.page_size: int = record["page_size"]
        self.pages: int = record["pages"]
        self.page_table: list[list[int]] = record["page_table"]
        self.sequences: list[dict] = record["sequences"]
        self.positions: np.ndarray = golden["positions"]
        for name in _METADATA:
            setattr(self, name, golden[name] if name in golden else None)
        heads, head_dim = golden.heads, golden.spec.to_dict()["rope"]["head_dim"]
        shape = ((self.pages, self.page_size, heads, head_dim) if self.layout == "NHD"
                 else (self.pages, heads, self.page_size, head_dim))
        dt = DTYPES[dtype]
        self.sentinel_declared = sentinel is not None
        self.sentinel = (np.frombuffer(b"\xff" * dt.itemsize, dtype=dt).copy() if sentinel is None
                         else np.array([sentinel], dtype=dt))
        # Filled bit for bit (a NaN sentinel keeps its pattern).
        n = int(np.prod(shape))
        self.k_cache = np.tile(self.sentinel.view(np.uint8), n).view(dt).reshape(shape)
        self.v_cache = self.k_cache.copy()

    def __repr__(self) -> str:
        return (f"<ropecheck.KvCache {self.cache} {self.layout} {self.dtype}: {self.pages} pages x page_size "
                f"{self.page_size}, {len(self.positions)} tokens appended>")


def _tensor(name: str, value: Any) -> tuple:
    a = np.ascontiguousarray(to_numpy(value))
    if name == "sentinel":
        a = a.reshape(1)
    return (name, dtype_name(a), list(a.shape), a.reshape(-1).view(np.uint8))


def candidate_tensors(cache: KvCache | None, written: Any) -> list[tuple]:
    """The tensors of a written cache: `written` a mapping of NAMES (the arrays a kernel wrote, with its
    own metadata if it used its own), an array (k_cache), (k_cache, v_cache), or None (the KvCache the
    kernel wrote into, in place: both of its caches)."""
    if written is None:
        if cache is None:
            raise InputError("kv_cache: nothing to check")
        written = {"k_cache": cache.k_cache, "v_cache": cache.v_cache}
    elif isinstance(written, (tuple, list)):
        if len(written) != 2:
            raise InputError(f"kv_cache: expected k_cache or (k_cache, v_cache), got {len(written)} arrays")
        written = {"k_cache": written[0], "v_cache": written[1]}
    elif not isinstance(written, Mapping):
        written = {"k_cache": written}
    unknown = [n for n in written if n not in NAMES]
    if unknown:
        raise InputError(f"kv_cache: unknown tensor {unknown[0]!r} (known: {', '.join(NAMES)})")
    written = dict(written)
    if cache is not None and cache.sentinel_declared and "sentinel" not in written:
        written["sentinel"] = cache.sentinel
    return [_tensor(n, v) for n, v in written.items()]


def run_kernel(golden: Any, fn: Callable, dtype: str, sentinel: float | None) -> list[tuple]:
    """fn(q, k, v, positions, cache) on the golden inputs in `dtype` (exact: bf16 values), `cache` a
    fresh KvCache; it writes into cache.k_cache / cache.v_cache and returns None, or returns what it
    wrote (candidate_tensors)."""
    cache = KvCache(golden, dtype, sentinel)
    dt = DTYPES[dtype]
    result = fn(golden["q"].astype(dt), golden["k"].astype(dt), golden["v"].astype(dt), golden["positions"], cache)
    return candidate_tensors(cache, result)
