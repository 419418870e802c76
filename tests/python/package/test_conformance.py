"""ropecheck.conformance: each adapter on a small case with its measured verdicts and classes
asserted (a ropecheck change that moves them is noticed), and the command: matrix files, exit codes,
not-run adapters listed with their install line. Adapters whose package is missing are skipped with
the install line (ONNX Runtime is pinned in tests/python/requirements.txt, so it runs in CI)."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

import pytest

import ropecheck
from ropecheck import conformance
from ropecheck.conformance import Adapter
from ropecheck.conformance._run import MROPE_GRID

POSITIONS = "0:64,log:131071:4"


def needs(adapter: Adapter) -> Adapter:
    why = adapter.missing()
    if why:
        pytest.skip(f"{adapter.name} not installed ({why}): {adapter.install}")
    return adapter


@pytest.fixture(scope="module")
def golden_sets():
    cache: dict[str, ropecheck.Golden] = {}

    def get(preset: str) -> ropecheck.Golden:
        if preset not in cache:
            mrope = "mrope" in ropecheck.Spec.from_preset(preset).to_dict()["rope"]
            positions = POSITIONS + ("," + MROPE_GRID if mrope else "")  # as the command does
            cache[preset] = ropecheck.golden(preset, positions=positions, heads=1, dtypes=("f32", "f16", "bf16"))
        return cache[preset]
    return get


def cell(adapter: Adapter, g: ropecheck.Golden, dtype: str) -> dict:
    q_rot, k_rot = adapter.run(g, dtype)
    return conformance.judge(g, dtype, q_rot, k_rot, adapter.expected[dtype])


# Measured with onnx 1.23.2 / onnxruntime 1.31.1 (caches from the binary64 tables, onnxruntime.py):
# strictest class, worst error / bound of the expected class (to 2 digits), first violating position of
# fp64-angle (the next stricter class).
ONNX_MEASURED = {
    ("llama-3.1-8b", "f32"): ("f32-reduced", 0.19, 1),   # half-split, llama3 scaling
    ("llama-3.1-8b", "f16"): ("f16-table", 0.31, 4),
    ("qwen2-vl-7b", "f32"): ("f32-reduced", 0.19, 1),    # mrope, with an image block
    ("gpt-j-6b", "f32"): ("f32-reduced", 0.19, 1),       # interleaved, partial rotary 64 of 256
    ("gpt-j-6b", "f16"): ("f16-table", 0.32, 1),
}


@pytest.mark.parametrize("impl", ["onnxruntime", "onnxruntime-contrib"])
@pytest.mark.parametrize("preset,dtype", sorted(ONNX_MEASURED))
def test_onnxruntime_measured_classes(impl, preset, dtype, golden_sets):
    adapter = needs(conformance.adapters([impl])[0])
    strictest, score, first_fp64 = ONNX_MEASURED[(preset, dtype)]
    c = cell(adapter, golden_sets(preset), dtype)
    assert (c["state"], c["strictest"]) == ("pass", strictest), c
    assert c["worst_score"] == pytest.approx(score, abs=0.01)
    assert c["classes"]["fp64-angle"]["first_violating_position"] == first_fp64
    assert c["diagnosis"] is None


@pytest.mark.parametrize("impl", ["onnxruntime", "onnxruntime-contrib"])
def test_onnxruntime_bf16_is_not_applicable_on_cpu(impl, golden_sets):
    adapter = needs(conformance.adapters([impl])[0])
    with pytest.raises(conformance.Declined, match="no CPU kernel"):
        adapter.run(golden_sets("llama-3.1-8b"), "bf16")


def test_onnxruntime_with_bf16_rounded_caches_fails_and_is_diagnosed(golden_sets, monkeypatch):
    """The adapter's judgement has teeth: f32 caches that went through bf16 fail f32-reduced, and the
    diagnosis names the mistake."""
    import ml_dtypes

    from ropecheck.conformance import onnxruntime as ort_adapter

    adapter = needs(ort_adapter.OnnxStandard())
    exact = ort_adapter.caches

    def bf16_caches(golden, dtype):
        return tuple(c.astype(ml_dtypes.bfloat16).astype(c.dtype) for c in exact(golden, dtype))

    monkeypatch.setattr(ort_adapter, "caches", bf16_caches)
    c = cell(adapter, golden_sets("llama-3.1-8b"), "f32")
    assert (c["state"], c["strictest"], c["diagnosis_match"]) == ("fail", "bf16-table", "class-bf16-table"), c


def run_command(*args: str, missing: str | None = None) -> subprocess.CompletedProcess:
    """The command's main(ARGS) in this process (stdout, stderr and the exit code captured);
    `missing`: a module made unimportable meanwhile. test_command_writes_the_matrix runs the real
    `python -m ropecheck.conformance` once."""
    from ropecheck.conformance.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.modules.get(missing) if missing else None
    if missing:
        sys.modules[missing] = None  # type: ignore[assignment]  import then raises ImportError
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's errors
                code = int(e.code or 0)
    finally:
        if missing:
            if saved is None:
                del sys.modules[missing]
            else:
                sys.modules[missing] = saved
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_command_writes_the_matrix(tmp_path):
    needs(conformance.adapters(["onnxruntime"])[0])
    out = tmp_path / "m"
    r = subprocess.run([sys.executable, "-m", "ropecheck.conformance", "--impl", "onnxruntime", "--presets",
                        "llama-3.2-1b,gpt-j-6b", "--positions", POSITIONS, "--heads", "1", "--dtypes", "f32,f16",
                        "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    assert "conformance: onnxruntime gpt-j-6b f16: pass, strictest class f16-table" in r.stderr  # progress
    m = json.loads((out / "matrix.json").read_text())
    assert m["verdict"] == "pass" and m["versions"]["ropecheck"] == ropecheck.__version__
    assert m["adapters"][0]["versions"]["onnxruntime"] == "1.31.1"
    got = {(c["preset"], c["dtype"]): (c["state"], c["strictest"]) for c in m["cells"]}
    assert got == {("llama-3.2-1b", "f32"): ("pass", "f32-reduced"), ("llama-3.2-1b", "f16"): ("pass", "f16-table"),
                   ("gpt-j-6b", "f32"): ("pass", "f32-reduced"), ("gpt-j-6b", "f16"): ("pass", "f16-table")}
    md = (out / "matrix.md").read_text()
    assert "| onnxruntime | gpt-j-6b | f32 | pass | f32-reduced | f32-reduced |" in md
    try:
        import matplotlib  # noqa: F401
        assert (out / "matrix.png").stat().st_size > 0
    except ImportError:
        assert not (out / "matrix.png").exists()
        assert "plot skipped: matplotlib is not installed (pip install matplotlib==3.11.2)" in r.stderr


def test_command_lists_a_missing_implementation_as_not_run(tmp_path):
    out = tmp_path / "m"
    # Named with --impl: asked for and not tested, so exit 3 (never 0).
    r = run_command("--impl", "onnxruntime", "--presets", "llama-3.2-1b", "--positions", "0:4", "--out", str(out),
                    missing="onnxruntime")
    assert r.returncode == 3, r.stderr
    assert "onnxruntime: not run (ModuleNotFoundError" in r.stderr
    md = (out / "matrix.md").read_text()
    assert "**not run**" in md and "`pip install onnx==1.23.2 onnxruntime==1.31.1`" in md
    m = json.loads((out / "matrix.json").read_text())
    assert m["verdict"] == "not-tested" and m["cells"] == []
    assert m["adapters"][0]["state"] == "not-run" and m["adapters"][0]["install"].startswith("pip install onnx")


def test_command_unusable_input_exits_2_without_output(tmp_path):
    out = tmp_path / "m"
    for args, message in ((["--impl", "nope"], "unknown implementation 'nope'"),
                          (["--presets", "llama-9"], "llama-9"),
                          (["--dtypes", "f8"], "unknown dtype 'f8'")):
        r = run_command(*args, "--out", str(out))
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("ropecheck: error: ") and message in r.stderr
        assert not out.exists()
    out.write_text("a file")
    r = run_command("--out", str(out))
    assert r.returncode == 2 and r.stderr == f"ropecheck: error: --out: '{out}' exists and is not a folder\n"


# The opt-in adapters (docs/guide/conformance.md): run where their packages are installed, skipped with the
# install line otherwise. Measured with keras 3.15.1 + keras-hub 0.32.0 on jax 0.10.2, torch 2.15.0,
# transformers 5.23.0, torchtune 0.6.1 (torchao 0.10.0), liger-kernel 0.8.5 + triton 3.9.0 (interpreter).
OPT_IN_MEASURED = {
    "keras-hub": {("qwen2.5-7b-yarn", "f32"): "fp32-angle", ("qwen2.5-7b-yarn", "f16"): "f16-table",
                  ("qwen2.5-7b-yarn", "bf16"): "bf16-table", ("gpt-neox-20b", "f32"): "fp32-angle"},
    "hf-transformers": {("llama-3.1-8b", "f32"): "fp32-angle", ("llama-3.1-8b", "f16"): "f16-table",
                        ("llama-3.1-8b", "bf16"): "bf16-table", ("gpt-oss-20b", "bf16"): "bf16-table",
                        ("deepseek-v3", "f32"): "fp32-angle", ("gemma-3-4b-global", "bf16"): "bf16-table",
                        ("gpt-j-6b", "f16"): "fp32-angle", ("qwen2-vl-7b", "bf16"): "bf16-table"},
    "torchtune": {("llama-3.1-8b", "f32"): "fp32-angle", ("llama-3.1-8b", "bf16"): "fp32-angle",
                  ("gpt-j-6b", "f16"): "fp32-angle"},
    "liger-kernel": {("llama-3.1-8b", "f32"): "fp32-angle", ("llama-3.1-8b", "f16"): "f16-table"},
}


@pytest.mark.parametrize("impl,preset,dtype", [(i, p, d) for i, m in OPT_IN_MEASURED.items() for p, d in m])
def test_opt_in_adapter_measured_classes(impl, preset, dtype, golden_sets):
    adapter = needs(conformance.adapters([impl])[0])
    c = cell(adapter, golden_sets(preset), dtype)
    assert (c["state"], c["strictest"]) == ("pass", OPT_IN_MEASURED[impl][(preset, dtype)]), c


def test_liger_bf16_is_not_tested_under_the_triton_interpreter(golden_sets):
    adapter = needs(conformance.adapters(["liger-kernel"])[0])
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the kernel runs natively")
    with pytest.raises(conformance.NotTested, match="interpreter"):
        adapter.run(golden_sets("llama-3.1-8b"), "bf16")


class _Stub(Adapter):
    """An adapter without a real implementation, for the states a real one rarely shows."""
    name = "stub"
    title = "stub"
    install = "pip install stub==1"
    dtypes = ("f32",)
    expected = {"f32": "f32-reduced"}

    def __init__(self, behaviour: str):
        self.behaviour = behaviour

    def load(self) -> None:
        if self.behaviour == "missing":
            raise ImportError("No module named 'stub'")

    def supports(self, spec):
        return "layout not expressible" if self.behaviour == "unsupported" else None

    def run(self, golden, dtype):
        if self.behaviour == "raises":
            raise RuntimeError("kernel exploded <a|b>")
        if self.behaviour == "not-tested":
            raise conformance.NotTested("emulator known to be wrong")
        if self.behaviour == "zeros":  # a broken kernel: fails, and is diagnosed
            return golden["q"] * 0, golden["k"] * 0
        return golden["q_rot.f32"], golden["k_rot.f32"]  # the correctly rounded outputs: exact


@pytest.mark.parametrize("behaviour,state,verdict", [
    ("exact", "pass", "pass"), ("zeros", "fail", "fail"), ("raises", "error", "fail"),
    ("not-tested", "not-tested", "not-tested"), ("unsupported", "not-tested", "not-tested")])
def test_cell_states_and_the_run_verdict(behaviour, state, verdict, tmp_path):
    m = conformance.run([_Stub(behaviour)], ["llama-3.2-1b"], positions="0:8", heads=1)
    (c,) = m.cells
    assert c.state == state, c
    assert m.verdict() == verdict  # a declined cell is not tested (exit 3), never passed
    assert c.declined == (behaviour == "unsupported")
    if behaviour == "unsupported":
        assert c.reason == "layout not expressible"  # the implementation's own reason
    if behaviour == "exact":
        assert c.strictest == "exact" and c.classes["exact"]["violations"] == 0
    if behaviour == "zeros":
        assert c.strictest is None and c.diagnosis and c.classes["f32-reduced"]["first_violating_position"] == 0
    if behaviour == "raises":
        assert c.reason.startswith("RuntimeError: kernel exploded <a|b> (") and "test_conformance.py" in c.reason
        assert "kernel exploded &lt;a\\|b> (" in conformance.markdown(m)  # the table cell stays one cell
    md = conformance.markdown(m)
    row = "stub × llama-3.2-1b (layout not expressible)" if behaviour == "unsupported" else "| stub | llama-3.2-1b |"
    assert row in md and f"Verdict: **{verdict}**" in md
    conformance.write(m, str(tmp_path))
    assert json.loads((tmp_path / "matrix.json").read_text())["cells"][0]["state"] == state


def test_a_declined_cell_makes_the_run_not_tested_beside_a_passing_one():
    """As `ropecheck check` judges a kernel that declines a preset: not tested (exit 3), not passed."""
    m = conformance.run([_Stub("unsupported"), _Stub("exact")], ["llama-3.2-1b"], positions="0:8", heads=1)
    assert [c.state for c in m.cells] == ["not-tested", "pass"] and m.verdict() == "not-tested"
    md = conformance.markdown(m)
    assert "Declined, not tested (the implementation cannot express the variant): stub × llama-3.2-1b" in md
    legacy = conformance.Cell("stub", "llama-3.2-1b", "-", "not-applicable", reason="from an older matrix.json")
    assert legacy.is_declined()


def test_a_missing_adapter_not_named_is_listed_but_does_not_make_the_run_not_tested():
    m = conformance.run([_Stub("missing"), _Stub("exact")], ["llama-3.2-1b"], positions="0:8", heads=1)
    assert [a.state for a in m.adapters] == ["not-run", "run"] and m.adapters[0].reason.startswith("ImportError")
    assert m.verdict() == "pass"
    m = conformance.run([_Stub("missing")], ["llama-3.2-1b"], positions="0:8", heads=1, requested=["stub"])
    assert m.verdict() == "not-tested"


def test_command_list(tmp_path):
    r = run_command("--list", "--out", str(tmp_path / "m"))
    assert r.returncode == 0, r.stderr
    names = [line.split(":")[0] for line in r.stdout.splitlines()]
    assert names == [a.name for a in conformance.ADAPTERS]
    assert not (tmp_path / "m").exists()


def test_keras_hub_yarn_truncate_flipped_is_caught_and_diagnosed(golden_sets):
    """gpt-oss's YaRN has truncate: false (llama.cpp's gpt-oss path rounds anyway): the layer built
    with the flag flipped fails and the diagnosis names that mistake."""
    adapter = needs(conformance.adapters(["keras-hub"])[0])
    build = adapter.layer

    def flipped(spec, dtype):
        layer = build(spec, dtype)
        layer.truncate = not layer.truncate
        return layer

    adapter.layer = flipped
    c = cell(adapter, golden_sets("gpt-oss-20b"), "f32")
    assert (c["state"], c["diagnosis_match"]) == ("fail", "yarn-truncate-flipped"), c


def test_keep_not_run_carries_an_uninstalled_implementation(tmp_path):
    """--keep-not-run: an adapter not installed keeps its row and cells from the earlier matrix.json
    (marked carried, with the date), only when that matrix had the same golden inputs; a run that names
    it with --impl stays not-tested."""
    from ropecheck.conformance._carry import keep_not_run

    first = conformance.run([_Stub("exact")], ["llama-3.2-1b", "gpt-j-6b"], positions="0:8", heads=1)
    first.date = "2026-01-02"
    conformance.write(first, str(tmp_path))
    m = conformance.run([_Stub("missing")], ["gpt-j-6b"], positions="0:8", heads=1)
    assert keep_not_run(m, str(tmp_path), ["gpt-j-6b"]) == [
        f"stub: not installed, 1 cells carried from {tmp_path / 'matrix.json'} (measured on 2026-01-02)"]
    (a,) = m.adapters
    assert (a.state, a.carried_from) == ("carried", "2026-01-02")
    assert a.reason.startswith("not installed here (ImportError")
    assert [(c.preset, c.state, c.strictest) for c in m.cells] == [("gpt-j-6b", "pass", "exact")]
    assert m.verdict() == "pass" and "| `stub` (stub) | carried over: not installed here" in conformance.markdown(m)
    m.adapters[0].requested = True
    assert m.verdict() == "not-tested"
    other = conformance.run([_Stub("missing")], ["gpt-j-6b"], positions="0:4", heads=1)
    assert "other golden inputs" in keep_not_run(other, str(tmp_path), ["gpt-j-6b"])[0]
    assert other.cells == [] and other.adapters[0].state == "not-run"
