"""ropecheck/kernel_abi.h for Python's ctypes: load a kernel library and call its rope_apply on raw buffers.

The one C contract ropecheck's kernels are exported through (abi/KERNEL_ABI.md); ropecheck's own CPU
recipes are the library libropecheck_builtin_kernels.so (kut/src/builtin_plugin.cpp), configured with
ropecheck_kernel_configure ("RECIPE:threads=N"). Used by bench/torch_side_by_side.py and its test.
Only what they need: RoPE apply for specs without scaling (inv_freq is left NULL: a kernel that
derives its frequencies, as ropecheck's do, reads the spec JSON).
"""

from __future__ import annotations

import ctypes
import json
from typing import Optional

ABI_VERSION = 1
OK, UNSUPPORTED = 0, 1
DTYPES = {"f64": 0, "f32": 1, "f16": 2, "bf16": 3}
LAYOUTS = {"half_split": 0, "interleaved": 1}
MESSAGE_CAPACITY = 512


class RopeParams(ctypes.Structure):
    _fields_ = [("head_dim", ctypes.c_int32), ("rotary_dim", ctypes.c_int32), ("pairs", ctypes.c_int32),
                ("layout", ctypes.c_int32), ("base", ctypes.c_double), ("scaling_type", ctypes.c_int32),
                ("mrope_mode", ctypes.c_int32), ("mrope_section", ctypes.c_int32 * 3),
                ("yarn_truncate", ctypes.c_int32), ("factor", ctypes.c_double),
                ("max_position_embeddings", ctypes.c_int64), ("original_max_position_embeddings", ctypes.c_int64),
                ("seq_len", ctypes.c_int64), ("low_freq_factor", ctypes.c_double),
                ("high_freq_factor", ctypes.c_double), ("beta_fast", ctypes.c_double),
                ("beta_slow", ctypes.c_double), ("mscale", ctypes.c_double), ("mscale_all_dim", ctypes.c_double),
                ("longrope_ext", ctypes.POINTER(ctypes.c_double)), ("inv_freq", ctypes.POINTER(ctypes.c_double)),
                ("attention_factor", ctypes.c_double)]


class RopeProblem(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("out_dtype", ctypes.c_int32), ("spec_json", ctypes.c_char_p),
                ("rope", RopeParams), ("input_name", ctypes.c_char_p), ("tokens", ctypes.c_int64),
                ("heads", ctypes.c_int32), ("position_streams", ctypes.c_int32), ("positions", ctypes.c_void_p),
                ("x", ctypes.c_void_p), ("out", ctypes.c_void_p), ("message", ctypes.c_void_p),
                ("message_capacity", ctypes.c_uint32), ("reserved1", ctypes.c_uint32)]


# The sizes kernel_abi.h promises on LP64 (abi/KERNEL_ABI.md, "Versioning").
assert ctypes.sizeof(RopeParams) == 152 and ctypes.sizeof(RopeProblem) == 232


class AbiError(Exception):
    """A call that did not return ROPECHECK_OK: .rc and the kernel's message."""

    def __init__(self, what: str, rc: int, message: str):
        super().__init__(f"{what} returned {rc}" + (f": {message}" if message else ""))
        self.rc, self.message = rc, message


class KernelLibrary:
    """A kernel library loaded with ctypes. spec: a spec JSON object (core/SPEC_FORMAT.md) of a RoPE
    spec without scaling; rope_apply then rotates [tokens, heads, head_dim] float32 x into out."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)  # OSError when it cannot be loaded
        self.lib = lib
        lib.ropecheck_kernel_abi_version.restype = ctypes.c_uint32
        lib.ropecheck_kernel_name.restype = ctypes.c_char_p
        lib.ropecheck_rope_apply.argtypes = [ctypes.POINTER(RopeProblem)]
        lib.ropecheck_rope_apply.restype = ctypes.c_int
        self.version = int(lib.ropecheck_kernel_abi_version())
        self._message = ctypes.create_string_buffer(MESSAGE_CAPACITY)
        self._spec = b""
        self._params = RopeParams()

    @property
    def name(self) -> str:
        return self.lib.ropecheck_kernel_name().decode()

    def configure(self, options: str) -> None:
        """ropecheck_kernel_configure(options); AbiError when the kernel refuses them or lacks the export."""
        fn = getattr(self.lib, "ropecheck_kernel_configure", None)
        if fn is None:
            raise AbiError("ropecheck_kernel_configure", -1, "not exported by this library")
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32]
        fn.restype = ctypes.c_int
        ctypes.memset(self._message, 0, MESSAGE_CAPACITY)
        rc = fn(options.encode(), self._message, MESSAGE_CAPACITY)
        if rc != OK:
            raise AbiError(f"ropecheck_kernel_configure('{options}')", rc, self._message.value.decode(errors="replace"))

    def set_spec(self, spec: dict) -> None:
        r = spec["rope"]
        if r.get("scaling", {"type": "none"}).get("type", "none") != "none":
            raise ValueError("kernel_abi_ctypes fills specs without scaling only")
        self._spec = json.dumps(spec).encode()
        p = RopeParams()
        p.head_dim = r["head_dim"]
        p.rotary_dim = r.get("rotary_dim", r["head_dim"])
        p.pairs = p.rotary_dim // 2
        p.layout = LAYOUTS[r.get("layout", "half_split")]
        p.base = r["base"]
        p.factor = 1.0
        p.attention_factor = 1.0
        self._params = p

    def rope_apply(self, dtype: str, input_name: str, x_ptr: int, out_ptr: int, tokens: int, heads: int,
                   positions_ptr: Optional[int]) -> None:
        """x: float32 [tokens, heads, head_dim] at x_ptr; out: that shape in dtype at out_ptr; positions:
        int64 [tokens]. Raises AbiError on any return but ROPECHECK_OK."""
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype '{dtype}' (f32, bf16, f16, f64)")
        q = RopeProblem()
        q.abi_version = ABI_VERSION
        q.out_dtype = DTYPES[dtype]
        q.spec_json = self._spec
        q.rope = self._params
        q.input_name = input_name.encode()
        q.tokens, q.heads, q.position_streams = tokens, heads, 1
        q.positions, q.x, q.out = positions_ptr, x_ptr, out_ptr
        q.message = ctypes.addressof(self._message)
        q.message_capacity = MESSAGE_CAPACITY
        self._message[0] = b"\0"
        rc = self.lib.ropecheck_rope_apply(ctypes.byref(q))
        if rc != OK:
            raise AbiError("ropecheck_rope_apply", rc, self._message.value.decode(errors="replace"))
