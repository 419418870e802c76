"""Specs: presets, Hugging Face configs and spec JSON, resolved by the exact reference."""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Mapping

import numpy as np

from . import _core


def presets() -> list[str]:
    """The preset names (`ropecheck presets`)."""
    return list(_core.preset_names())


class Spec:
    """An encoding spec (core/SPEC_FORMAT.md). Build it with one of the class methods."""

    def __init__(self, core: _core.Spec):
        self._core = core

    @classmethod
    def from_preset(cls, name: str) -> "Spec":
        return cls(_core.load_preset(name))

    @classmethod
    def from_hf_config(cls, config: str | os.PathLike | Mapping[str, Any], *, layout: str | None = None,
                       layer_type: str = "full_attention", strict: bool = False) -> "Spec":
        """A Hugging Face config.json (a path, or the config as a dict). Keys that may concern RoPE
        but are not used are warnings (RuntimeWarning), errors with strict=True; a file is recorded
        by name and SHA-256, as `ropecheck --hf-config` records it."""
        if isinstance(config, Mapping):
            core, ignored = _core.hf_config_text(json.dumps(config), "hf-config", layout or "", layer_type, strict)
        else:
            core, ignored = _core.hf_config_file(os.fspath(config), layout or "", layer_type, strict)
        for message in ignored:
            warnings.warn(f"hf_config: {message}", RuntimeWarning, stacklevel=2)
        return cls(core)

    @classmethod
    def from_json(cls, spec: str | os.PathLike | Mapping[str, Any]) -> "Spec":
        """Spec JSON: a dict, JSON text (starting with "{" or "["), or a path to a file."""
        if isinstance(spec, Mapping):
            return cls(_core.spec_from_json(json.dumps(spec)))
        if isinstance(spec, str) and spec.lstrip()[:1] in ("{", "["):
            return cls(_core.spec_from_json(spec))
        return cls(_core.spec_from_file(os.fspath(spec)))

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def family(self) -> str:
        """"rope" or "sinusoidal"."""
        return self._core.family

    def to_json(self) -> str:
        return self._core.to_json()

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self._core.to_json())

    def resolve(self, seq_len: int | None = None, digits: int = 45) -> dict[str, Any]:
        """What `ropecheck spec --json` prints: frequencies and attention factor as decimal strings."""
        return json.loads(self._core.resolve(seq_len, digits))

    def inverse_frequencies(self, seq_len: int | None = None) -> np.ndarray:
        """The inverse frequency of every pair (RoPE) or w_i (sinusoidal), each the binary64 value
        nearest the exact one. seq_len: what dynamic NTK / LongRoPE are resolved with."""
        r = self.resolve(seq_len)
        values = r["inverse_frequencies"] if "inverse_frequencies" in r else r["frequencies"]
        return np.array([float(f) for f in values], dtype=np.float64)

    def attention_factor(self, seq_len: int | None = None) -> float:
        """The attention factor (RoPE; 1.0 for sinusoidal specs), nearest binary64."""
        r = self.resolve(seq_len)
        return float(r.get("attention_factor", "1"))

    def __repr__(self) -> str:
        return f"Spec({self.name!r}, {self.family})"
