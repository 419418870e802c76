"""drift(): the sweep as arrays, the same numbers `ropecheck drift` writes."""
from __future__ import annotations

import numpy as np
import pytest

import ropecheck
from conftest import run_cli

ARGS = dict(max_pos=4096, uniqueness=False)


@pytest.fixture(scope="module")
def sweep():
    return ropecheck.drift("llama-3.2-1b", ["builtin:hf", "builtin:accurate", "builtin:bf16-positions"], **ARGS)


def test_arrays_and_what_they_show(sweep):
    assert sweep.candidates == ["hf", "accurate", "bf16-positions"]
    p, hf = sweep.metric("hf")
    _, accurate = sweep.metric("accurate")
    assert p.dtype == np.int64 and p[0] == 0 and p[-1] == 4095 and np.all(np.diff(p) > 0)
    # an f32 angle drifts with position; the binary64 angle of `accurate` stays far below it
    assert hf[-1] > 1e-5 and accurate.max() < 1e-9
    _, bf16_pos = sweep.metric("bf16-positions")
    assert bf16_pos[p <= 256].max() < 1e-3 < bf16_pos.max()  # exact up to 256, whole radians after
    assert set(sweep.breakdown["class"]) >= {"exact", "fp32-angle"}


def test_same_files_as_the_cli(cli, sweep, tmp_path):
    p = run_cli(cli, "drift", "--preset", "llama-3.2-1b", "--recipes", "builtin:hf,builtin:accurate,builtin:bf16-positions", "--max-pos", "4096",
                "--no-uniqueness", "--no-plots", "--quiet", "--out", str(tmp_path / "d"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "d" / "positions.csv").read_text() == sweep.positions_csv
    assert (tmp_path / "d" / "bins.csv").read_text() == sweep.bins_csv
    assert (tmp_path / "d" / "breakdown.csv").read_text() == sweep.breakdown_csv


def test_old_recipe_spelling_warns_and_gives_the_same_sweep(sweep):
    with pytest.warns(FutureWarning, match="'hf' is spelled 'builtin:hf' now"):
        old = ropecheck.drift("llama-3.2-1b", ["hf", "builtin:accurate", "builtin:bf16-positions"], **ARGS)
    assert old.candidates == sweep.candidates and old.positions_csv == sweep.positions_csv


def test_optional_pandas_and_matplotlib(sweep):
    try:
        import pandas  # noqa: F401
        assert list(sweep.frame()["candidate"].unique()) == sweep.candidates
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            sweep.frame()
    try:
        import matplotlib
        matplotlib.use("Agg")
        assert len(sweep.plot().axes[0].lines) == 3
    except ImportError:
        with pytest.raises(ImportError, match="pip install matplotlib"):
            sweep.plot()


@pytest.mark.parametrize("kwargs, match", [
    (dict(recipes=["nope"]), "nope"),
    (dict(spec="transformer-base"), "RoPE only"),
    (dict(max_pos=0), "max"),
    (dict(dtype="f8"), "dtype"),
])
def test_bad_arguments(kwargs, match):
    args = dict(spec="llama-3.2-1b", recipes=["builtin:hf"], max_pos=64, uniqueness=False)
    args.update(kwargs)
    with pytest.raises(ropecheck.InputError, match=match):
        ropecheck.drift(**args)
