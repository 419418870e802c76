"""drift(): `ropecheck drift`'s sweep of recipes (or kernel plugins) against the exact reference, as
NumPy arrays (a pandas DataFrame when pandas is installed, matplotlib figures when matplotlib is)."""
from __future__ import annotations

import csv
import io
import json
import warnings
from typing import Iterable

import numpy as np

from . import _core
from ._spec import Spec


def _columns(text: str) -> dict[str, np.ndarray]:
    """A CSV (drift/DRIFT.md's columns) as one array per column: numbers as float64 (empty: NaN)
    or int64, text as str."""
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    out: dict[str, np.ndarray] = {}
    for i, name in enumerate(header):
        values = [r[i] for r in body]
        try:
            ints = [int(v) for v in values]
            out[name] = np.array(ints, dtype=np.int64)
            continue
        except ValueError:
            pass
        try:
            out[name] = np.array([float(v) if v != "" else np.nan for v in values], dtype=np.float64)
        except ValueError:
            out[name] = np.array(values, dtype=str)
    return out


class Drift:
    """A drift sweep: `positions` (per candidate and sampled position), `bins` (per position bin),
    `breakdown` (first position each class breaks, per candidate) as dicts of column arrays, named as
    the CSV files `ropecheck drift` writes (drift/DRIFT.md); `json` is its drift.json, `summary` its
    summary.md."""

    def __init__(self, out: _core.DriftOutput):
        self.json: dict = json.loads(out.json)
        self.summary: str = out.summary
        self.positions_csv, self.bins_csv, self.breakdown_csv = out.positions_csv, out.bins_csv, out.breakdown_csv
        self.positions = _columns(out.positions_csv)
        self.bins = _columns(out.bins_csv)
        self.breakdown = _columns(out.breakdown_csv)
        self.candidates: list[str] = list(dict.fromkeys(self.positions["candidate"].tolist()))
        # Per candidate and class: "breakdown", "never" or "not-tested" (no breakdown before the class's
        # bound saturates, so "never" cannot be claimed: drift.json's breakdown[class].state).
        self.breakdown_state: dict[str, dict[str, str]] = {
            c["name"]: {k: v["state"] for k, v in c["breakdown"].items()} for c in self.json["candidates"]}

    def metric(self, candidate: str, column: str = "angle_err_max") -> tuple[np.ndarray, np.ndarray]:
        """(sampled positions, the column's values) of one candidate."""
        sel = self.positions["candidate"] == candidate
        if not sel.any():
            raise KeyError(candidate)
        return self.positions["position"][sel], self.positions[column][sel]

    def frame(self, table: str = "positions"):
        """The table ("positions", "bins", "breakdown") as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Drift.frame needs pandas: pip install pandas") from e
        return pd.read_csv(io.StringIO(getattr(self, f"{table}_csv")))

    def plot(self, column: str = "angle_err_max"):
        """A matplotlib figure of `column` against position, one line per candidate, log-log (needs
        matplotlib)."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("Drift.plot needs matplotlib: pip install matplotlib") from e
        fig, ax = plt.subplots()
        for c in self.candidates:
            p, v = self.metric(c, column)
            ax.plot(p[p > 0], v[p > 0], label=c)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("position")
        ax.set_ylabel(column)
        ax.legend()
        return fig

    def __str__(self) -> str:
        return self.summary


def drift(spec: Spec | str, recipes: Iterable[str] = ("builtin:hf", "builtin:accurate"), *, dtype: str = "bf16", max_pos: int = 131072,
          heads: int = 4, seed: int = 0, uniqueness: bool = True, window: int = 256, per_octave: int = 64,
          seq_len: int | None = None, threads: int = 0, max_memory: int = 0) -> Drift:
    """`ropecheck drift --recipes ...` for `spec` (a Spec or a preset name): every kernel (builtin:RECIPE,
    cuda:RECIPE or plugin:LIB.so, as `ropecheck check --kernel` names them) measured against the exact
    reference at positions 0..max_pos-1 (dense windows and log-spaced between), stored in `dtype`. An
    old spelling (a bare recipe name) still works, with a FutureWarning."""
    if isinstance(spec, str):
        spec = Spec.from_preset(spec)
    recipes = [recipes] if isinstance(recipes, str) else list(recipes)
    for name in recipes:
        _, deprecation = _core.kernel_name(name, "recipes")
        if deprecation:
            warnings.warn(f"ropecheck.drift: {deprecation}", FutureWarning, stacklevel=2)
    command = f"ropecheck.drift({spec.name!r}, {recipes!r}, dtype={dtype!r}, max_pos={max_pos})"
    return Drift(_core.drift(spec._core, recipes, dtype, max_pos, heads, seed, uniqueness, window, per_octave, seq_len,
                             threads, max_memory, command))
