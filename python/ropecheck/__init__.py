"""ropecheck: numerical verification and property testing for RoPE and sinusoidal position
encodings, from Python. The C++ libraries (exact MPFR reference, golden writer, checker, property
suite, drift) are bound directly in ropecheck._core.

    import ropecheck
    g = ropecheck.golden("llama-3.1-8b", positions="log:131071:8", heads=8, dtypes=("f32", "bf16"))
    report = ropecheck.check(g, my_rope, cls="bf16-table")   # my_rope(q, k, positions) -> (q_rot, k_rot)
    assert report.passed, report
"""
from ._core import InputError, SpecError
from ._spec import Spec, presets
from ._golden import Golden, golden, load
from ._kv_cache import KvCache
from ._check import Report, TensorResult, assert_rope, check
from ._props import PropsReport, property_names, props
from ._drift import Drift, drift

__version__ = "0.1.0"

__all__ = ["InputError", "SpecError", "Spec", "presets", "Golden", "golden", "load", "KvCache", "Report", "TensorResult", "assert_rope", "check",
           "PropsReport", "property_names", "props", "Drift", "drift",
           "__version__"]
