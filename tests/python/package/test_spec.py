"""Spec: presets, Hugging Face configs, spec JSON; frequencies and attention factor; errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ropecheck
from conftest import run_cli

LLAMA31_CONFIG = {
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}


def test_presets_match_the_cli(cli):
    names = ropecheck.presets()
    assert "llama-3.1-8b" in names and len(names) == 22
    listed = [line.split()[0] for line in run_cli(cli, "presets").stdout.splitlines()[1:]]
    assert names == listed


def test_inverse_frequencies_are_the_cli_values_rounded_once(cli):
    spec = ropecheck.Spec.from_preset("llama-3.1-8b")
    w = spec.inverse_frequencies()
    assert w.dtype == np.float64 and w.shape == (64,)
    printed = json.loads(run_cli(cli, "spec", "--preset", "llama-3.1-8b", "--json").stdout)
    assert w.tolist() == [float(s) for s in printed["inverse_frequencies"]]
    assert w[0] == 1.0 and np.all(np.diff(w) < 0)
    assert spec.attention_factor() == 1.0
    assert spec.name == "llama-3.1-8b" and spec.family == "rope"


def test_yarn_attention_factor_and_dynamic_seq_len():
    yarn = ropecheck.Spec.from_preset("qwen2.5-7b-yarn")
    assert yarn.attention_factor() == pytest.approx(0.1 * np.log(4.0) + 1.0, rel=1e-15)
    phi = ropecheck.Spec.from_preset("phi-3.5-mini")  # longrope: short factors up to 4096, long past it
    assert not np.array_equal(phi.inverse_frequencies(seq_len=4096), phi.inverse_frequencies(seq_len=8192))


def test_sinusoidal_frequencies():
    s = ropecheck.Spec.from_preset("transformer-base")
    assert s.family == "sinusoidal"
    w = s.inverse_frequencies()
    assert w.shape == (256,) and w[0] == 1.0


def test_hf_config_dict_and_file_give_the_preset_frequencies(tmp_path):
    from_dict = ropecheck.Spec.from_hf_config(LLAMA31_CONFIG)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA31_CONFIG))
    from_file = ropecheck.Spec.from_hf_config(path)
    preset = ropecheck.Spec.from_preset("llama-3.1-8b")
    assert from_dict.inverse_frequencies().tolist() == preset.inverse_frequencies().tolist()
    assert from_file.inverse_frequencies().tolist() == preset.inverse_frequencies().tolist()
    assert "config.json with sha256" in from_file.to_dict()["source"]


def test_hf_config_unused_key_warns_and_strict_raises():
    config = dict(LLAMA31_CONFIG, rope_scaling=dict(LLAMA31_CONFIG["rope_scaling"], foo=1))
    with pytest.warns(RuntimeWarning, match="foo"):
        ropecheck.Spec.from_hf_config(config)
    with pytest.raises(ropecheck.SpecError, match="foo"):
        ropecheck.Spec.from_hf_config(config, strict=True)


def test_from_json_dict_text_and_file_round_trip(tmp_path):
    d = ropecheck.Spec.from_preset("gpt-j-6b").to_dict()
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(d))
    for source in (d, json.dumps(d), path, str(path)):
        assert ropecheck.Spec.from_json(source).to_dict() == d


@pytest.mark.parametrize("args, call", [
    (["--preset", "no-such-model"], lambda: ropecheck.Spec.from_preset("no-such-model")),
    (["--spec", "/nonexistent/spec.json"], lambda: ropecheck.Spec.from_json("/nonexistent/spec.json")),
])
def test_errors_carry_the_cli_one_line_message(cli, args, call):
    p = run_cli(cli, "spec", *args)
    assert p.returncode == 2
    with pytest.raises(ropecheck.SpecError) as e:
        call()
    assert p.stderr == f"ropecheck: error: {e.value}\n"
    assert isinstance(e.value, ropecheck.InputError) and isinstance(e.value, ValueError)


def test_bad_input_raises_never_crashes():
    with pytest.raises(ropecheck.SpecError, match="malformed JSON"):
        ropecheck.Spec.from_json("{" * 3)
    with pytest.raises(ropecheck.SpecError):
        ropecheck.Spec.from_json("[" * 200000)  # nesting past the limit: refused before recursing
    with pytest.raises(ropecheck.SpecError) as e:
        ropecheck.Spec.from_json({"family": "rope", "rope": {"head_dim": -1, "base": "\n\x1b"}})
    assert "\n" not in str(e.value)
    with pytest.raises(ropecheck.SpecError, match="seq_len"):
        ropecheck.Spec.from_preset("llama-3.1-8b").resolve(seq_len=0)
