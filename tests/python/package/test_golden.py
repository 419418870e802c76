"""golden(): arrays in memory, save() byte-identical to `ropecheck golden`, load()."""
from __future__ import annotations

import hashlib
import json
import os

import ml_dtypes
import numpy as np
import pytest

import ropecheck
from conftest import run_cli
from test_spec import LLAMA31_CONFIG


def digests(folder) -> dict[str, str]:
    return {name: hashlib.sha256(open(os.path.join(folder, name), "rb").read()).hexdigest()
            for name in sorted(os.listdir(folder))}


def test_arrays_shapes_dtypes_and_values():
    g = ropecheck.golden("llama-3.1-8b", positions="0:16,4095,131071", heads=3, dtypes=("f32", "bf16"), seed=5)
    assert g.tokens == 18 and g.heads == 3 and g.dtypes == ["f64", "f32", "bf16"]
    assert g["q"].shape == (18, 3, 128) and g["q"].dtype == np.float32
    assert g["q_rot.bf16"].dtype == ml_dtypes.bfloat16 and g["q_rot.bf16"].shape == (18, 3, 128)
    assert g["cos.f64"].shape == (18, 64)
    assert g["positions"].tolist()[-2:] == [4095, 131071]
    # position 0 rotates by nothing: q_rot = q (attention factor 1), and cos = 1
    np.testing.assert_array_equal(g["q_rot.f64"][0], g["q"][0].astype(np.float64))
    assert np.all(g["cos.f64"][0] == 1.0)
    # the bf16 output is the f64 truth rounded once
    np.testing.assert_array_equal(g["q_rot.bf16"], g["q_rot.f64"].astype(ml_dtypes.bfloat16))
    assert not g["q"].flags.writeable
    assert set(g.outputs) == {f"{b}.{d}" for b in ("cos", "sin", "q_rot", "k_rot") for d in ("f64", "f32", "bf16")}


@pytest.mark.parametrize("cli_args, kwargs", [
    (["--preset", "llama-3.1-8b", "--positions", "log:131071:2", "--heads", "2", "--dtypes", "f32,bf16", "--seed", "3"],
     dict(spec="llama-3.1-8b", positions="log:131071:2", heads=2, dtypes=("f32", "bf16"), seed=3)),
    (["--preset", "qwen2-vl-7b", "--positions", "0:4,grid:4:2:3", "--format", "npy", "--dtypes", "f16"],
     dict(spec="qwen2-vl-7b", positions="0:4,grid:4:2:3", format="npy", dtypes=["f16"])),
    (["--preset", "transformer-base", "--positions", "0:8"], dict(spec="transformer-base", positions="0:8")),
])
def test_save_is_byte_identical_to_the_cli(cli, tmp_path, cli_args, kwargs):
    p = run_cli(cli, "golden", *cli_args, "--out", str(tmp_path / "cli"), "--quiet")
    assert p.returncode == 0, p.stderr
    ropecheck.golden(**kwargs).save(tmp_path / "py")
    expected = digests(tmp_path / "cli")
    assert len(expected) >= 3 and "manifest.json" in expected
    assert digests(tmp_path / "py") == expected


