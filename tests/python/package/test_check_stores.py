"""check(g, fn) on what fused kernels return (issue 29): quantized stores (FP8 codes with their scale,
GGML blocks, MLX's packed codes with scales and biases), KV caches, Q/K-norm and MLA sets. Sets written
by the CLI (`golden --stores`, `--kv-cache`, presets qwen3-8b and deepseek-v3-mla) and loaded; recipes
from stores_recipes.py (numpy / ml_dtypes, from the engines' documentation); each failing verdict
compared with `ropecheck check` on the same bytes."""
from __future__ import annotations

import hashlib
import json
import os

import ml_dtypes
import numpy as np
import pytest

import ropecheck
from conftest import run_cli
from stores_recipes import fp8_per_token, paged_append, q8_0, rope_f32, write_safetensors

PRESET = "llama-3.1-8b"


@pytest.fixture(scope="module")
def sets(cli, tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("stores")
    (d / "kv.json").write_text(json.dumps({"sequences": [{"cached": 0, "appended": 3}, {"cached": 5, "appended": 1}],
                                           "page_size": 4}))
    (d / "slots.json").write_text(json.dumps({"sequences": [{"cached": 2, "appended": 2}], "cache": "slots", "page_size": 4}))
    runs = {"stores": ["--preset", PRESET, "--positions", "0:4", "--dtypes", "f32", "--stores", "e4m3fn,q8_0,int4g64"],
            "kv": ["--preset", PRESET, "--kv-cache", str(d / "kv.json"), "--dtypes", "bf16"],
            "slots": ["--preset", PRESET, "--kv-cache", str(d / "slots.json"), "--dtypes", "f16"],
            "norm": ["--preset", "qwen3-8b", "--positions", "0:3", "--dtypes", "f32"],
            "mla": ["--preset", "deepseek-v3-mla", "--positions", "0:3", "--dtypes", "f32"]}
    out = {}
    for name, args in runs.items():
        out[name] = str(d / name)
        p = run_cli(cli, "golden", *args, "--heads", "2", "--out", out[name], "--quiet")
        assert p.returncode == 0, p.stderr
    return out


def same_as_cli(cli, golden_dir: str, tmp_path, report, tensors: dict, *args: str, option: str = "--candidate") -> dict:
    """The CLI's report on the same bytes: its verdict and its judged part equal to Python's."""
    path, out = tmp_path / "cand.safetensors", tmp_path / "r.json"
    write_safetensors(path, tensors)
    p = run_cli(cli, "check", "--golden", golden_dir, option, str(path), "--report", str(out), *args)
    assert p.returncode in (0, 1, 3), p.stderr
    assert report.verdict == {0: "pass", 1: "fail", 3: "not-tested"}[p.returncode]
    return json.loads(out.read_text())


def never_fails(r) -> None:
    """A correct store: no element or scale group fails; most codes are decided and equal the golden ones
    (a code the class cannot decide is not tested, so a correct store's verdict may be "not-tested",
    as in CHECK_REPORT.md, "Quantized stores")."""
    assert r.verdict in ("pass", "not-tested") and r.stores["verdict"] != "fail", r
    for s in r.stores["stores"]:
        assert s["elements"]["failed"] == 0 and s["scale_groups"]["failed"] == 0, s
        assert s["elements"]["passed"] > s["elements"]["count"] // 2, s


def store_kernel(fp8=fp8_per_token, ggml=q8_0, which="e4m3fn"):
    rope = rope_f32(PRESET)

    def kernel(q, k, positions):
        q_rot, k_rot = rope(q, positions), rope(k, positions)
        return (fp8(q_rot), fp8(k_rot)) if which == "e4m3fn" else (ggml(q_rot), ggml(k_rot))

    return kernel


def test_a_store_set_loads_with_its_exact_codes(sets):
    g = ropecheck.load(sets["stores"])
    assert list(g.stores) == ["e4m3fn", "q8_0", "int4g64"] and g.stores["e4m3fn"]["scale"] == "per-token"
    fp8, ggml, mlx = (g.store("q_rot", s) for s in g.stores)
    assert fp8["codes"].dtype == ml_dtypes.float8_e4m3fn and fp8["scale"].shape == (4,) and "margin" in fp8
    assert ggml["codes"].dtype == np.uint8 and ggml["codes"].shape == (4, 2, 4, 34)
    assert mlx["codes"].dtype == np.uint32 and mlx["codes"].shape == (4, 2, 16) and mlx["biases"].shape == (4, 2, 2)
    # The codes times the scale are the rotation within the store's step.
    value = fp8["codes"].astype(np.float64) * fp8["scale"][:, None, None]
    assert np.abs(value - g["q_rot.f64"]).max() <= fp8["scale"].max() * 16


def digests(d) -> dict[str, str]:
    return {f: hashlib.sha256(open(os.path.join(d, f), "rb").read()).hexdigest() for f in sorted(os.listdir(d))}


def test_python_writes_the_cli_bytes(sets, tmp_path):
    ropecheck.golden(PRESET, positions="0:4", heads=2, dtypes=("f32",), stores=["e4m3fn", "q8_0", "int4g64"]).save(tmp_path / "s")
    assert digests(tmp_path / "s") == digests(sets["stores"])
    kv = os.path.join(os.path.dirname(sets["kv"]), "kv.json")
    ropecheck.golden(PRESET, heads=2, dtypes=("bf16",), kv_cache=kv).save(tmp_path / "kv")
    assert digests(tmp_path / "kv") == digests(sets["kv"])
    with pytest.raises(ValueError, match="kv_cache: not with positions"):
        ropecheck.golden(PRESET, positions="0:4", kv_cache=kv)


# Also as engines shape them: vLLM's [tokens, 1] scales, a head's GGML blocks as one run of bytes.
@pytest.mark.parametrize("which,form", [("e4m3fn", {}), ("q8_0", {}),
                                        ("e4m3fn", dict(fp8=lambda x: (fp8_per_token(x)[0], fp8_per_token(x)[1][:, None]))),
                                        ("q8_0", dict(ggml=lambda x: q8_0(x).reshape(*x.shape[:2], -1)))])
def test_a_numpy_recipe_passes(sets, which, form):
    r = ropecheck.check(ropecheck.load(sets["stores"]), store_kernel(which=which, **form), stores=which)
    never_fails(r)
    assert r.json["candidate_source"] == {"kind": "python-callable", "name": "store_kernel.<locals>.kernel"}
    assert [s["golden"] for s in r.stores["stores"]] == [f"q_rot.{which}", f"k_rot.{which}"]


def test_mlx_codes_scales_biases(sets):
    g = ropecheck.load(sets["stores"])
    parts = [g.store(o, "int4g64") for o in ("q_rot", "k_rot")]
    own = tuple((p["codes"], p["scales"], p["biases"]) for p in parts)
    never_fails(ropecheck.check(g, lambda q, k, positions: own, stores="int4g64"))


@pytest.mark.parametrize("which,mistake", [("e4m3fn", dict(fp8=lambda x: fp8_per_token(x, per_tensor_amax=True))),
                                           ("q8_0", dict(ggml=lambda x: q8_0(x, truncate=True)))])
def test_store_mistakes_fail_as_the_cli_says(cli, sets, tmp_path, which, mistake):
    g = ropecheck.load(sets["stores"])
    r = ropecheck.check(g, store_kernel(which=which, **mistake), stores=which)
    assert r.verdict == "fail" and r.stores["verdict"] == "fail"
    q = rope_f32(PRESET)(g["q"], g["positions"])
    k = rope_f32(PRESET)(g["k"], g["positions"])
    fn = next(iter(mistake.values()))
    tensors = {}
    for out, x in (("q_rot", q), ("k_rot", k)):
        stored = fn(x)
        tensors.update({f"{out}.{which}": stored[0], f"{out}.{which}.scale": stored[1]} if which == "e4m3fn"
                       else {f"{out}.{which}": stored})
    judged = [f"q_rot.{which}", f"k_rot.{which}"]
    c = same_as_cli(cli, sets["stores"], tmp_path, ropecheck.check(g, tensors, only=judged), tensors, "--only", ",".join(judged))
    assert c["stores"] == r.stores


@pytest.mark.parametrize("value,message", [
    ((np.zeros((4, 2, 128), np.float32), np.ones(4, np.float32)), "q_rot.e4m3fn: dtype float32, the store's codes are float8_e4m3fn"),
    (np.zeros((4, 2, 128), ml_dtypes.float8_e4m3fn), "q_rot.e4m3fn (what the kernel returned): the scale is missing"),
    ((np.zeros((4, 2, 128), ml_dtypes.float8_e4m3fn), np.full(4, np.nan, np.float32)), "q_rot.e4m3fn.scale: NaN at [0]"),
    ((np.zeros((4, 2, 64), ml_dtypes.float8_e4m3fn), np.ones(4, np.float32)), "q_rot.e4m3fn: shape [4, 2, 64], the golden"),
    ((np.zeros((4, 2, 128), ml_dtypes.float8_e5m2), np.ones(4, np.float32)), "dtype float8_e5m2, the store's codes are float8_e4m3fn"),
])
def test_bad_stores_are_one_line_errors(sets, value, message):
    g = ropecheck.load(sets["stores"])
    with pytest.raises(ValueError, match=r"^[^\n]*$") as e:
        ropecheck.check(g, lambda q, k, positions: (value, value), stores="e4m3fn")
    assert message in str(e.value)


def test_kv_cache_recipe_passes_and_a_shifted_write_fails_as_the_cli_says(cli, sets, tmp_path):
    g = ropecheck.load(sets["kv"])
    cache = g.kv_cache("bf16")
    assert cache.k_cache.shape == (4, 4, 2, 128) and np.isnan(cache.k_cache.astype(np.float32)).all()
    assert list(cache.kv_indptr) == [0, 1, 3] and list(cache.batch_indices) == [0, 0, 0, 1]
    rope = rope_f32(PRESET)

    def kernel(shift):
        def append(q, k, v, positions, cache):
            paged_append(cache, rope(k.astype(np.float32), positions).astype(ml_dtypes.bfloat16), v, shift)
        return append

    assert ropecheck.check(g, kv_cache=kernel(None)).verdict == "pass"
    r = ropecheck.check(g, kv_cache=kernel(2))
    assert r.verdict == "fail" and r.kv_cache["out_of_slot_writes"] == 1 and r.kv_cache["missing_writes"] == 1
    cache = g.kv_cache("bf16")
    kernel(2)(None, g["k"], g["v"].astype(ml_dtypes.bfloat16), g["positions"], cache)
    tensors = {"k_cache": cache.k_cache, "v_cache": cache.v_cache}
    c = same_as_cli(cli, sets["kv"], tmp_path, r, tensors, option="--kv-cache")
    assert c["kv_cache"] == r.kv_cache
    assert ropecheck.check(g, kv_cache=tensors).kv_cache == r.kv_cache  # the written tensors, as a mapping
    with pytest.raises(ValueError, match=r"^kv_cache: not with only= \(the cache is the candidate"):
        ropecheck.check(g, kv_cache=tensors, only=["k_rot"])
    with pytest.raises(ValueError, match="k_cache's dtype is not one of the set's"):
        ropecheck.check(g, kv_cache={"k_cache": cache.k_cache.astype(np.float32)})


def test_a_slot_mapped_cache(sets):
    g = ropecheck.load(sets["slots"])
    cache = g.kv_cache("f16", sentinel=-0.0)  # a declared sentinel
    assert cache.kv_indptr is None and cache.slot_mapping.shape == (2,) and (cache.k_cache.view(np.uint16) == 0x8000).all()
    rope = rope_f32(PRESET)

    def append(q, k, v, positions, cache):  # vLLM reshape_and_cache_flash: slot = block * block_size + offset
        heads = k.shape[1]
        cache.k_cache.reshape(-1, heads, k.shape[2])[cache.slot_mapping] = rope(k.astype(np.float32), positions)
        cache.v_cache.reshape(-1, heads, v.shape[2])[cache.slot_mapping] = v
        return cache.k_cache, cache.v_cache

    assert ropecheck.check(g, kv_cache=append).kv_cache["sentinel"] == "default"  # a fresh cache of 0xFF bytes
    append(None, g["k"].astype(np.float16), g["v"].astype(np.float16), g["positions"], cache)
    r = ropecheck.check(g, kv_cache=cache)  # the KvCache written in place, with its sentinel
    assert r.verdict == "pass" and r.kv_cache["sentinel"] == "declared" and r.kv_cache["cache"] == "slots", r


def test_a_given_scale_store_takes_codes_alone(cli, tmp_path):
    """golden --stores e4m3fn:scale=V: the scale is the set's (vLLM's k_scale), the kernel returns its codes."""
    out = str(tmp_path / "given")
    p = run_cli(cli, "golden", "--preset", PRESET, "--positions", "0:4", "--dtypes", "f32", "--heads", "2",
                "--stores", "e4m3fn:scale=0.0625", "--out", out, "--quiet")
    assert p.returncode == 0, p.stderr
    g = ropecheck.load(out)
    rope = rope_f32(PRESET)

    def codes(x):  # vLLM's static FP8: x / k_scale, saturated to the largest finite value, one cast
        return np.clip(x / np.float32(0.0625), -448, 448).astype(ml_dtypes.float8_e4m3fn)

    never_fails(ropecheck.check(g, lambda q, k, positions: (codes(rope(q, positions)), codes(rope(k, positions))),
                                stores="e4m3fn"))
    with pytest.raises(ValueError, match="2 parts, a e4m3fn store is its codes alone"):
        ropecheck.check(g, lambda q, k, positions: ((codes(q), np.ones(4, np.float32)),) * 2, stores="e4m3fn")


def test_a_declining_store_kernel_is_not_tested(sets):
    def declines(q, k, positions):
        raise NotImplementedError("no q4_0 here")

    r = ropecheck.check(ropecheck.load(sets["stores"]), declines, stores="q8_0")
    assert r.verdict == "not-tested" and "q8_0: no q4_0 here" in r.declined


def test_norm_weights_reach_the_kernel(sets):
    g = ropecheck.load(sets["norm"])
    assert g.q_norm["weight"].shape == (128,) and g.k_norm["eps"] == 1e-6
    w = g.spec.inverse_frequencies()

    def rope(x, positions, norm):  # binary64 RMSNorm (weight form "w"), then the rotation
        x = x.astype(np.float64)
        x = x / np.sqrt((x * x).mean(-1, keepdims=True) + norm["eps"]) * norm["weight"].astype(np.float64)
        emb = np.concatenate([positions[:, None] * w] * 2, axis=-1)[:, None, :]
        rot = np.concatenate([-x[..., 64:], x[..., :64]], axis=-1)
        return (x * np.cos(emb) + rot * np.sin(emb)).astype(np.float32)

    def kernel(q, k, positions, q_norm, k_norm):
        return rope(q, positions, q_norm), rope(k, positions, k_norm)

    assert ropecheck.check(g, kernel).verdict == "pass"


def test_mla_gets_its_rotary_offset_and_k_pe(sets):
    g = ropecheck.load(sets["mla"])
    assert g.rotary_offset == 128
    w, factor = g.spec.inverse_frequencies(), g.spec.attention_factor()

    def rotate(x, positions):  # interleaved pairs (2j, 2j+1), binary64
        a = positions[:, None] * w
        a = a[:, None, :] if x.ndim == 3 else a
        even, odd = x[..., 0::2].astype(np.float64), x[..., 1::2].astype(np.float64)
        out = np.empty(x.shape, np.float64)
        out[..., 0::2], out[..., 1::2] = even * np.cos(a) - odd * np.sin(a), even * np.sin(a) + odd * np.cos(a)
        return out * factor

    def kernel(q, k_pe, positions, rotary_offset):
        q_rot = q.astype(np.float64)
        q_rot[..., rotary_offset:] = rotate(q[..., rotary_offset:], positions)
        return q_rot.astype(np.float32), rotate(k_pe, positions).astype(np.float32)

    r = ropecheck.check(g, kernel)
    assert r.verdict == "pass" and set(r.tensors) == {"q_rot.f32", "k_pe_rot.f32"}


def test_torch_float8_store(sets):
    torch = pytest.importorskip("torch", reason="torch not installed: scripts/install-deps --torch "
                                                "(pip install torch==2.15.0 transformers==5.23.0)")
    rope = rope_f32(PRESET)

    def kernel(q, k, positions):
        out = []
        for x in (rope(q, positions), rope(k, positions)):
            t = torch.from_numpy(x)
            scale = (t.abs().amax(dim=(1, 2)) / 448).clamp(min=1 / (448 * 512))
            out.append(((t / scale[:, None, None]).clamp(-448, 448).to(torch.float8_e4m3fn), scale[:, None]))
        return out

    never_fails(ropecheck.check(ropecheck.load(sets["stores"]), kernel, stores="e4m3fn"))
