"""`ropecheck check` and Python's check() are one entry point (checker/run_check.hpp): the same report
JSON for a failing run, a not-tested run, a run whose kernel failed and a baseline regression."""
from __future__ import annotations

import json
import os

import pytest

import ropecheck
from conftest import run_cli


def comparable(text: str) -> dict:
    j = json.loads(text)
    if "diagnosis" in j:
        j["diagnosis"].pop("seconds", None)  # wall time
    return j


def saved(tmp_path_factory, positions: str) -> str:
    g = ropecheck.golden(ropecheck.Spec.from_preset("llama-3.1-8b"), positions=positions, heads=2, dtypes=("f32",), seed=0)
    path = str(tmp_path_factory.mktemp("entry") / "set")
    g.save(path)
    return path


@pytest.fixture(scope="module")
def golden_dir(tmp_path_factory) -> str:
    return saved(tmp_path_factory, "0:64")


@pytest.fixture(scope="module")
def saturated_dir(tmp_path_factory) -> str:
    return saved(tmp_path_factory, "0,7,4000000")  # past 2^21 fp32-angle's bound saturates for Llama-3.1-8B


def both(cli: str, golden_dir: str, tmp_path, kernel: str, cli_args: list[str], **kwargs) -> tuple[dict, dict, int]:
    report = tmp_path / "r.json"
    p = run_cli(cli, "check", "--golden", golden_dir, "--kernel", kernel, "--report", str(report), *cli_args)
    assert p.returncode in (0, 1, 3), p.stderr
    py = ropecheck.check(ropecheck.load(golden_dir), kernel, **kwargs)
    assert py.verdict == {0: "pass", 1: "fail", 3: "not-tested"}[p.returncode]
    return comparable(report.read_text()), comparable(py.to_json()), p.returncode


def test_failing(cli, golden_dir, tmp_path):
    c, py, rc = both(cli, golden_dir, tmp_path, "builtin:bf16-inv-freq", ["--only", "q_rot,k_rot"], only=["q_rot", "k_rot"])
    assert rc == 1 and "bf16" in json.dumps(c["diagnosis"]["match"])
    assert c == py


def test_not_tested(cli, saturated_dir, tmp_path):
    c, py, rc = both(cli, saturated_dir, tmp_path, "builtin:hf", [])
    assert rc == 3 and c["verdict"] == "not-tested"
    assert c == py


def test_kernel_failure(cli, golden_dir, tmp_path):
    plugin = os.path.join(os.path.dirname(cli), "..", "tests", "bad_plugins", "bad_plugin_segv.so")
    if not os.path.exists(plugin):
        pytest.skip(f"{plugin}: the test plugins are built with the C++ tests (scripts/build)")
    c, py, rc = both(cli, golden_dir, tmp_path, plugin, ["--kernel-timeout", "20"])
    assert rc == 1 and c["verdict"] == "fail" and "killed by" in json.dumps(c["candidate_source"]["failures"])
    assert c == py


def test_baseline_regression(cli, golden_dir, tmp_path):
    base = tmp_path / "base.json"
    assert run_cli(cli, "check", "--golden", golden_dir, "--kernel", "builtin:hf", "--only", "q_rot,k_rot",
                   "--class", "bf16-table", "--report", str(base)).returncode == 0
    c, py, rc = both(cli, golden_dir, tmp_path, "builtin:bf16-positions",
                     ["--only", "q_rot,k_rot", "--class", "bf16-table", "--baseline", str(base), "--no-diagnose"],
                     only=["q_rot", "k_rot"], cls="bf16-table", baseline=str(base), diagnose=False)
    assert rc == 1 and c["baseline"]["pass"] is False
    assert c == py
