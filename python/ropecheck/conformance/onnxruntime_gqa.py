"""ONNX Runtime's GroupQueryAttention (`com.microsoft`, CPU) with do_rotary = 1: the rotation fused into
attention, as onnxruntime-genai's exported models use it. One-node model built with the `onnx` package:
num_heads = G query heads sharing kv_num_heads = 1 key / value head, rotary_interleaved from the
layout, a prompt without a KV cache (seqlens_k = tokens - 1, total_sequence_length = tokens).

Positions: in a prompt ORT rotates token s with row s of cos_cache / sin_cache (the position_ids
input "uses only the first element" when processing the first prompt, and a past length of 0 makes
that 0), so row t is token t's table, as for the RotaryEmbedding adapters (onnxruntime.py): any
position stream, scaling, mrope section or attention factor is carried by the caches. The caches are
the golden set's binary64 cos / sin times the attention factor, rounded once to the activation dtype:
correctly rounded tables, so a correct rotation in f32 lands in f32-reduced and one in f16 in
f16-table (ERROR_MODEL.md sections 6 and 10), as onnxruntime.py's cells.

Two judgements: `present_key` (the rotated keys ORT writes into its BNSH cache) is judged as rotated
keys in the matrix (adapter `onnxruntime-gqa`; queries are rotated too, but never returned: the cells
judge k_rot only); the attention output, [tokens][G][value_dim], through `attention_fn` (the callable an
attention golden block is checked with). CPU constraints of onnxruntime 1.31.1, measured: no bf16
kernel, head_size a multiple of 16, rotary_dim a multiple of 16 (cos_cache's width a multiple of 8:
gpt-neox-20b's 24 is declined), value head size equal to the key's (a narrower or wider V is run
in head_size-wide zero-padded slices: the output's channels are independent of each other)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._arrays import DTYPES
from .._golden import Golden, golden as make_golden
from .._spec import Spec
from ._adapter import Adapter, Declined, rope_section
from .onnxruntime import _ONNX_TYPE, caches


def gqa_model(dtype: str, tokens: int, group: int, head_dim: int, pairs: int, interleaved: bool,
              scale: float | None = None):
    """The one-node GroupQueryAttention model (inputs query [1, T, G*D], key / value [1, T, D])."""
    import onnx
    from onnx import TensorProto, helper

    et = _ONNX_TYPE[dtype]
    inputs = [("query", et, [1, tokens, group * head_dim]), ("key", et, [1, tokens, head_dim]),
              ("value", et, [1, tokens, head_dim]), ("seqlens_k", TensorProto.INT32, [1]),
              ("total_sequence_length", TensorProto.INT32, []), ("cos_cache", et, [tokens, pairs]),
              ("sin_cache", et, [tokens, pairs])]
    names = [n for n, _, _ in inputs]
    names[3:3] = ["", ""]  # past_key, past_value: none (a prompt)
    attrs: dict[str, Any] = {"num_heads": group, "kv_num_heads": 1, "do_rotary": 1,
                             "rotary_interleaved": int(interleaved)}
    if scale is not None:
        attrs["scale"] = float(scale)
    node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                            domain="com.microsoft", **attrs)
    outputs = [("output", [1, tokens, group * head_dim]), ("present_key", [1, 1, tokens, head_dim]),
               ("present_value", [1, 1, tokens, head_dim])]
    graph = helper.make_graph([node], "gqa", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(n, et, s) for n, s in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10  # what this onnxruntime reads
    onnx.checker.check_model(model)
    return model


def _session(model, dtype: str):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the op's own kernel
    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001  ORT raises its own exception types
        if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
            raise Declined(f"{dtype}: onnxruntime has no CPU GroupQueryAttention kernel for it") from e
        raise


def run_gqa(dtype: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, cos: np.ndarray, sin: np.ndarray,
            interleaved: bool, scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """output [T, G, Dv] and present_key [T, D] of one GQA call on q [T, G, D], k [T, D], v [T, Dv]
    (in `dtype`) with caches [T, pairs]."""
    tokens, group, head_dim = q.shape
    if head_dim % 16:
        raise Declined(f"head_dim {head_dim}: onnxruntime's CPU GroupQueryAttention needs a multiple of 16")
    session = _session(gqa_model(dtype, tokens, group, head_dim, cos.shape[1], interleaved, scale), dtype)
    et = DTYPES[dtype]
    feed = {"query": np.ascontiguousarray(q.astype(et).reshape(1, tokens, group * head_dim)),
            "key": np.ascontiguousarray(k.astype(et)[None]), "seqlens_k": np.array([tokens - 1], np.int32),
            "total_sequence_length": np.array(tokens, np.int32), "cos_cache": cos, "sin_cache": sin}
    outs, present_key = [], None
    for c in range(0, max(v.shape[1], 1), head_dim):  # V in head_dim-wide slices (ORT wants V as wide as K)
        part = np.zeros((tokens, head_dim), et)
        part[:, :min(head_dim, v.shape[1] - c)] = v[:, c:c + head_dim].astype(et)
        out, pk, _ = session.run(None, {**feed, "value": part[None]})
        outs.append(out.reshape(tokens, group, head_dim))
        present_key = pk[0, 0]
    return np.concatenate(outs, axis=2)[:, :, :v.shape[1]], np.ascontiguousarray(present_key)


def attention_fn(spec: Spec | str, dtype: str, *, seq_len: int | None = None,
                 scale: float | None = None) -> Callable[..., np.ndarray]:
    """fn(q [T][G][D], k [T][D], v [T][Dv], positions [T]) -> ORT's attention output [T][G][Dv] in
    `dtype`: causal by token index, scale 1/sqrt(D) unless given. The caches are built for the given
    positions from ropecheck's correctly rounded binary64 tables (a golden set at those positions)."""
    if isinstance(spec, str):
        spec = Spec.from_preset(spec)
    interleaved = rope_section(spec.to_dict())["layout"] == "interleaved"

    def fn(q, k, v, positions) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        tables = make_golden(spec, [int(p) for p in positions], heads=1, dtypes=("f32",), seq_len=seq_len)
        cos, sin = caches(tables, dtype)
        return run_gqa(dtype, np.asarray(q), np.asarray(k), np.asarray(v), cos, sin, interleaved, scale)[0]
    return fn


