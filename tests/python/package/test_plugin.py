"""The pytest plugin: fixtures cached per session, the parametrize marker, assert_rope's message,
--ropecheck-report, and failures in pytest's own JUnit XML."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

TESTS = '''
import numpy as np
import pytest
import ropecheck

made = []

@pytest.mark.ropecheck(presets=["llama-3.2-1b", "mistral-7b"], dtypes=["f32", "bf16"])
def test_exact(ropecheck_golden, ropecheck_preset, ropecheck_dtype):
    g = ropecheck_golden(ropecheck_preset, positions="0:16", heads=1, dtypes=("f32", "bf16"))
    made.append(id(g))
    outputs = {f"{b}.{ropecheck_dtype}": g[f"{b}.{ropecheck_dtype}"] for b in ("q_rot", "k_rot")}
    ropecheck.assert_rope(g, outputs, cls="exact", only=list(outputs))

def test_cached(ropecheck_golden):
    assert len(set(made)) == 2   # 4 tests above, 2 presets: each set made once
    assert ropecheck_golden("llama-3.2-1b", positions="0:16", heads=1, dtypes=("f32", "bf16")) is not None

def test_wrong(ropecheck_golden):
    g = ropecheck_golden("llama-3.2-1b", positions="0:16", heads=1, dtypes=("f32", "bf16"))
    q = np.array(g["q_rot.f32"])
    q[9, 0, 5] += 1e-3
    ropecheck.assert_rope(g, {"q_rot.f32": q, "k_rot.f32": g["k_rot.f32"]}, cls="exact", only=["q_rot.f32", "k_rot.f32"])
'''


def test_plugin_end_to_end(pytester, tmp_path):
    pytester.makepyfile(test_rope=TESTS)
    reports, junit = tmp_path / "reports", tmp_path / "junit.xml"
    result = pytester.runpytest_subprocess(f"--ropecheck-report={reports}", f"--junitxml={junit}", "-q")
    result.assert_outcomes(passed=5, failed=1)
    out = result.stdout.str()
    # the failure message is the checker's diagnosis: the failing tensor, the worst element's token
    assert "ropecheck: fail" in out and "q_rot.f32" in out and "worst elements" in out
    names = sorted(os.listdir(reports))
    assert len(names) == 5 and any("test_wrong" in n for n in names)
    wrong = json.loads((reports / next(n for n in names if "test_wrong" in n)).read_text())
    assert wrong["verdict"] == "fail" and wrong["tensors"][0]["worst"][0]["token"] == 9
    case = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == "test_wrong")
    assert "worst elements" in case.find("failure").text
    assert "test_exact[llama-3.2-1b-f32]" in {c.get("name") for c in ET.parse(junit).getroot().iter("testcase")}


def test_marker_without_its_argument_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad='''
import pytest
@pytest.mark.ropecheck(presets=["llama-3.1-8b"])
def test_x():
    pass
''')
    result = pytester.runpytest_subprocess("-q")
    assert result.ret != 0 and "needs a ropecheck_preset argument" in result.stderr.str() + result.stdout.str()
