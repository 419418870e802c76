// The pieces of ropecheck._core (module.cpp): the types the bindings share and one bind_* function per
// topic, each in its own file (bind_spec.cpp, bind_golden.cpp, bind_props.cpp, bind_drift.cpp,
// bind_check.cpp), all compiled as one unit (core_unit.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::python {

namespace nb = nanobind;

struct Spec {
  EncodingSpec spec;
};

struct Golden {
  golden::GoldenSet set;
};

inline std::vector<DType> dtypes_of(const std::vector<std::string>& names) {
  std::vector<DType> out;
  for (const std::string& n : names) {
    const std::optional<DType> d = parse_dtype(n);
    if (!d) throw SpecError("dtypes: unknown dtype '" + n + "' (known: f64, f32, f16, bf16)");
    out.push_back(*d);
  }
  if (out.empty()) throw SpecError("dtypes: empty list");
  return out;
}

// Each registers its topic's classes and functions on the module, in the order of NB_MODULE.
void bind_spec(nb::module_& m);    // Spec, presets, spec files, Hugging Face configs, byte sizes
void bind_golden(nb::module_& m);  // writing, loading and saving golden sets
void bind_props(nb::module_& m);   // the property suite on a Python kernel
void bind_drift(nb::module_& m);   // drift, and the class and kernel names
void bind_check(nb::module_& m);   // the checker

}  // namespace ropecheck::python
