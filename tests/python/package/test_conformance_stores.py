"""The quantized-store cells of the conformance matrix (python/ropecheck/conformance/stores.py,
_stores_run.py): gguf-py's Q8_0 / Q4_0 and mlx_lm's QuantizedKVCache (both pinned or installed in CI)
on one small Llama-3.1-8B set with the checker's counts asserted; a mistaken quantizer fails its cell;
the Hugging Face numpy recipe equals the example's bit for bit; the cells reach the matrix files and
--keep-not-run carries them; torch-float8 (opt-in) is skipped with its install line where torch is
absent. The store cells write and judge through the package (no CLI needed)."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os

import numpy as np
import pytest

import ropecheck
from ropecheck import conformance
from ropecheck.conformance import _hf_numpy
from ropecheck.conformance._carry import keep_not_run
from ropecheck.conformance._run import AdapterRun
from ropecheck.conformance._stores_run import run_stores
from ropecheck.conformance.stores import GgufPy

from conftest import ROOT

POSITIONS = "0:16,log:131071:4"  # 94 tokens up to 131071, one head: 12032 codes per store

# Measured (mlx 0.32.4, mlx-lm 0.32.2, gguf 0.19.0; torch 2.15.0 + transformers 5.23.0 for torch-float8):
# codes passed / failed / not tested, scale groups passed / failed / not tested, under fp32-angle. The
# split between decided and undecidable codes is the golden set's (margins against the class's budget),
# so a correct implementation lands on these counts on any machine; a failure moves them.
MEASURED = {
    ("gguf-py", "q8_0"): ((9885, 0, 2147), (277, 0, 99)),
    ("gguf-py", "q4_0"): ((11083, 0, 949), (276, 0, 100)),
    ("mlx-lm-kv-cache", "int4g64"): ((9715, 0, 2317), (0, 0, 188)),
    ("mlx-lm-kv-cache", "int8g64"): ((7275, 0, 4757), (0, 0, 188)),
    ("torch-float8", "e4m3fn"): ((8663, 0, 3369), (0, 0, 94)),
}


def installed(name: str):
    adapter = conformance.adapters([name])[0]
    why = adapter.missing()
    if why:
        pytest.skip(f"{name} not run ({why}): {adapter.install}")
    return adapter


def counts(c: dict) -> tuple[int, int, int]:
    return c["passed"], c["failed"], c["not_tested"]


@pytest.mark.parametrize("impl", ["gguf-py", "mlx-lm-kv-cache", "torch-float8"])
def test_store_cells_measured(impl):
    adapter = installed(impl)
    cells = run_stores([adapter], ["llama-3.1-8b"], positions=POSITIONS, heads=1, seed=0)
    assert [c.store for c in cells] == list(adapter.stores)
    for c in cells:
        elements, groups = MEASURED[(impl, c.store)]
        assert (c.state, c.expected, c.tensor) == ("not-tested", "fp32-angle", f"k_rot.{c.store}"), c
        assert (counts(c.elements), counts(c.scale_groups)) == (elements, groups), c


class _F16ScaleQ8(GgufPy):
    """A q8_0 port that computes its codes with the f16 d the block stores instead of ggml's binary32
    d (x / f16(d)): a rounding difference from the owner's definition."""
    name = "q8_0-f16-scale"
    stores = ("q8_0",)

    def quantize(self, golden):
        out = super().quantize(golden)
        blocks = out["k_rot.q8_0"].copy()
        d16 = blocks[..., :2].copy().view(np.float16)
        from ropecheck.conformance.stores import _hf_keys

        kr, _ = _hf_keys(golden)
        x = kr.reshape(blocks.shape[:-1] + (32,))
        codes = np.clip(np.round(x / d16.astype(np.float32)), -127, 127).astype(np.int8)
        blocks[..., 2:] = codes.view(np.uint8)
        return {"k_rot.q8_0": blocks}


def test_a_mistaken_quantizer_fails_its_cell():
    installed("gguf-py")
    cell, = run_stores([_F16ScaleQ8()], ["llama-3.1-8b"], positions=POSITIONS, heads=1, seed=0)
    assert cell.state == "fail" and cell.elements["failed"] > 0, cell


def _example():
    path = os.path.join(ROOT, "examples", "pytorch_users", "hf_rope_numpy.py")
    spec = importlib.util.spec_from_file_location("_hf_rope_numpy_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "gemma-3-4b-global", "llama-2-7b"])
def test_hf_numpy_recipe_is_the_examples(preset):
    ex = _example()
    rope = ropecheck.Spec.from_preset(preset).to_dict()["rope"]
    rope_ex = {**rope, "rotary_dim": rope.get("rotary_dim") or rope["head_dim"]}
    positions = np.array([0, 1, 4095, 8191, 131071])
    x = np.random.default_rng(1).standard_normal((5, 2, rope["head_dim"])).astype(np.float32)
    w, att = ex.hf_inv_freq(rope_ex)
    cos, sin = ex.hf_cos_sin(w, att, positions, np.dtype(np.float32))
    want = ex.hf_apply(x, cos, sin, rope_ex["rotary_dim"])
    assert np.array_equal(_hf_numpy.rotate(rope, positions, x).view(np.uint32), want.view(np.uint32))


def test_store_cells_reach_the_matrix_and_are_carried(tmp_path):
    adapter = installed("gguf-py")
    m = conformance.run([adapter], ["llama-3.1-8b", "qwen2.5-7b-yarn"], positions=POSITIONS, heads=1)
    assert [(c.preset, c.store, c.declined) for c in m.store_cells] == [
        ("llama-3.1-8b", "q8_0", False), ("llama-3.1-8b", "q4_0", False), ("qwen2.5-7b-yarn", "-", True)]
    assert m.verdict() == "not-tested"  # undecidable codes: never passed
    m.date = "2026-11-28"
    conformance.write(m, str(tmp_path))
    text = (tmp_path / "matrix.md").read_text()
    assert ("| gguf-py | llama-3.1-8b | q8_0 | not-tested | fp32-angle | 9885 / 0 / 2147 of 12032 | "
            "277 / 0 / 99 of 376 |") in text
    assert "gguf-py × qwen2.5-7b-yarn (scaling 'yarn'" in text
    saved = json.loads((tmp_path / "matrix.json").read_text())["store_cells"]
    assert [c["store"] for c in saved] == ["q8_0", "q4_0", "-"]
    later = conformance.Matrix(POSITIONS, 1, 0, [AdapterRun("gguf-py", adapter.title, "not-run", "")],
                               [], {})
    notes = keep_not_run(later, str(tmp_path), ["llama-3.1-8b"])
    assert notes and "2 cells carried" in notes[0]
    assert [(c.store, c.elements["passed"]) for c in later.store_cells] == [("q8_0", 9885), ("q4_0", 11083)]

