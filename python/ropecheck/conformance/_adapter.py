"""What an adapter is: one real RoPE implementation, called through its own public code on a golden
set's inputs, returning q_rot / k_rot in ropecheck's [tokens, heads, head_dim] layout."""
from __future__ import annotations

import importlib.metadata
from typing import Any, Callable

import numpy as np

from .._golden import Golden


class Declined(Exception):
    """The implementation cannot express this case (a variant, a dtype, a missing CPU kernel): the
    cell is not tested, with this message as the reason; never passed."""


class NotTested(Exception):
    """The implementation could not be judged here (e.g. an emulator known to compute wrong values):
    the cell is not tested, with this message as the reason, and the run is not-tested (exit 3)."""


class Adapter:
    """Subclasses set the class attributes and implement `supports` and `run`."""

    name: str = ""                 # --impl name
    title: str = ""                # what is called, in words (the matrix's row label)
    distributions: tuple[str, ...] = ()   # PyPI distributions whose versions the matrix records
    install: str = ""              # the command that installs what is missing
    dtypes: tuple[str, ...] = ("f32",)
    # The class a correct implementation lands in with the inputs this adapter gives it, per dtype
    # (accuracy/ERROR_MODEL.md); landing in a weaker one is a finding.
    expected: dict[str, str] = {}
    # What its cells judge: "rotations" (run() returns q_rot / k_rot) or "attention" (attention_fn()
    # computes the outputs of the golden set's attention block, judged with the output classes of
    # accuracy/ERROR_MODEL.md section 16.4 by check(golden, attention=fn)), or "stores" (a StoreAdapter,
    # _stores_run.py: quantized stores of k_rot judged by `ropecheck check`).
    judges: str = "rotations"

    def missing(self) -> str | None:
        """None when the implementation imports, else why not (the import error, one line)."""
        try:
            self.load()
        except ImportError as e:  # an absent package, or one that breaks on import
            return f"{type(e).__name__}: {e}".splitlines()[0]
        return None

    def load(self) -> None:
        """Imports the implementation (ImportError when it is not installed)."""
        raise NotImplementedError

    def versions(self) -> dict[str, str]:
        out = {}
        for d in self.distributions:
            try:
                out[d] = importlib.metadata.version(d)
            except importlib.metadata.PackageNotFoundError:
                out[d] = "absent"
        return out

    def expected_class(self, spec: dict[str, Any], dtype: str) -> str:
        """The class expected for this spec and dtype (by default `expected[dtype]`)."""
        return self.expected[dtype]

    def supports(self, spec: dict[str, Any]) -> str | None:
        """None when the implementation can express `spec` (Spec.to_dict()), else why not."""
        raise NotImplementedError

    def note(self, spec: dict[str, Any]) -> str | None:
        """A difference from Hugging Face that the cells of `spec` carry whatever their verdict (e.g.
        one by design, or one the golden inputs do not reach), shown in the matrix; None for none."""
        return None

    def attention_fn(self, spec: Any, dtype: str, *, seq_len: int, scale: float) -> Callable[..., Any]:
        """For judges == "attention": fn(q [T][G][D], k [T][D], v [T][Dv], positions [T]) -> the output
        [T][G][Dv] in `dtype`, causal, with the block's seq_len and softmax scale."""
        raise NotImplementedError

    def run(self, golden: Golden, dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """q_rot, k_rot of the golden inputs in `dtype`, shaped [tokens, heads, head_dim] (q_rot None
        when the implementation never returns it); raises Declined for what it cannot do."""
        raise NotImplementedError


def rope_section(spec: dict[str, Any]) -> dict[str, Any]:
    return spec.get("rope") or {}
