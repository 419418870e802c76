"""--keep-not-run: the published matrix holds implementations that need packages one machine rarely
has all of (torch, Keras, MLX). A run where some of them are not installed takes their rows and cells
from the earlier matrix.json in the output folder instead of dropping them, marked with the date they
were measured; only when that matrix was made on the same golden inputs, and only for the presets of
this run."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from ._run import AdapterRun, Cell, Matrix
from ._stores_run import StoreCell


def _known(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """The keys of `d` that `cls` has as fields (a matrix.json from an older ropecheck may lack some)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def keep_not_run(m: Matrix, out: str, presets: list[str]) -> list[str]:
    """Replaces every not-run adapter of `m` that out/matrix.json ran (or carried) by its row and cells
    there; returns notes (what was carried, or why nothing was)."""
    path = os.path.join(out, "matrix.json")
    missing = [a for a in m.adapters if a.state == "not-run"]
    if not missing:
        return []
    if not os.path.exists(path):
        return [f"--keep-not-run: no {path}, nothing carried"]
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError) as e:
        return [f"--keep-not-run: {path} unreadable ({e}), nothing carried"]
    inputs = (old.get("positions"), old.get("heads"), old.get("seed"))
    if inputs != (m.positions, m.heads, m.seed):
        return [f"--keep-not-run: {path} was made on other golden inputs (positions, heads, seed {inputs}), "
                "nothing carried"]
    rows = {a["name"]: a for a in old.get("adapters", [])}
    notes = []
    for i, a in enumerate(m.adapters):
        row = rows.get(a.name)
        if a.state != "not-run" or row is None or row["state"] not in ("run", "carried"):
            continue
        since = row.get("carried_from") or old.get("date", "")
        m.adapters[i] = AdapterRun(**{**_known(AdapterRun, row), "state": "carried", "carried_from": since,
                                      "reason": f"not installed here ({a.reason}); cells measured on {since}",
                                      "requested": a.requested})
        cells = [Cell(**_known(Cell, c)) for c in old.get("cells", [])
                 if c["impl"] == a.name and c["preset"] in presets]
        m.cells.extend(cells)
        stores = [StoreCell(**_known(StoreCell, c)) for c in old.get("store_cells", [])
                  if c["impl"] == a.name and c["preset"] in presets]
        m.store_cells.extend(stores)
        notes.append(f"{a.name}: not installed, {len(cells) + len(stores)} cells carried from {path} (measured on {since})")
    order = {p: i for i, p in enumerate(presets)}
    impl = {a.name: i for i, a in enumerate(m.adapters)}
    m.cells.sort(key=lambda c: (order.get(c.preset, len(order)), impl.get(c.impl, len(impl))))
    m.store_cells.sort(key=lambda c: (order.get(c.preset, len(order)), impl.get(c.impl, len(impl))))
    return notes
