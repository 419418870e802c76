#!/usr/bin/env python3
"""The module graph of docs/ARCHITECTURE.md, enforced.

Two checks, both from files the build writes or the tree holds (no compilation):
  1. links: the CMake link graph (written at configure time to <build>/ropecheck_link_graph.txt by
     cmake/ropecheckLayering.cmake) must not let a module reach a target it must not link, directly
     or transitively (e.g. the checker -> RapidCheck, kernels -> MPFR);
  2. includes: the transitive closure of `#include "..."` of every source file of a module, resolved
     against the repository's include folders, must not reach a forbidden header (mpfr.h,
     boost/multiprecision, rapidcheck, gtest) or a header of a module it must not use.
Usage: check_layering.py SOURCE_DIR BUILD_DIR. Exit 0 when the graph holds, 1 with one line per
violation otherwise.
"""
import os
import re
import sys

SRC, BUILD = sys.argv[1], sys.argv[2]

# module -> (targets it must never reach, header prefixes its sources must never include)
MPFR = ["PkgConfig::MPFR", "Boost::headers", "Eigen3::Eigen"]
TESTING = ["rapidcheck", "GTest::gtest", "GTest::gtest_main", "rapidcheck_gtest"]
MPFR_HEADERS = ["mpfr.h", "boost/multiprecision", "ropecheck/reference/scalar.hpp",
                "ropecheck/reference/rounding.hpp", "ropecheck/reference/fast_rounding.hpp",
                "ropecheck/reference/matrix_view.hpp", "ropecheck/reference/resolve.hpp"]
TEST_HEADERS = ["rapidcheck", "gtest/", "ropecheck/props/"]
RULES = {
    "ropecheck_core": (MPFR + TESTING + ["ropecheck_accuracy", "ropecheck_reference", "ropecheck_kernels",
                                         "ropecheck_kut", "ropecheck_golden", "ropecheck_props", "ropecheck_drift"],
                       MPFR_HEADERS + TEST_HEADERS + ["ropecheck/reference/", "ropecheck/accuracy/",
                                                      "ropecheck/kernels/", "ropecheck/kut/", "ropecheck/golden/"]),
    "ropecheck_accuracy": (MPFR + TESTING + ["ropecheck_reference", "ropecheck_kernels", "ropecheck_golden",
                                             "ropecheck_props", "ropecheck_drift"],
                           MPFR_HEADERS + TEST_HEADERS + ["ropecheck/reference/", "ropecheck/kernels/",
                                                          "ropecheck/golden/"]),
    "ropecheck_kernels": (MPFR + TESTING + ["ropecheck_reference", "ropecheck_accuracy", "ropecheck_kut",
                                            "ropecheck_golden", "ropecheck_props", "ropecheck_drift"],
                          MPFR_HEADERS + TEST_HEADERS + ["ropecheck/kut/", "ropecheck/golden/", "ropecheck/drift/"]),
    "ropecheck_kut": (MPFR + TESTING + ["ropecheck_reference", "ropecheck_accuracy", "ropecheck_golden",
                                        "ropecheck_props", "ropecheck_drift"],
                      MPFR_HEADERS + TEST_HEADERS + ["ropecheck/accuracy/", "ropecheck/golden/", "ropecheck/drift/"]),
    "ropecheck_reference": (TESTING + ["ropecheck_kernels", "ropecheck_kut", "ropecheck_golden", "ropecheck_props", "ropecheck_drift"],
                            TEST_HEADERS + ["ropecheck/kernels/", "ropecheck/kut/", "ropecheck/golden/",
                                            "ropecheck/drift/"]),
    # ropecheck's CPU kernels as a kernel_abi.h plugin (kut/src/builtin_plugin.cpp): the kernels and
    # kut only, so the plugin a user loads carries no MPFR, reference or checker.
    "ropecheck_builtin_kernels": (MPFR + TESTING + ["ropecheck_reference", "ropecheck_accuracy", "ropecheck_golden",
                                                    "ropecheck_props", "ropecheck_drift"], []),
    "ropecheck_golden": (TESTING + ["ropecheck_props", "ropecheck_drift"],
                         TEST_HEADERS + ["ropecheck/drift/"]),
    "ropecheck_drift": (TESTING + ["ropecheck_props"], TEST_HEADERS),
    "ropecheck_props": (["GTest::gtest", "ropecheck_golden", "ropecheck_drift"],
                        ["gtest/", "ropecheck/golden/", "ropecheck/drift/"]),
}
# Where each module's sources live (relative to SRC) and files that belong to another target.
MODULE_DIRS = {
    "ropecheck_core": ["core"], "ropecheck_accuracy": ["accuracy"], "ropecheck_kernels": ["kernels"],
    "ropecheck_reference": ["reference"], "ropecheck_golden": ["golden"], "ropecheck_drift": ["drift"],
    "ropecheck_kut": ["kut"], "ropecheck_builtin_kernels": [],
    "ropecheck_props": ["props"],
}
NOT_IN_MODULE = {  # sources in the folder that build another target (CMakeLists says which)
    "ropecheck_golden": {"golden/src/plugin_target.cpp", "golden/include/ropecheck/golden/plugin_target.hpp"},
    "ropecheck_props": {"props/src/gtest_registration.cpp", "props/include/ropecheck/props/gtest.hpp"},
}
INCLUDE_DIRS = [os.path.join(SRC, d, "include") for d in ("core", "accuracy", "reference", "kernels", "kut", "golden",
                                                          "props", "drift")]

