#!/usr/bin/env python3
"""The fast-math rule of the CUDA kernels, checked without a GPU.

Rule (kernels/cuda/README.md): only the fast-sincos recipe uses fast-math intrinsics (__sinf /
__cosf, which compile to the PTX instructions sin.approx.f32 / cos.approx.f32), and nothing is
compiled with --use_fast_math.

Checks:
  1. In the PTX the library ships (every PTX module embedded in the .nv_fatbin section of the
     library's object files, one per virtual architecture; the library is built with --no-compress so
     that it is plain text), every function that contains sin.approx / cos.approx is a kernel
     instantiated for the fast-sincos recipe. Kernels are templates over a recipe tag type, so the
     mangled name carries it: ...cuda_detail6recipe11fast_sincosE...
  2. Not vacuous: every fast-sincos kernel does contain both instructions, and the other recipes'
     kernels are present (one per recipe tag at least), in each module that has recipe kernels. A
     module without any recipe tag (the fused recipes' stages, fused.cu, which compute no sin / cos)
     gets checks 1 and 3: no sin.approx / cos.approx in it at all.
  3. No sign of fast-math compilation anywhere in the PTX: no .ftz (flush to zero) modifier, no
     div.approx / div.full (-prec-div=false), no sqrt.approx (-prec-sqrt=false).
  4. With --compile-commands: every nvcc command that compiles kernels/cuda/*.cu (the library's) is free of --use_fast_math, -ftz=true, -prec-div=false, -prec-sqrt=false.
Checks 1-3 hold for each PTX module that has functions; objects without device code (a host-only
translation unit, a PTX module with no function) are listed and skipped, but at least one module must
have functions.

Usage: check_ptx_fast_math.py [--compile-commands compile_commands.json] FILE...
  FILE is a PTX file or an ELF object file whose .nv_fatbin section holds uncompressed PTX.
Exit 0 when every check holds, 1 with one line per violation otherwise, 2 on unusable input.
"""
import argparse
import json
import re
import shutil
import struct
import subprocess
import sys

APPROX_TRIG = re.compile(r"\b(sin|cos)\.approx\b")
FAST_MATH_SIGNS = re.compile(r"\.ftz\b|\bdiv\.(approx|full)\b|\bsqrt\.approx\b")
HEADER = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
RECIPE_TAG = re.compile(r"6recipe(\d+)")
FAST_MATH_FLAGS = ("use_fast_math", "ftz=true", "prec-div=false", "prec-sqrt=false")
EXPECTED_TAGS = {"accurate", "hf", "meta", "ggml", "bf16_table", "f16_table", "bf16_inv_freq", "f16_inv_freq",
                 "bf16_positions", "f16_positions", "fast_sincos", "accurate_f64"}


def recipe_tag(mangled):
    """The recipe tag named in a mangled symbol (the identifier after 6recipe<len>), or None."""
    m = RECIPE_TAG.search(mangled)
    if not m:
        return None
    n = int(m.group(1))
    return mangled[m.end():m.end() + n]


def demangle(names):
    """Readable names for the report: c++filt (binutils) when present, else the mangled ones."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, check=False).stdout
    lines = out.splitlines()
    return {n: (lines[i] if i < len(lines) else n) for i, n in enumerate(names)}


def functions(ptx_text):
    """[(kind, name, body lines)] for every function with a body in a PTX module."""
    result, pending, depth, body, current = [], None, 0, [], None
    for line in ptx_text.splitlines():
        code = line.split("//", 1)[0]
        if current is None:
            m = HEADER.match(code)
            if m and not code.rstrip().endswith(";"):
                pending = (m.group(1), m.group(2))
            if pending and "{" in code:
                current, depth, body = pending, 0, []
                pending = None
            else:
                continue
        depth += code.count("{") - code.count("}")
        body.append(code)
        if depth == 0:
            result.append((current[0], current[1], body))
            current = None
    if current is not None:
        raise ValueError("unterminated function body: " + current[1])
    return result


def elf_section(data, wanted):
    """The bytes of section `wanted` of a little-endian ELF64 file, or None when it has none."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    for name, _type, _flags, _addr, offset, size in headers:
        end = data.index(b"\0", names_at + name)
        if data[names_at + name:end].decode() == wanted:
            return data[offset:offset + size]
    return None


PTX_START = re.compile(rb"\.version \d+\.\d+\s*\n\s*\.target ")  # a PTX module's first directives


def embedded_ptx(path):
    """[(label, PTX text)] for every PTX module in an object file's fatbin (each is NUL-terminated)."""
    with open(path, "rb") as f:
        data = f.read()
    fatbin = elf_section(data, ".nv_fatbin")
    if fatbin is None:
        return []
    modules = []
    for m in PTX_START.finditer(fatbin):
        end = fatbin.find(b"\0", m.start())
        text = fatbin[m.start():end if end >= 0 else len(fatbin)].decode("utf-8")
        target = re.search(r"^\.target\s+(\w+)", text, re.M)
        modules.append((f"{path} [PTX .target {target.group(1) if target else '?'}]", text))
    if not modules:
        print(f"check_ptx_fast_math: {path} has a fatbin but no plain-text PTX in it (compressed? the library "
              "must be built with --no-compress)", file=sys.stderr)
        sys.exit(2)
    return modules


