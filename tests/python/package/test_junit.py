"""`ropecheck check|props|drift --junit FILE`: valid JUnit XML (junit.xsd beside this file), one
testcase per tensor / property / compared pair, fail = <failure>, not tested = <skipped> with the
reason; and the pytest plugin's failures reach pytest's own JUnit."""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import pytest

import ropecheck
from conftest import run_cli

xmlschema = pytest.importorskip("xmlschema", reason="pip install xmlschema==4.3.2 (tests/python/requirements.txt)")
SCHEMA = xmlschema.XMLSchema(os.path.join(os.path.dirname(__file__), "junit.xsd"))


def cases(path) -> dict[str, ET.Element]:
    SCHEMA.validate(str(path))  # raises with the offending element when the file does not conform
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    found = {c.get("name"): c for c in suite.findall("testcase")}
    assert int(suite.get("tests")) == len(found)
    assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in found.values())
    assert int(suite.get("skipped")) == sum(c.find("skipped") is not None for c in found.values())
    return found


def test_the_schema_rejects_what_ci_systems_cannot_read(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x" tests="1" failures="0"><testcase/></testsuite></testsuites>')
    assert not SCHEMA.is_valid(str(bad))  # errors= missing, testcase without a name


def test_check_junit(cli, tmp_path):
    g = ropecheck.golden("llama-3.1-8b", positions="0:8,log:131071:1", heads=1, dtypes=("f32",))
    g.save(tmp_path / "set")
    p = run_cli(cli, "check", "--golden", str(tmp_path / "set"), "--kernel", "builtin:bf16-inv-freq",
                "--only", "q_rot.f32,cos.f32,sin.f32,k_rot.f16", "--junit", str(tmp_path / "check.xml"))
    assert p.returncode == 2 and not (tmp_path / "check.xml").exists()  # k_rot.f16: not in the set
    p = run_cli(cli, "check", "--golden", str(tmp_path / "set"), "--kernel", "builtin:bf16-inv-freq",
                "--only", "q_rot.f32,cos.f32", "--junit", str(tmp_path / "check.xml"))
    assert p.returncode == 1, p.stderr
    c = cases(tmp_path / "check.xml")
    assert set(c) == {"q_rot.f32", "cos.f32"}
    failure = c["q_rot.f32"].find("failure")
    assert failure is not None and "worst elements" in failure.text and "token" in failure.text
    assert c["q_rot.f32"].get("classname") == "ropecheck.check.llama-3.1-8b"


def test_check_junit_not_tested_is_skipped(cli, tmp_path):
    g = ropecheck.golden("llama-3.1-8b", positions="0:8", dtypes=("f32",))
    g.save(tmp_path / "set")
    import safetensors.numpy as stn
    stn.save_file({"q_rot.f32": g["q_rot.f32"].copy()}, str(tmp_path / "c.safetensors"))
    p = run_cli(cli, "check", "--golden", str(tmp_path / "set"), "--candidate", str(tmp_path / "c.safetensors"),
                "--junit", str(tmp_path / "j.xml"))
    assert p.returncode == 3, p.stderr
    c = cases(tmp_path / "j.xml")
    assert c["q_rot.f32"].find("failure") is None and c["q_rot.f32"].find("skipped") is None
    skipped = c["k_rot.f32"].find("skipped")
    assert skipped is not None and skipped.get("message") == "no candidate tensor for this golden output"


def test_props_junit(cli, tmp_path):
    p = run_cli(cli, "props", "--kernel", "builtin:bf16-inv-freq", "--dtype", "f32", "--preset", "llama-3.1-8b", "--cases", "5",
                "--max-pos", "1000000", "--junit", str(tmp_path / "p.xml"))
    assert p.returncode == 1, p.stderr
    c = cases(tmp_path / "p.xml")
    assert "relative_shift.f32" in c
    failure = c["relative_shift.f32"].find("failure")
    assert failure is not None and "reproduce: ropecheck props --kernel builtin:bf16-inv-freq --preset" in failure.text
    skipped = c["sinusoidal_shift.f32"].find("skipped")
    assert skipped is not None and skipped.get("message").startswith("not applicable")


def test_drift_compare_junit(cli, tmp_path):
    p = run_cli(cli, "drift", "--preset", "llama-3.2-1b", "--compare", "hf,accurate", "--max-pos", "4096",
                "--no-plots", "--no-uniqueness", "--quiet", "--out", str(tmp_path / "d"), "--junit", str(tmp_path / "d.xml"))
    assert p.returncode == 0, p.stderr
    c = cases(tmp_path / "d.xml")
    assert list(c) == ["hf vs accurate"] and len(c["hf vs accurate"]) == 0  # a pass: no child element
    p = run_cli(cli, "drift", "--preset", "llama-3.2-1b", "--recipes", "hf", "--junit", str(tmp_path / "e.xml"))
    assert p.returncode == 2 and "--junit needs --compare" in p.stderr and not (tmp_path / "e.xml").exists()