violations = []

# 1. Links.
graph = {}
with open(os.path.join(BUILD, "ropecheck_link_graph.txt")) as f:
    for line in f:
        name, _, deps = line.rstrip("\n").partition(":")
        items = [d for d in re.split(r"[;\s]+", deps) if d]
        clean = []
        for d in items:  # $<LINK_ONLY:x>, ropecheck::x aliases
            d = re.sub(r"^\$<LINK_ONLY:(.*)>$", r"\1", d)
            if d.startswith("$<"):
                continue
            d = re.sub(r"^ropecheck::", "ropecheck_", d)
            clean.append(d)
        graph[name] = clean
for module, (forbidden, _) in RULES.items():
    if module not in graph:
        violations.append(f"{module}: not in the link graph (was it renamed? update tests/architecture)")
        continue
    seen, stack, parent = set(), [module], {}
    while stack:
        t = stack.pop()
        for d in graph.get(t, []):
            if d not in seen:
                seen.add(d)
                parent[d] = t
                stack.append(d)
    for bad in forbidden:
        if bad in seen:
            path, t = [bad], bad
            while t != module:
                t = parent[t]
                path.append(t)
            violations.append(f"{module} links {bad}: {' -> '.join(reversed(path))}")

# 2. Includes.
INC = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def resolve(name, here):
    for d in [here] + INCLUDE_DIRS:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return os.path.normpath(p)
    return None


def closure(path):
    seen, stack, names, via = set(), [path], [], {}
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


for module, (_, bad_headers) in RULES.items():
    for d in MODULE_DIRS[module]:
        for root, _, files in os.walk(os.path.join(SRC, d)):
            for fn in files:
                if not fn.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh")):
                    continue
                p = os.path.join(root, fn)
                rel = os.path.relpath(p, SRC)
                if rel in NOT_IN_MODULE.get(module, set()) or "/cuda/" in p and module != "ropecheck_kernels":
                    continue
                for name, where in closure(p):
                    for b in bad_headers:
                        if name.startswith(b) or name == b:
                            violations.append(f"{module}: {rel} reaches #include <{name}> "
                                              f"(through {os.path.relpath(where, SRC)})")
                            break

for v in sorted(set(violations)):
    print("layering: " + v)
print(f"layering: {len(RULES)} modules checked, {len(set(violations))} violations")
sys.exit(1 if violations else 0)
