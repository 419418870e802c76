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


def test_saturated_classes_are_never_satisfied(cli, tmp_path_factory, tmp_path):
    """Positions to 1e8: the text, the JSON and the Python objects call fp32-angle and the looser classes
    not tested (saturated), never satisfied, and the saturated worst elements are marked."""
    far = saved(tmp_path_factory, "0,7,4000000,33554431,100000000")
    report = tmp_path / "far.json"
    p = run_cli(cli, "check", "--golden", far, "--kernel", "builtin:hf", "--report", str(report))
    assert p.returncode == 3, p.stderr
    loose = ["fp32-angle", "f16-table", "bf16-table"]
    assert p.stdout.rstrip().endswith("classes not tested (saturated): " + ", ".join(loose))
    assert "classes satisfied: (none)" in p.stdout and "SATURATED: not tested" in p.stdout
    py = ropecheck.check(ropecheck.load(far), "builtin:hf")
    assert comparable(report.read_text()) == comparable(py.to_json())
    assert py.verdict == "not-tested" and not py.passed
    assert py.not_tested_classes == loose and not set(loose) & set(py.satisfied_classes)
    for t in py.tensors.values():
        assert [t.classes[c] for c in loose] == ["not-tested"] * 3, (t.name, t.classes)
        assert t.best_class not in loose and t.saturated_from["fp32-angle"] is not None
        for c in t.json["classes"]:
            assert c["satisfied"] == (c["state"] == "satisfied")
    assert any(w["saturated"] for w in py.worst(50))


def test_a_declined_kernel_is_not_tested_with_its_reason(cli, golden_dir, tmp_path):
    """The same verdict as `ropecheck check --kernel` on a plugin that declines everything, and for a
    Python kernel raising NotImplementedError: not tested (exit 3), never unusable input."""
    plugin = os.path.join(os.path.dirname(cli), "..", "tests", "test_plugins", "test_plugin_unsupported_all.so")
    if os.path.exists(plugin):
        c, py, rc = both(cli, golden_dir, tmp_path, plugin, [])
        assert rc == 3 and c == py and "nothing implemented" in c["declined"] and c["tensors"] == []
    g = ropecheck.load(golden_dir)

    def declines(q, k, positions):
        raise NotImplementedError("no llama3 scaling here")

    r = ropecheck.check(g, declines)
    assert r.verdict == "not-tested" and "no llama3 scaling here" in r.declined and "no llama3 scaling here" in r.reason
    assert r.not_tested == ["q_rot.f32", "k_rot.f32"] and r.satisfied_classes == []


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
