// A small registry of named targets, so that `ropecheck props --target NAME` and test binaries can
// find targets that other modules (kernels, mutants) define.
//
// Built in: "reference" (the exact MPFR reference, 128 bits minimum, rounded once to binary64) and
// "reference:BITS" (the same at BITS bits minimum). Everything else comes from register_target().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ropecheck/props/target.hpp"

namespace ropecheck::props {

using TargetFactory = std::function<std::unique_ptr<Target>()>;

// Registers (or replaces) a named target. Returns true, so that a translation unit may write
// `static const bool registered = register_target("hf-fp32", [] { ... });` (in a static library that
// unit must be referenced, or linked whole, for its initializer to run).
bool register_target(const std::string& name, TargetFactory factory, std::string description = {});

// The named target; nullptr when unknown. "reference" and "reference:BITS" (BITS 64..4096) always exist.
std::unique_ptr<Target> make_target(const std::string& name);

// Sorted names: "reference", "reference:BITS" (as written), then every registered name.
std::vector<std::string> target_names();
// One line per target: name and description.
std::vector<std::pair<std::string, std::string>> target_descriptions();

}  // namespace ropecheck::props
