"""The MLX adapters (python/ropecheck/conformance/mlx.py): measured classes asserted per cell, the two
mlx_lm differences from Hugging Face that conformance/FINDINGS.md writes up, and the adapter's
reading of `freqs` given teeth. mlx and mlx-cpu are pinned in tests/python/requirements.txt, so
`mlx-fast-rope` runs in CI; `mlx-lm` runs where mlx-lm is installed (without its dependencies: the
adapter's install line) and is skipped with that line otherwise."""
from __future__ import annotations

import math
import types

import pytest

import ropecheck
from ropecheck import conformance
from ropecheck.conformance import Adapter

POSITIONS = "0:64,log:131071:4"  # as test_conformance.py: positions up to 131071, one head


def needs(name: str) -> Adapter:
    adapter = conformance.adapters([name])[0]
    why = adapter.missing()
    if why:
        pytest.skip(f"{name} not installed ({why}): {adapter.install}")
    return adapter


@pytest.fixture(scope="module")
def golden_sets():
    cache: dict[tuple[str, str], ropecheck.Golden] = {}

    def get(preset: str, positions: str = POSITIONS) -> ropecheck.Golden:
        if (preset, positions) not in cache:
            cache[preset, positions] = ropecheck.golden(preset, positions=positions, heads=1,
                                                        dtypes=("f32", "f16", "bf16"))
        return cache[preset, positions]
    return get


def cell(adapter: Adapter, g: ropecheck.Golden, dtype: str) -> dict:
    q_rot, k_rot = adapter.run(g, dtype)
    return conformance.judge(g, dtype, q_rot, k_rot, adapter.expected_class(g.spec.to_dict(), dtype))


# Measured with mlx 0.32.4 + mlx-cpu 0.32.4 (and mlx-lm 0.32.2): strictest class and worst error /
# bound of the expected class (to 2 digits). Each row exercises another path: base (the operator's own
# inverse frequencies), scale (linear), freqs (llama3, YaRN, LongRoPE), interleaved pairs (traditional),
# partial rotary, the attention factor applied to the input, per-example offset vectors (fast-rope) and
# integer offsets over contiguous runs (mlx-lm).
MLX_MEASURED = {
    ("mlx-fast-rope", "llama-3.1-8b", "f32"): ("fp32-angle", 0.20),
    ("mlx-fast-rope", "gemma-3-4b-global", "bf16"): ("bf16-table", 0.44),
    ("mlx-fast-rope", "gpt-j-6b", "f16"): ("f16-table", 0.42),
    ("mlx-fast-rope", "phi-3.5-mini", "f16"): ("f16-table", 0.58),
    ("mlx-fast-rope", "gpt-oss-20b", "bf16"): ("bf16-table", 0.71),
    ("mlx-lm", "llama-3.1-8b", "bf16"): ("bf16-table", 0.49),
    ("mlx-lm", "qwen2.5-7b-yarn", "f32"): ("fp32-angle", 0.29),
    ("mlx-lm", "deepseek-v3", "f32"): ("fp32-angle", 0.21),
    ("mlx-lm", "phi-3.5-mini", "bf16"): ("bf16-table", 0.67),
    ("mlx-lm", "gpt-neox-20b", "f16"): ("f16-table", 0.43),
}


@pytest.mark.parametrize("impl,preset,dtype", sorted(MLX_MEASURED))
def test_mlx_measured_classes(impl, preset, dtype, golden_sets):
    adapter = needs(impl)
    strictest, score = MLX_MEASURED[(impl, preset, dtype)]
    c = cell(adapter, golden_sets(preset), dtype)
    assert (c["state"], c["strictest"]) == ("pass", strictest), c
    assert c["worst_score"] == pytest.approx(score, abs=0.01)
    assert c["diagnosis"] is None


@pytest.mark.parametrize("impl", ["mlx-fast-rope", "mlx-lm"])
def test_mlx_mrope_is_not_applicable(impl):
    adapter = conformance.adapters([impl])[0]  # supports() imports nothing
    assert adapter.supports(ropecheck.Spec.from_preset("qwen2-vl-7b").to_dict()).startswith("mrope: ")
    assert adapter.supports(ropecheck.Spec.from_preset("llama-3.1-8b").to_dict()) is None


def test_mlx_fast_rope_freqs_are_periods_not_inverse_frequencies(golden_sets, monkeypatch):
    """The adapter's wiring has teeth: `freqs` given the inverse frequencies (the tempting reading of
    "frequencies") fails from position 1 on."""
    from ropecheck.conformance import mlx as mlx_adapter

    adapter = needs("mlx-fast-rope")
    exact = mlx_adapter.periods
    monkeypatch.setattr(mlx_adapter, "periods", lambda g: 1.0 / exact(g))
    c = cell(adapter, golden_sets("llama-3.1-8b"), "f32")
    assert (c["state"], c["strictest"]) == ("fail", None), c
    assert c["classes"]["bf16-table"]["first_violating_position"] == 1


def test_mlx_lm_gpt_oss_drops_yarn_truncate(golden_sets):
    """FINDINGS.md: mlx_lm's YarnRoPE rounds the correction range although gpt-oss says truncate:
    false. The cell fails and the diagnosis names the mistake; with the rounding taken out of
    rope_utils (floor / ceil the identity) the same classes land in fp32-angle."""
    adapter = needs("mlx-lm")
    g = golden_sets("gpt-oss-20b")
    c = cell(adapter, g, "f32")
    assert (c["state"], c["strictest"], c["diagnosis_match"]) == ("fail", None, "yarn-truncate-flipped"), c
    assert c["classes"]["fp32-angle"]["first_violating_position"] == 1
    ru = adapter._rope_utils
    untruncated = types.SimpleNamespace(**{n: getattr(math, n) for n in dir(math) if not n.startswith("_")})
    untruncated.floor = untruncated.ceil = lambda v: v
    real, ru.math = ru.math, untruncated
    try:
        c = cell(adapter, g, "f32")
    finally:
        ru.math = real
    assert (c["state"], c["strictest"]) == ("pass", "fp32-angle"), c


def test_mlx_lm_longrope_uses_long_factors_at_every_length(golden_sets):
    """FINDINGS.md: inside original_max_position_embeddings (seq_len 4096) Hugging Face rotates with
    short_factor; mlx_lm's SuScaledRoPE still uses long_factor and fails from position 1, where the
    operator given the short factors' periods holds its class."""
    g = golden_sets("phi-3.5-mini", "0:64,log:4095:4")
    assert g.manifest["seq_len"] == 4096
    c = cell(needs("mlx-lm"), g, "f32")
    assert (c["state"], c["strictest"]) == ("fail", None), c
    assert c["classes"]["fp32-angle"]["first_violating_position"] == 1
    c = cell(needs("mlx-fast-rope"), g, "f32")
    assert (c["state"], c["strictest"]) == ("pass", "fp32-angle"), c
