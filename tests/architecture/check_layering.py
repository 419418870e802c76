#!/usr/bin/env python3
"""The module graph of docs/ARCHITECTURE.md, enforced.

From files the build writes and the tree holds (no compilation), for every target of the project:
  1. place: every source of a target lies in the target's own folder (no folder holds a file of another
     folder's target);
  2. links: the transitive closure of the target's links (CMake's link graph, written at configure time
     to <build>/ropecheck_link_graph.txt by cmake/ropecheckLayering.cmake) stays inside the modules it may
     use and the external libraries it may use;
  3. includes: the transitive closure of `#include "..."` of every file of the target (its sources and,
     for a library, the headers of its include/ and include_private/ folders) names only headers of modules
     it may use, and no forbidden external header (MPFR / Boost.Multiprecision, RapidCheck, GoogleTest).
     include_private/ is a target's build-tree-only include folder (test scaffolding, never installed): its
     headers are the target's own like those of include/.
Usage: check_layering.py SOURCE_DIR BUILD_DIR. Exit 0 when the graph holds, 1 with one line per
violation otherwise.
"""
import os
import re
import sys

SRC, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])

# The floors of docs/ARCHITECTURE.md: a module may use the modules listed for it (a closure: what they
# use comes with them). External libraries each may use, by link name.
USES = {
    "core": [],
    "accuracy": ["core"],
    "formulas": ["core"],
    "io": ["core"],
    "kernel_abi": [],
    "fast_rounding": ["core", "formulas", "reference"],  # reference's own units, compiled apart
    "reference": ["core", "formulas", "fast_rounding"],
    "kernels": ["core", "formulas"],
    "attention": ["core", "formulas", "accuracy", "reference"],
    "attention_files": ["attention", "io"],  # golden sets' attached files, not installed
    "cuda_kernels": ["core", "formulas", "kernels"],
    "kut": ["core", "formulas", "kernels", "kernel_abi"],
    "kut_cuda": ["kut", "cuda_kernels"],
    "builtin_kernels": ["kut", "kernel_abi"],
    "kernel_host": ["kernel_abi"],
    "plugin": ["kut", "kut_cuda", "kernel_abi", "io", "reference"],
    "golden": ["io", "reference", "attention_files"],  # privately: --scores, --attention
    "checker": ["golden", "accuracy", "kut", "io", "reference", "attention"],
    "props": ["accuracy", "reference", "kut", "attention"],
    "props_gtest": ["props"],
    "drift": ["accuracy", "reference", "attention", "kut", "kut_cuda", "plugin", "golden", "io"],
    "ropecheck": ["drift", "props", "checker", "plugin", "golden"],  # the CLI
    "_core": ["drift", "props", "checker", "plugin", "golden"],      # the Python extension module
}
MPFR = {"PkgConfig::MPFR", "Boost::headers", "Eigen3::Eigen"}
FILES = {"PkgConfig::LIBZIP", "ZLIB::ZLIB", "OpenSSL::Crypto"}
COMMON = {"nlohmann_json::nlohmann_json", "fmt::fmt", "Threads::Threads", "OpenMP::OpenMP_CXX", "dl",
          "CUDA::cudart", "CUDA::cudart_static", "cuda_flags", "CLI11::CLI11"}
EXTERNAL = {  # beyond COMMON; what a module's closure brings is allowed too
    "io": FILES, "reference": MPFR, "fast_rounding": MPFR, "props": {"rapidcheck"},
    "props_gtest": {"GTest::gtest"},
}
MPFR_HEADERS = ["mpfr.h", "boost/multiprecision", "Eigen/"]
TEST_HEADERS = ["rapidcheck", "gtest/", "gmock/"]
# Header-owning modules: include prefix -> module.
HEADER_MODULE = {"ropecheck/core/": "core", "ropecheck/accuracy/": "accuracy", "ropecheck/formulas/": "formulas",
                 "ropecheck/io/": "io", "ropecheck/reference/": "reference", "ropecheck/kernels/": "kernels",
                 "ropecheck/attention/": "attention",
                 "ropecheck/kernel_abi.h": "kernel_abi", "ropecheck/kut/": "kut", "ropecheck/plugin/": "plugin",
                 "ropecheck/golden/": "golden", "ropecheck/checker/": "checker", "ropecheck/props/": "props",
                 "ropecheck/drift/": "drift"}
MODULE_DIRS = ("core", "accuracy", "formulas", "io", "reference", "kernels", "attention", "abi", "kut", "plugin", "golden", "checker",
               "props", "drift")
INCLUDE_DIRS = [os.path.join(SRC, d, sub) for d in MODULE_DIRS for sub in ("include", "include_private")]


def closure(module):
    seen, stack = set(), [module]
    while stack:
        for d in USES.get(stack.pop(), []):
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return seen


violations = []
targets = {}
with open(os.path.join(BUILD, "ropecheck_link_graph.txt")) as f:
    for line in f:
        name, folder, links, sources = (line.rstrip("\n").split("|") + ["", "", ""])[:4]
        module = re.sub(r"^ropecheck_", "", name)
        clean = []
        for d in (x for x in re.split(r";", links) if x):
            d = re.sub(r"^\$<LINK_ONLY:(.*)>$", r"\1", d)
            if d.startswith("$<"):
                continue
            clean.append(re.sub(r"^ropecheck::", "ropecheck_", d))
        targets[module] = (folder, clean, [s for s in sources.split(";") if s])