class OnnxGqa(Adapter):
    name = "onnxruntime-gqa"
    title = "com.microsoft GroupQueryAttention (do_rotary=1): present_key, onnxruntime CPU"
    distributions = ("onnx", "onnxruntime")
    install = "pip install onnx==1.23.2 onnxruntime==1.31.1"
    dtypes = ("f32", "f16", "bf16")
    expected = {"f32": "f32-reduced", "f16": "f16-table", "bf16": "bf16-table"}  # as onnxruntime.py's cells

    def load(self) -> None:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        if spec.get("family") != "rope":
            return "not a RoPE spec"
        rope = rope_section(spec)
        if rope["head_dim"] % 16:
            return "head_dim not a multiple of 16 (onnxruntime's CPU GroupQueryAttention requires it)"
        if (rope.get("rotary_dim") or rope["head_dim"]) % 16:
            return ("rotary_dim not a multiple of 16: GroupQueryAttention wants cos_cache's width (rotary_dim / 2) "
                    "a multiple of 8")
        return None

    def run(self, golden: Golden, dtype: str) -> tuple[None, np.ndarray]:
        if dtype not in self.dtypes:
            raise Declined(f"{dtype}: not a type of this operator")
        interleaved = rope_section(golden.spec.to_dict())["layout"] == "interleaved"
        cos, sin = caches(golden, dtype)
        q, k = golden["q"], golden["k"]
        # One call per key head (kv_num_heads = 1), all query heads as its group.
        keys = [run_gqa(dtype, q, k[:, h], k[:, h], cos, sin, interleaved)[1] for h in range(k.shape[1])]
        return None, np.stack(keys, axis=1)


class OnnxGqaAttention(OnnxGqa):
    """The same operator's attention output, judged on the golden set's attention block. Expected
    classes (ERROR_MODEL.md 16.2): the rotation's class is present_key's (caches correctly rounded to the
    activation dtype, rotation in f32: f32-reduced, f16-table); the attention arithmetic assumed from
    onnxruntime's CPU GroupQueryAttention on x86-64: Q K^T and P V through MLAS's f32 GEMM (f16 inputs
    converted to f32: MLAS has no half-precision GEMM there), softmax in f32, probabilities held in f32
    or the activation dtype, the output rounded once to it: u_acc = 2^-24, u_mid <= the dtype's, inside
    both classes."""
    name = "onnxruntime-gqa-attention"
    title = "com.microsoft GroupQueryAttention (do_rotary=1): attention output, onnxruntime CPU"
    judges = "attention"

    def attention_fn(self, spec: Any, dtype: str, *, seq_len: int, scale: float) -> Callable[..., np.ndarray]:
        if dtype not in self.dtypes:
            raise Declined(f"{dtype}: not a type of this operator")
        return attention_fn(spec, dtype, seq_len=seq_len, scale=scale)
