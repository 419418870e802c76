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

from . import _core
from ._arrays import DTYPES
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


def golden(spec: Spec | str, positions: str | int | Iterable[int], heads: int = 1,
           dtypes: Iterable[str] = ("f32", "f16", "bf16"), seed: int = 0, *, seq_len: int | None = None,
           format: str = "safetensors", threads: int = 0, max_memory: int | str = 0,
           scores: str | None = None, attention: str | None = None, softcap: float | None = None,
           sinks: bool = False) -> Golden:
    """Golden tensors for `spec` (a Spec or a preset name), as `ropecheck golden --positions ...
    --heads ... --dtypes ... --seed ... [--scores PAIRS] [--attention BLOCK] [--softcap CAP] [--sinks]`
    makes them. positions: the CLI's syntax ("0:4096", "log:131071:8", "1,7,4095") or integers; scores: a
    pair set ("causal:0:64"), whose attention scores are then the tensors "score_positions", "score_q",
    "score_k", "scores.<dtype>"; attention: a block ("causal:0:64", "causal:S:N:W", "full:S:N"), whose
    outputs are then "attention_out.<dtype>" beside its inputs "attention_positions", "attention_q",
    "attention_k", "attention_v" (and "attention_sinks" with sinks); softcap: the logits' soft-cap."""
    if isinstance(spec, str):
        spec = Spec.from_preset(spec)
    if isinstance(dtypes, str):
        dtypes = dtypes.split(",")
    if isinstance(max_memory, str):
        parsed = _core.parse_byte_size(max_memory)
        if parsed is None:
            raise _core.SpecError(f"max_memory: not a size: '{max_memory}' (e.g. 64G, 512M)")
        max_memory = parsed
    tmp = tempfile.mkdtemp(prefix="ropecheck-golden-")
    try:
        out = os.path.join(tmp, "set")
        _core.write_golden(spec._core, _positions_argument(positions), out, list(dtypes), heads, seed, format,
                           seq_len, threads, False, max_memory, scores or "", attention or "", softcap, sinks)
        return Golden(_core.load_golden(out), owned_dir=tmp)
    except BaseException:
        shutil.rmtree(tmp, True)
        raise


def load(dir: str | os.PathLike) -> Golden:
    """A golden set folder written by `ropecheck golden` or Golden.save (manifest and hashes verified)."""
    return Golden(_core.load_golden(os.fspath(dir)))
