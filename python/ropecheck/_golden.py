"""Golden sets: written by the library's golden writer (the one `ropecheck golden` uses), held as
NumPy arrays, saved byte-identical to the CLI's, loaded from a folder."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from typing import Iterable, Iterator, Mapping

import numpy as np

from . import _core, _stores
from ._arrays import DTYPES
from ._kv_cache import KvCache
from ._spec import Spec


class Golden(Mapping[str, np.ndarray]):
    """A golden set (golden/GOLDEN_FORMAT.md): a mapping from tensor name ("q", "k", "positions",
    "q_rot.bf16", "cos.f64", ...) to a read-only NumPy array (bf16 as ml_dtypes.bfloat16)."""

    def __init__(self, core: _core.GoldenSet, owned_dir: str | None = None):
        self._core = core
        self._info = {name: (dtype, tuple(shape), role) for name, dtype, shape, role in core.tensors()}
        self._cache: dict[str, np.ndarray] = {}
        if owned_dir is not None:  # a set made by golden(): its private folder goes with the object
            self._finalizer = weakref.finalize(self, shutil.rmtree, owned_dir, True)

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._info:
            raise KeyError(name)
        if name not in self._cache:
            dtype, shape, _ = self._info[name]
            a = self._core.tensor_bytes(name).view(DTYPES[dtype]).reshape(shape)
            a.flags.writeable = False
            self._cache[name] = a
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._info)

    def __len__(self) -> int:
        return len(self._info)

    def info(self, name: str) -> tuple[str, tuple, str]:
        """(dtype, shape, role) of a tensor of the set: role "input", "output", "store", "kv_cache", ..."""
        if name not in self._info:
            raise KeyError(name)
        return self._info[name]

    @property
    def stores(self) -> dict[str, dict]:
        """The quantized stores (`golden --stores`) by name ("e4m3fn", "q8_0", "int4g64"): the manifest's
        records (format, overflow, scale, group_size, scale_dtype, ...); empty for a set without."""
        return _stores.records(self.manifest)

    def store(self, output: str, name: str | None = None) -> dict[str, np.ndarray]:
        """One output's store ("q_rot" or "k_rot"; the store's name, default the set's only one) as its parts: "codes" (float8_e4m3fn /
        float8_e5m2, the GGML blocks' uint8 bytes, MLX's uint32 words), "scale" (FP8), "scales" and
        "biases" (MLX), and each "margin" / "scale_margin" / "decision_margin" the set carries."""
        record = _stores.pick(self.manifest, name)
        base = f"{output}.{record['name']}"
        if base not in self._info:
            raise KeyError(base)
        parts = {"codes": self[base]}
        parts.update({n[len(base) + 1:]: self[n] for n in self._info if n.startswith(base + ".")})
        return parts

    def kv_cache(self, dtype: str, sentinel: float | None = None) -> KvCache:
        """A set written with --kv-cache: its metadata and a fresh cache in `dtype` (one of the set's
        dtypes), every element the sentinel (default: bytes 0xFF, a NaN), for a kernel to write into."""
        return KvCache(self, dtype, sentinel)

    @property
    def q_norm(self) -> dict | None:
        """The spec's Q RMSNorm (eps, weight_form "w" / "1+w", weight as float32 [head_dim]), applied
        before the rotation; None without."""
        return self._norm("q_norm")

    @property
    def k_norm(self) -> dict | None:
        """The spec's K RMSNorm, as q_norm."""
        return self._norm("k_norm")

    def _norm(self, key: str) -> dict | None:
        n = self.spec.to_dict().get("rope", {}).get(key)
        if n is None:
            return None
        return dict(n, weight=np.array(n["weight"], dtype=np.float32))

    @property
    def rotary_offset(self) -> int:
        """MLA: the first rotated channel of each q head (DeepSeek's q_pe after q_nope); 0 otherwise."""
        return int(self.spec.to_dict().get("rope", {}).get("rotary_offset", 0))

    @property
    def spec(self) -> Spec:
        return Spec(self._core.spec)

    @property
    def manifest(self) -> dict:
        return json.loads(self._core.manifest)

    @property
    def dtypes(self) -> list[str]:
        """The output dtypes, "f64" first."""
        return list(self._core.dtypes)

    @property
    def outputs(self) -> list[str]:
        return [n for n, (_, _, role) in self._info.items() if role == "output"]

    @property
    def tokens(self) -> int:
        return self._core.tokens

    @property
    def heads(self) -> int:
        return self._core.heads

    @property
    def attention_factor(self) -> float:
        return self._core.attention_factor

    @property
    def dir(self) -> str:
        """The folder the set's files are in (private to this object for sets made by golden())."""
        return self._core.dir

    def save(self, dir: str | os.PathLike, overwrite: bool = False) -> None:
        """Writes the set to `dir`, atomically: the same bytes `ropecheck golden` writes."""
        _core.save_golden(self._core, os.fspath(dir), overwrite)

    def __repr__(self) -> str:
        return f"<ropecheck.Golden {self._core.spec.name}: {self.tokens} tokens, dtypes {', '.join(self.dtypes)}>"


