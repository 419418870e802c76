#!/usr/bin/env python3
"""Doc-test fixture: copy a safetensors file with one tensor renamed (a candidate whose names differ from
the golden set's, for the `check --map` example in docs/guide/checking-kernels.md).

    rename_tensor.py IN.safetensors OLD NEW OUT.safetensors
"""
import sys

from safetensors.numpy import load_file, save_file

if __name__ == "__main__":
    src, old, new, out = sys.argv[1:5]
    tensors = load_file(src)
    tensors[new] = tensors.pop(old)
    save_file(tensors, out)