def test_scores_load_and_match_the_cli(cli, tmp_path):
    args = ["--preset", "llama-3.1-8b", "--positions", "0:4", "--heads", "2", "--dtypes", "bf16"]
    p = run_cli(cli, "golden", *args, "--scores", "causal:0:3,pair:9:2", "--out", str(tmp_path / "cli"), "--quiet")
    assert p.returncode == 0, p.stderr
    g = ropecheck.load(tmp_path / "cli")
    assert g["score_positions"].tolist() == [[0, 0], [1, 0], [1, 1], [2, 0], [2, 1], [2, 2], [9, 2]]
    np.testing.assert_array_equal(g["score_q"], g["q"][0])
    np.testing.assert_array_equal(g["score_k"], g["k"][0, 0])
    assert g["scores.f64"].shape == (2, 7) and g["scores.bf16"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(g["scores.bf16"], g["scores.f64"].astype(ml_dtypes.bfloat16))
    # the diagonal is exact: <q, k> / sqrt(128), attention factor 1
    diag = g["score_q"].astype(np.float64) @ g["score_k"].astype(np.float64) / np.sqrt(128.0)
    np.testing.assert_allclose(g["scores.f64"][:, 0], diag, rtol=1e-15)
    assert g.manifest["scores"]["group"] == 2 and "scores.f64" not in g.outputs
    py = ropecheck.golden("llama-3.1-8b", positions="0:4", heads=2, dtypes="bf16", scores="causal:0:3,pair:9:2")
    py.save(tmp_path / "py")
    assert digests(tmp_path / "py") == digests(tmp_path / "cli")


def test_attention_block_loads_and_matches_the_cli(cli, tmp_path):
    args = ["--preset", "gpt-oss-20b", "--positions", "0:4", "--heads", "2", "--dtypes", "f32"]
    p = run_cli(cli, "golden", *args, "--attention", "causal:5:4:2", "--softcap", "30", "--sinks",
                "--out", str(tmp_path / "cli"), "--quiet")
    assert p.returncode == 0, p.stderr
    g = ropecheck.load(tmp_path / "cli")
    assert g["attention_positions"].tolist() == [5, 6, 7, 8]
    np.testing.assert_array_equal(g["attention_q"], g["q"])
    np.testing.assert_array_equal(g["attention_k"], g["k"][:, 0])
    assert g["attention_out.f32"].shape == (4, 2, 64) and g["attention_sinks"].shape == (2,)
    # the first token sees only itself (and the sink): each head's output is a multiple of v[0] below it
    # (one multiple per head: each head has its own sink)
    o, v = g["attention_out.f64"][0], g["attention_v"][0].astype(np.float64)
    ratio = o / v
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:, :1], ratio.shape), rtol=1e-14)
    assert ((0 < ratio[:, 0]) & (ratio[:, 0] < 1)).all()
    rec = g.manifest["attention"]
    assert rec["sinks"] and rec["softcap"] == 30.0 and rec["window"] == 2 and "attention_out.f64" not in g.outputs
    py = ropecheck.golden("gpt-oss-20b", positions="0:4", heads=2, dtypes="f32", attention="causal:5:4:2",
                          softcap=30.0, sinks=True)
    py.save(tmp_path / "py")
    assert digests(tmp_path / "py") == digests(tmp_path / "cli")


def test_hf_config_file_set_is_byte_identical_to_the_cli(cli, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA31_CONFIG))
    p = run_cli(cli, "golden", "--hf-config", str(config), "--positions", "1,7,4095", "--out", str(tmp_path / "cli"))
    assert p.returncode == 0, p.stderr
    ropecheck.golden(ropecheck.Spec.from_hf_config(config), positions=[1, 7, 4095]).save(tmp_path / "py")
    assert digests(tmp_path / "py") == digests(tmp_path / "cli")


def test_load_round_trip_and_refusals(tmp_path):
    g = ropecheck.golden("gpt-j-6b", positions="0:32", heads=2, dtypes="f32")
    g.save(tmp_path / "set")
    h = ropecheck.load(tmp_path / "set")
    assert list(h) == list(g) and h.manifest == g.manifest
    for name in g:
        np.testing.assert_array_equal(h[name], g[name])
    with pytest.raises(ropecheck.InputError, match="already exists"):
        g.save(tmp_path / "set")
    g.save(tmp_path / "set", overwrite=True)
    (tmp_path / "set" / "manifest.json").write_text("{}")
    with pytest.raises(ropecheck.InputError):
        ropecheck.load(tmp_path / "set")
    with pytest.raises(ropecheck.InputError, match="manifest.json"):
        ropecheck.load(tmp_path)


def test_private_folder_is_removed_with_the_object():
    g = ropecheck.golden("llama-3.2-1b", positions="0:4")
    folder = os.path.dirname(g.dir)
    assert os.path.isdir(folder)
    del g
    import gc
    gc.collect()
    assert not os.path.exists(folder)


@pytest.mark.parametrize("kwargs, match", [
    (dict(positions="0:-3"), "position"),
    (dict(positions="0:4", dtypes=("f8",)), "dtypes: unknown dtype 'f8'"),
    (dict(positions="0:4", heads=0), "heads"),
    (dict(positions="0:1000000", heads=64, max_memory="1M"), "memory"),
])
def test_bad_arguments_raise_one_line_errors(kwargs, match):
    with pytest.raises(ropecheck.InputError, match=match) as e:
        ropecheck.golden("llama-3.1-8b", **kwargs)
    assert "\n" not in str(e.value)


def test_integer_positions_are_recorded_as_the_cli_list():
    g = ropecheck.golden("transformer-base", positions=range(3))
    assert g.manifest["positions"]["argument"] == "0,1,2"
    assert g["positions"].tolist() == [0, 1, 2]


def test_python_keeps_its_ctrl_c_handler():
    """The writer removes its temporary folder on SIGINT / SIGTERM / SIGHUP only where the handler is
    the default one: Python's Ctrl-C stays a KeyboardInterrupt (a replaced handler would kill the
    interpreter here instead)."""
    import signal
    import time
    # Python installs its handler only where SIGINT was not ignored at start (a shell's background
    # job starts with it ignored): install it here, so the test means the same wherever it runs.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        ropecheck.golden("llama-3.2-1b", positions="0:4")
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    finally:
        signal.signal(signal.SIGINT, before)