for module in targets:
    if module not in USES:
        violations.append(f"{module}: a target without a rule (add it to USES in tests/architecture/check_layering.py)")
for module in USES:
    if module not in targets and module not in ("cuda_kernels", "kut_cuda", "_core", "builtin_kernels", "props_gtest"):
        violations.append(f"{module}: not in the link graph (was it renamed? update tests/architecture)")

# 1. Place.
for module, (folder, _, sources) in targets.items():
    for s in sources:
        p = s if os.path.isabs(s) else os.path.join(folder, s)
        p = os.path.normpath(p)
        if p.startswith(BUILD + os.sep) or not p.startswith(SRC + os.sep):
            continue  # generated (embedded presets, the host's path) or an object library's objects
        if not p.startswith(os.path.normpath(folder) + os.sep):
            violations.append(f"{module}: source {os.path.relpath(p, SRC)} lies outside its folder "
                              f"{os.path.relpath(folder, SRC)}")

# 2. Links.
for module, (folder, _, _) in targets.items():
    allowed = closure(module)
    ext = set(COMMON)
    for m in allowed | {module}:
        ext |= EXTERNAL.get(m, set())
    seen, stack, parent = set(), [module], {}
    while stack:
        t = stack.pop()
        for d in targets.get(t, (None, [], []))[1]:
            d_mod = re.sub(r"^ropecheck_", "", d) if d.startswith("ropecheck_") else d
            if d_mod.endswith("_asan"):
                continue
            if d_mod not in seen:
                seen.add(d_mod)
                parent[d_mod] = t
                if d_mod in targets:
                    stack.append(d_mod)
    for d in sorted(seen):
        ok = d in allowed or d in ext or (d not in USES and not d.startswith("ropecheck") and d.startswith("-"))
        if d in USES and d not in allowed:
            ok = False
        if not ok:
            path, t = [d], d
            while t != module:
                t = parent[t]
                path.append(t)
            violations.append(f"{module} links {d}: {' -> '.join(reversed(path))}")

# 3. Includes.
INC = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def resolve(name, here):
    for d in [here] + INCLUDE_DIRS:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return os.path.normpath(p)
    return None


def includes_of(path):
    seen, stack, names = set(), [path], []
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        text = open(p, encoding="utf-8", errors="replace").read()
        for name in INC.findall(text):
            names.append((name, p))
            r = resolve(name, os.path.dirname(p))
            if r and r not in seen:
                stack.append(r)
    return names


# A folder's include/ and include_private/ belong to its library with the shortest name (kut/: kut, not
# kut_cuda or builtin_kernels; plugin/: plugin, not the kernel host; reference/: reference, not fast_rounding).
include_owner = {}
for module, (folder, _, _) in targets.items():
    if module in ("kernel_host", "ropecheck", "_core"):
        continue
    if folder not in include_owner or len(module) < len(include_owner[folder]):
        include_owner[folder] = module

# attention/include_private/ is the golden sets' attached files (attention_files, which may use io/).
PRIVATE_INCLUDE_OWNER = {os.path.join("attention", "include_private"): "attention_files"}

for module, (folder, _, sources) in targets.items():
    allowed = closure(module) | {module}
    mpfr_ok = bool(allowed & {"reference", "fast_rounding"})
    files = [s if os.path.isabs(s) else os.path.join(folder, s) for s in sources]
    files = [os.path.normpath(p) for p in files if p.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh"))
             and os.path.normpath(p).startswith(os.path.normpath(SRC)) and os.path.isfile(p)]
    for inc in (os.path.join(folder, "include"), os.path.join(folder, "include_private")):
        owner = PRIVATE_INCLUDE_OWNER.get(os.path.relpath(inc, SRC), include_owner.get(folder))
        if os.path.isdir(inc) and owner == module:
            for root, _, fs in os.walk(inc):
                files += [os.path.join(root, f) for f in fs if f.endswith((".hpp", ".h"))]
    for p in files:
        rel = os.path.relpath(p, SRC)
        for name, where in includes_of(p):
            bad = None
            for prefix, owner in HEADER_MODULE.items():
                if name.startswith(prefix) and owner not in allowed:
                    bad = f"module {owner}"
            if not mpfr_ok and any(name.startswith(h) for h in MPFR_HEADERS):
                bad = "MPFR / Boost / Eigen"
            if module not in ("props", "props_gtest", "ropecheck", "_core") and any(name.startswith(h) for h in TEST_HEADERS):
                bad = "a test framework"
            if module == "props" and name.startswith("gtest/"):
                bad = "GoogleTest"
            if bad:
                violations.append(f"{module}: {rel} reaches #include <{name}> of {bad} "
                                  f"(through {os.path.relpath(where, SRC)})")

for v in sorted(set(violations)):
    print("layering: " + v)
print(f"layering: {len(targets)} targets checked, {len(set(violations))} violations")
sys.exit(1 if violations else 0)