def _positions_argument(positions: str | int | Iterable[int]) -> str:
    if isinstance(positions, str):
        return positions
    if isinstance(positions, (int, np.integer)):
        return str(int(positions))
    return ",".join(str(int(p)) for p in positions)


def golden(spec: Spec | str, positions: str | int | Iterable[int] | None = None, heads: int = 1,
           dtypes: Iterable[str] = ("f32", "f16", "bf16"), seed: int = 0, *, seq_len: int | None = None,
           format: str = "safetensors", threads: int = 0, max_memory: int | str = 0,
           scores: str | None = None, attention: str | None = None, softcap: float | None = None,
           sinks: bool = False, stores: str | Iterable[str] | None = None,
           kv_cache: Mapping | str | os.PathLike | None = None) -> Golden:
    """Golden tensors for `spec` (a Spec or a preset name), as `ropecheck golden --positions ...
    --heads ... --dtypes ... --seed ... [--scores PAIRS] [--attention BLOCK] [--softcap CAP] [--sinks]`
    makes them. positions: the CLI's syntax ("0:4096", "log:131071:8", "1,7,4095") or integers; scores: a
    pair set ("causal:0:64"), whose attention scores are then the tensors "score_positions", "score_q",
    "score_k", "scores.<dtype>"; attention: a block ("causal:0:64", "causal:S:N:W", "full:S:N"), whose
    outputs are then "attention_out.<dtype>" beside its inputs "attention_positions", "attention_q",
    "attention_k", "attention_v" (and "attention_sinks" with sinks); softcap: the logits' soft-cap.
    stores: `--stores LIST` ("e4m3fn,q8_0" or a list): quantized stores of q_rot / k_rot (Golden.stores,
    Golden.store). kv_cache: `--kv-cache FILE`, the description as a dict or a JSON file's path, instead
    of positions: one append step to a KV cache (Golden.kv_cache)."""
    if isinstance(spec, str):
        spec = Spec.from_preset(spec)
    if isinstance(dtypes, str):
        dtypes = dtypes.split(",")
    if isinstance(max_memory, str):
        parsed = _core.parse_byte_size(max_memory)
        if parsed is None:
            raise _core.SpecError(f"max_memory: not a size: '{max_memory}' (e.g. 64G, 512M)")
        max_memory = parsed
    if not isinstance(stores, (str, type(None))):
        stores = ",".join(stores)
    if kv_cache is not None and not isinstance(kv_cache, Mapping):
        with open(os.fspath(kv_cache), encoding="utf-8") as f:
            kv_cache = json.load(f)
    tmp = tempfile.mkdtemp(prefix="ropecheck-golden-")
    try:
        out = os.path.join(tmp, "set")
        _core.write_golden(spec._core, "" if positions is None else _positions_argument(positions), out, list(dtypes),
                           heads, seed, format, seq_len, threads, False, max_memory, scores or "", attention or "", softcap,
                           sinks, stores or "", json.dumps(kv_cache) if kv_cache is not None else "")
        return Golden(_core.load_golden(out), owned_dir=tmp)
    except BaseException:
        shutil.rmtree(tmp, True)
        raise


def load(dir: str | os.PathLike) -> Golden:
    """A golden set folder written by `ropecheck golden` or Golden.save (manifest and hashes verified)."""
    return Golden(_core.load_golden(os.fspath(dir)))
