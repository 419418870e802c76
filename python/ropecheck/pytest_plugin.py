"""ropecheck's pytest plugin (entry point pytest11, active once the package is installed).

- `ropecheck_golden(spec, positions=..., heads=..., dtypes=..., seed=...)`: a fixture that makes
  golden sets, each made once per session and shared by every test that asks for the same one;
- `@pytest.mark.ropecheck(presets=[...], dtypes=[...])`: parametrizes a test over presets and dtypes
  through its `ropecheck_preset` / `ropecheck_dtype` arguments;
- `--ropecheck-report DIR`: every report ropecheck.check / ropecheck.assert_rope makes during the run
  is written to DIR as JSON (`ropecheck check --report`'s format), named after the test;
- ropecheck.assert_rope(...) fails a test with the checker's per-element diagnosis as its message.
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable

import pytest

from . import _check
from ._golden import Golden, golden
from ._spec import Spec


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ropecheck")
    group.addoption("--ropecheck-report", metavar="DIR", default=None,
                    help="write every ropecheck check report of the run to DIR as JSON")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ropecheck(presets=None, dtypes=None): parametrize over presets "
                            "(ropecheck_preset argument) and dtypes (ropecheck_dtype argument)")
    folder = config.getoption("--ropecheck-report")
    if folder:
        os.makedirs(folder, exist_ok=True)
        counts: dict[str, int] = {}

        def keep(report: _check.Report) -> None:
            test = os.environ.get("PYTEST_CURRENT_TEST", "outside-a-test").rsplit(" ", 1)[0]
            stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", test).strip("_")[:180]
            counts[stem] = counts.get(stem, 0) + 1
            path = os.path.join(folder, f"{stem}-{counts[stem]}.json")
            with open(path, "w") as f:
                f.write(report.to_json())

        _check.report_sinks.append(keep)
        config._ropecheck_sink = keep  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    sink = getattr(config, "_ropecheck_sink", None)
    if sink in _check.report_sinks:
        _check.report_sinks.remove(sink)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for marker in metafunc.definition.iter_markers("ropecheck"):
        presets = marker.kwargs.get("presets")
        dtypes = marker.kwargs.get("dtypes")
        if presets is not None:
            if "ropecheck_preset" not in metafunc.fixturenames:
                raise pytest.UsageError(f"{metafunc.definition.nodeid}: ropecheck(presets=...) needs a ropecheck_preset argument")
            metafunc.parametrize("ropecheck_preset", list(presets))
        if dtypes is not None:
            if "ropecheck_dtype" not in metafunc.fixturenames:
                raise pytest.UsageError(f"{metafunc.definition.nodeid}: ropecheck(dtypes=...) needs a ropecheck_dtype argument")
            metafunc.parametrize("ropecheck_dtype", list(dtypes))


_sets: dict[tuple, Golden] = {}


@pytest.fixture(scope="session")
def ropecheck_golden() -> Callable[..., Golden]:
    """golden(spec, positions=..., heads=..., dtypes=..., seed=...) made once per session."""

    def make(spec: Spec | str, positions: Any = "0:64,log:131071:4", heads: int = 2,
             dtypes: Any = ("f32", "f16", "bf16"), seed: int = 0, **kwargs: Any) -> Golden:
        key_spec = spec if isinstance(spec, str) else spec.to_json()
        key = (key_spec, str(positions), heads, tuple(dtypes) if not isinstance(dtypes, str) else dtypes, seed,
               tuple(sorted(kwargs.items())))
        if key not in _sets:
            _sets[key] = golden(spec, positions, heads=heads, dtypes=dtypes, seed=seed, **kwargs)
        return _sets[key]

    yield make
    _sets.clear()
