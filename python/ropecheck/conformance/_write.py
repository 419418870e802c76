"""The matrix as files: matrix.json (everything), matrix.md (the tables the README shows) and
matrix.png (a class map; skipped, with the install line, where matplotlib is absent). Written into a
temporary folder beside the output and moved in at the end, so a failed run leaves no partial files."""
from __future__ import annotations

import json
import os
import shutil
import tempfile

from .. import _core
from ._run import Matrix

MATPLOTLIB_INSTALL = "pip install matplotlib==3.11.2"
# Strictest first, as the checker lists them (accuracy/ERROR_MODEL.md).
CLASS_ORDER = tuple(_core.accuracy_classes())  # strictest first, as the error model orders them


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _md(text: str) -> str:
    """Free text (reasons, diagnoses, titles) inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def markdown(m: Matrix) -> str:
    lines = [f"Conformance matrix, {m.date}: `{m.command}`", "",
             f"Golden inputs: positions `{m.positions}`, {m.heads} heads, seed {m.seed}. Versions: "
             + ", ".join(f"{k} {v}" for k, v in sorted(m.versions.items())) + "."
             + (f" Attention cells (`*-attention`): the outputs of the block `{m.attention_block}` (golden --attention), "
                "judged with the output classes (accuracy/ERROR_MODEL.md 16.4); for them the last column but one "
                "counts the outputs outside each stricter class." if m.attention_block else ""), ""]
    lines += ["| implementation | state | versions | install |", "|---|---|---|---|"]
    for a in m.adapters:
        state = "run" if a.state == "run" else f"**not run**: {_md(a.reason)}"
        if a.state == "carried":  # not installed here: its cells are an earlier run's
            state = f"carried over: {_md(a.reason)}"
        vers = ", ".join(f"{k} {v}" for k, v in a.versions.items())
        lines.append(f"| `{a.name}` ({_md(a.title)}) | {state} | {vers} | `{a.install}` |")
    lines += ["", "| implementation | model | dtype | verdict | strictest class held | expected | worst error / bound "
              "(expected class) | first violating position, stricter classes | diagnosis |", "|---|---|---|---|---|---|---|---|---|"]
    for c in m.cells:
        if c.is_declined() and c.dtype == "-":
            continue  # listed below, once per implementation and model
        stricter = []
        for name in CLASS_ORDER:
            info = c.classes.get(name)
            if info is None or name == c.strictest:
                break
            first = info["first_violating_position"]  # None for attention cells (judged per output)
            if first is None:  # attention: outputs outside the class, or none but saturated ones (not tested)
                first = f"({info['violations']} outputs)" if info["violations"] else f"(not tested: {info.get('saturated')} saturated)"
            stricter.append(f"{name} {first}")
        verdict = f"**{c.state}**" if c.state in ("fail", "error") else c.state
        if c.is_declined():
            verdict = "not-tested (declined)"
        if c.reason and c.state != "pass":
            verdict += f": {_md(c.reason)}"
        if c.note:
            verdict += f"; note: {_md(c.note)}"
        lines.append(f"| {c.impl} | {c.preset} | {c.dtype} | {verdict} | {c.strictest or '(none)' if c.classes else '-'} | "
                     f"{c.expected or '-'} | {_fmt(c.worst_score)} | {', '.join(stricter) or '-'} | {_md(c.diagnosis or '-')} |")
    na = [c for c in m.cells if c.is_declined() and c.dtype == "-"]
    if na:
        lines += ["", "Declined, not tested (the implementation cannot express the variant): "
                  + "; ".join(f"{c.impl} × {c.preset} ({_md(c.reason)})" for c in na) + "."]
    lines += store_table(m)
    lines += ["", f"Verdict: **{m.verdict()}**.", ""]
    return "\n".join(lines)


def _counts(c: dict[str, int]) -> str:
    return f"{c['passed']} / {c['failed']} / {c['not_tested']} of {c['count']}" if c else "-"


def store_table(m: Matrix) -> list[str]:
    """The quantized-store cells (_stores_run.py): per implementation, model and store the checker's
    counts of passed / failed / not tested codes and scale groups of k_rot's store."""
    run = [c for c in m.store_cells if c.store != "-"]
    declined = [c for c in m.store_cells if c.store == "-"]
    if not run and not declined:
        return []
    lines = ["", "Quantized stores (`k_rot` written by the implementation, judged by `ropecheck check` against "
             "`golden --stores`, accuracy/ERROR_MODEL.md 15; not tested: codes a correct kernel of the class may "
             "round either way, never passed):", "",
             "| implementation | model | store | verdict | class | codes passed / failed / not tested | "
             "scale groups passed / failed / not tested | note |", "|---|---|---|---|---|---|---|---|"]
    for c in run:
        verdict = f"**{c.state}**" if c.state in ("fail", "error") else c.state
        if c.declined:
            verdict = "not-tested (declined)"
        if c.state == "error" or (c.reason and not c.elements):
            verdict += f": {_md(c.reason)}"
        lines.append(f"| {c.impl} | {c.preset} | {c.store} | {verdict} | {c.expected or '-'} | {_counts(c.elements)} | "
                     f"{_counts(c.scale_groups)} | {_md(c.note or '-')} |")
    if declined:
        lines += ["", "Stores declined, not tested: " + "; ".join(
            f"{c.impl} × {c.preset} ({_md(c.reason)})" for c in declined) + "."]
    return lines


