"""The Python package's tests (pytest, in the virtual environment scripts/test makes:
docs/guide/python.md). The CLI binary, for the byte-identity and same-report tests: $ROPECHECK_CLI, else
build/release/cli/ropecheck."""
from __future__ import annotations

import os
import subprocess

import pytest

pytest_plugins = ["pytester"]  # test_plugin.py runs pytest on generated test files

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.fixture(scope="session")
def cli() -> str:
    path = os.environ.get("ROPECHECK_CLI") or os.path.join(ROOT, "build", "release", "cli", "ropecheck")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no ropecheck CLI at {path}: build it (scripts/build) or set ROPECHECK_CLI")
    return path


def run_cli(cli: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
