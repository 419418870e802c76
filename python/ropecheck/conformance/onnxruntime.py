"""ONNX Runtime's RotaryEmbedding kernels (CPU): the standard ONNX operator (opset 23) and the
`com.microsoft` contrib operator, each as a one-node model built with the `onnx` package and run by
`onnxruntime.InferenceSession`.

Both operators take the cos / sin caches from the caller. The adapter builds them from the golden
set's binary64 tables: cache[t, j] = attention_factor * cos.f64[t, j] (and sin) evaluated in binary64,
then rounded once to the activation dtype (bf16: numpy's cast through f32). Row t belongs to token t
(position_ids = 0, 1, ..., tokens - 1), so any position stream, scaling or mrope section is carried
by the caches and the operator is judged on its own arithmetic: the rotation, in the dtype it
computes in. A correct kernel then lands, for f32, in f32-reduced (correctly rounded tables, rotation
in f32) and, for f16 / bf16, in the table class of that dtype (tables rounded to it)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .._arrays import DTYPES
from .._golden import Golden
from ._adapter import Adapter, Declined, rope_section

_ONNX_TYPE = {"f32": 1, "f16": 10, "bf16": 16}  # onnx.TensorProto.FLOAT, FLOAT16, BFLOAT16


def caches(golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """[tokens, rotary_dim / 2] cos and sin caches with the attention factor folded in, as above."""
    att = golden.attention_factor
    cos = golden["cos.f64"] * att
    sin = golden["sin.f64"] * att
    return np.ascontiguousarray(cos.astype(DTYPES[dtype])), np.ascontiguousarray(sin.astype(DTYPES[dtype]))


class _OnnxRotary(Adapter):
    distributions = ("onnx", "onnxruntime")
    install = "pip install onnx==1.23.2 onnxruntime==1.31.1"
    dtypes = ("f32", "f16", "bf16")
    expected = {"f32": "f32-reduced", "f16": "f16-table", "bf16": "bf16-table"}
    domain = ""
    opset = 23

    def load(self) -> None:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401

    def supports(self, spec: dict[str, Any]) -> str | None:
        if spec.get("family") != "rope":
            return "not a RoPE spec"
        return None

    def _inputs(self, x, pos, cos, sin) -> list[tuple[str, Any]]:
        raise NotImplementedError

    def _model(self, dtype: str, shape: list[int], pairs: int, heads: int, rope: dict[str, Any]):
        import onnx
        from onnx import TensorProto, helper

        et = _ONNX_TYPE[dtype]
        tokens = shape[2]
        specs = {"X": (et, shape), "position_ids": (TensorProto.INT64, [1, tokens]),
                 "cos_cache": (et, [tokens, pairs]), "sin_cache": (et, [tokens, pairs])}
        names = [n for n, _ in self._inputs(None, None, None, None)]
        attrs = {"interleaved": int(rope["layout"] == "interleaved"), "rotary_embedding_dim": 2 * pairs}
        if self.domain:
            attrs["num_heads"] = heads  # the contrib op asks for it with rotary_embedding_dim
        node = helper.make_node("RotaryEmbedding", names, ["Y"], domain=self.domain, **attrs)
        graph = helper.make_graph([node], "rope", [helper.make_tensor_value_info(n, *specs[n]) for n in names],
                                  [helper.make_tensor_value_info("Y", et, shape)])
        imports = [helper.make_opsetid("", 23)] + ([helper.make_opsetid(self.domain, 1)] if self.domain else [])
        model = helper.make_model(graph, opset_imports=imports)
        model.ir_version = 10  # what this onnxruntime reads
        onnx.checker.check_model(model)
        return model

    def run(self, golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        import onnxruntime as ort

        if dtype not in self.dtypes:
            raise Declined(f"{dtype}: not a type of this operator")
        spec = golden.spec.to_dict()
        rope = rope_section(spec)
        cos, sin = caches(golden, dtype)
        tokens, heads, head_dim = golden["q"].shape
        shape = [1, heads, tokens, head_dim]
        model = self._model(dtype, shape, cos.shape[1], heads, rope)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the op's own kernel
        try:
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001  no kernel for this type (ORT raises its own exception types)
            if "NOT_IMPLEMENTED" in str(e) or "Could not find an implementation" in str(e):
                raise Declined(f"{dtype}: onnxruntime has no CPU kernel for it") from e
            raise
        pos = np.arange(tokens, dtype=np.int64)[None]
        out = []
        for name in ("q", "k"):
            x = np.ascontiguousarray(golden[name].astype(DTYPES[dtype]).transpose(1, 0, 2)[None])
            y = session.run(["Y"], dict(self._inputs(x, pos, cos, sin)))[0]
            out.append(np.ascontiguousarray(y[0].transpose(1, 0, 2)))
        return out[0], out[1]


class OnnxStandard(_OnnxRotary):
    name = "onnxruntime"
    title = "ONNX RotaryEmbedding (opset 23), onnxruntime CPU"

    def _inputs(self, x, pos, cos, sin):
        return [("X", x), ("cos_cache", cos), ("sin_cache", sin), ("position_ids", pos)]


class OnnxContrib(_OnnxRotary):
    name = "onnxruntime-contrib"
    title = "com.microsoft RotaryEmbedding, onnxruntime CPU"
    domain = "com.microsoft"

    def _inputs(self, x, pos, cos, sin):
        return [("X", x), ("position_ids", pos), ("cos_cache", cos), ("sin_cache", sin)]
