"""The package ships type information: _core.pyi (nanobind.stubgen at build time) naming every
function and class of the extension module, and py.typed for the pure-Python layer."""
from __future__ import annotations

import ast
import os

import ropecheck
from ropecheck import _core


def test_stub_covers_the_extension_module():
    folder = os.path.dirname(ropecheck.__file__)
    assert os.path.isfile(os.path.join(folder, "py.typed"))
    tree = ast.parse(open(os.path.join(folder, "_core.pyi")).read())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert public - stubbed == set()
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    assert [a.arg for a in check.args.args][:2] == ["golden", "candidates"]


def test_public_api_is_annotated():
    import inspect
    for name in ("golden", "check", "props", "drift", "load", "assert_rope"):
        sig = inspect.signature(getattr(ropecheck, name))
        assert sig.return_annotation is not inspect.Signature.empty, name