def plot(m: Matrix, path: str) -> str | None:
    """A class map: one row per implementation and model, one column per dtype, the colour the
    strictest class held. None when written, else why not."""
    cells = [c for c in m.cells if c.dtype != "-"]
    if not cells:
        return "plot skipped: no cell was run"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
    except ImportError:
        return f"plot skipped: matplotlib is not installed ({MATPLOTLIB_INSTALL})"
    rows = sorted({(c.impl, c.preset) for c in cells}, key=lambda r: (r[0], r[1]))
    cols = [d for d in ("f32", "f16", "bf16") if any(c.dtype == d for c in cells)]
    # 0..5 the classes, 6 no class held, 7 not judged
    none, not_run = len(CLASS_ORDER), len(CLASS_ORDER) + 1  # the two colours after the classes'
    grid = [[not_run] * len(cols) for _ in rows]
    text = [[""] * len(cols) for _ in rows]
    for c in cells:
        i, j = rows.index((c.impl, c.preset)), cols.index(c.dtype)
        if c.classes:
            grid[i][j] = CLASS_ORDER.index(c.strictest) if c.strictest else none
            text[i][j] = (c.strictest or "none") + ("" if c.state == "pass" else f" ({c.state})")
        else:
            text[i][j] = "declined" if c.is_declined() else c.state
    shades = ["#1a7f37", "#2da44e", "#6fdd8b", "#acf2bd", "#fff8c5", "#ffdf5d"]  # strictest class first
    colors = [shades[min(k, len(shades) - 1)] for k in range(len(CLASS_ORDER))] + ["#ff8182", "#eaeef2"]
    fig, ax = plt.subplots(figsize=(2.2 * len(cols) + 4, 0.32 * len(rows) + 1.2))
    ax.imshow(grid, cmap=ListedColormap(colors), vmin=0, vmax=not_run, aspect="auto")
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), [f"{r[0]}: {r[1]}" for r in rows], fontsize=7)
    for i in range(len(rows)):
        for j in range(len(cols)):
            ax.text(j, i, text[i][j], ha="center", va="center", fontsize=6)
    ax.set_title(f"strictest accuracy class held ({m.date})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def write(m: Matrix, out: str) -> list[str]:
    """matrix.json, matrix.md and matrix.png into `out` (created); returns notes (the plot skipped)."""
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".conformance-", dir=out)
    notes = []
    try:
        with open(os.path.join(tmp, "matrix.json"), "w") as f:
            json.dump(m.to_dict(), f, indent=1, sort_keys=True, allow_nan=False)
            f.write("\n")
        with open(os.path.join(tmp, "matrix.md"), "w") as f:
            f.write(markdown(m))
        names = ["matrix.json", "matrix.md"]
        skipped = plot(m, os.path.join(tmp, "matrix.png"))
        if skipped is None:
            names.append("matrix.png")
        else:
            if os.path.exists(os.path.join(out, "matrix.png")):
                os.remove(os.path.join(out, "matrix.png"))  # an earlier run's plot would not match
            notes.append(skipped)
        for n in names:
            os.replace(os.path.join(tmp, n), os.path.join(out, n))
    finally:
        shutil.rmtree(tmp, True)
    return notes