def ptx_modules(path):
    """[(label, PTX text)] of a PTX file or of the fatbin of an object file."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
        if head == b"\x7fELF":
            return embedded_ptx(path)
        with open(path, encoding="utf-8") as f:
            return [(path, f.read())]
    except (OSError, ValueError, UnicodeDecodeError, struct.error) as e:
        print(f"check_ptx_fast_math: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)


def check_ptx(path, text, problems):
    """Checks 1-3 on one PTX module; False when it has no function (nothing to check)."""
    funcs = functions(text)
    if not funcs:
        print(f"{path}: no device functions, skipped")
        return False
    names = demangle([name for _, name, _ in funcs])
    tags_seen, fast_kernels = set(), 0
    for kind, name, body in funcs:
        tag = recipe_tag(name)
        if tag:
            tags_seen.add(tag)
        ops = {m.group(0) for line in body for m in APPROX_TRIG.finditer(line)}
        if ops and tag != "fast_sincos":
            problems.append(f"{path}: {kind} {names[name]} (recipe {tag}) uses {', '.join(sorted(ops))}")
        if tag == "fast_sincos" and kind == "entry":
            fast_kernels += 1
            missing = {"sin.approx", "cos.approx"} - ops
            if missing:
                problems.append(f"{path}: fast-sincos kernel {names[name]} has no {', '.join(sorted(missing))}")
        for line in body:
            m = FAST_MATH_SIGNS.search(line)
            if m:
                problems.append(f"{path}: {names[name]} has '{line.strip()}' ({m.group(0)}: fast-math compilation)")
                break
    if not tags_seen:  # recipe-free stages (fused.cu: norm, stores, cache append): no approximation at all
        print(f"{path}: {len(funcs)} functions, no recipe tag (recipe-free stages: checks 1 and 3 only)")
        return True
    missing_tags = EXPECTED_TAGS - tags_seen
    if missing_tags:
        problems.append(f"{path}: no kernel for recipe tag(s) {', '.join(sorted(missing_tags))}")
    if fast_kernels == 0:
        problems.append(f"{path}: no fast-sincos kernel found (the check would be vacuous)")
    print(f"{path}: {len(funcs)} functions, {len(tags_seen)} recipe tags, {fast_kernels} fast-sincos kernels")
    return True


def check_compile_commands(path, problems):
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_ptx_fast_math: cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)
    seen = 0
    for e in entries:
        src = e.get("file", "")
        if "/kernels/cuda/" not in src or not src.endswith(".cu"):
            continue
        seen += 1
        cmd = e.get("command") or " ".join(e.get("arguments", []))
        for flag in FAST_MATH_FLAGS:
            if flag in cmd:
                problems.append(f"{path}: {src} is compiled with {flag}")
    if seen == 0:
        problems.append(f"{path}: no compile command for kernels/cuda/*.cu")
    print(f"{path}: {seen} nvcc commands for kernels/cuda/*.cu checked")


SELF_TEST_PTX = """
.visible .entry _ZN9ropecheck7kernels11cuda_detail12_GLOBAL__N_114rope_fast_kernelINS1_6recipe2hfELNS1_2DTE1EEEvNS1_9ApplyArgsEiii(
	.param .u32 p
)
{
	.reg .f32 %f<3>;
	sin.approx.f32 %f1, %f2;
}
.visible .entry _ZN9ropecheck7kernels11cuda_detail12_GLOBAL__N_114rope_fast_kernelINS1_6recipe11fast_sincosELNS1_2DTE1EEEvNS1_9ApplyArgsEiii(
	.param .u32 p
)
{
	.reg .f32 %f<3>;
	{ // a nested block
	cos.approx.f32 %f1, %f2;
	}
	mul.rn.ftz.f32 %f1, %f1, %f2;
}
"""


def self_test():
    """The checks must catch what they are for: an hf kernel with sin.approx, a fast-sincos kernel
    without sin.approx, an .ftz operation, and missing recipes (synthetic PTX)."""
    import os
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(SELF_TEST_PTX)
        name = f.name
    problems = []
    try:
        for label, text in ptx_modules(name):
            check_ptx(label, text, problems)
    finally:
        os.unlink(name)
    expected = ["(recipe hf) uses sin.approx", "has no sin.approx", "(.ftz: fast-math compilation)",
                "no kernel for recipe tag(s)"]
    missed = [e for e in expected if not any(e in p for p in problems)]
    if missed:
        print("FAILED: the checker's self-test did not report: " + "; ".join(missed))
        return False
    print(f"self-test: the checker reports all {len(expected)} planted violations")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-commands", help="compile_commands.json of the build")
    ap.add_argument("ptx", nargs="+", help="PTX files, or object files with PTX in their fatbin")
    args = ap.parse_args()
    if not self_test():
        return 1
    problems = []
    checked = 0
    for p in args.ptx:
        for label, text in ptx_modules(p):
            checked += check_ptx(label, text, problems)
    if checked == 0:
        print("check_ptx_fast_math: no PTX module with device functions in the files given", file=sys.stderr)
        return 2
    if args.compile_commands:
        check_compile_commands(args.compile_commands, problems)
    for p in problems:
        print("FAILED: " + p)
    if problems:
        print(f"{len(problems)} violation(s) of the fast-math rule; reproduce with: {' '.join(sys.argv)}")
        return 1
    print("PASSED: sin.approx / cos.approx only in fast-sincos kernels, no fast-math compilation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
