// A failing property's counterexample diagnosed like a failing check (checker/DIAGNOSIS.md): a small
// golden set of the failing spec at the failing position and log-spaced positions below it, the same
// kernel run on it through the kernel-under-test interface, checked with the target's class, and the
// catalogue ranked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/checker/diagnose.hpp"
#include "ropecheck/plugin/client.hpp"

namespace ropecheck::cli {

// The `check --kernel` name of a props target: --kernel LIB.so as given, kernel:RECIPE[-bf16out] ->
// builtin:RECIPE, cuda:RECIPE[-bf16out] -> builtin-cuda:RECIPE; nullopt for targets that are not such
// kernels (the reference, the scalar hf-fp32, mutants).
std::optional<std::string> check_kernel_of(const std::string& target, const std::string& kernel_path);

struct CounterexampleDiagnosis {
  std::string positions;  // the golden set's --positions
  checker::CheckReport check;
  checker::Diagnosis diagnosis;
};

// nullopt when the counterexample cannot be replayed as a golden set (a negative position, a
// sinusoidal spec). Throws what the golden writer and the kernel source throw.
std::optional<CounterexampleDiagnosis> diagnose_counterexample(const std::string& kernel, const EncodingSpec& spec,
                                                               std::int64_t position, DType dtype,
                                                               accuracy::AccuracyClass accuracy_class,
                                                               const plugin::PluginClientOptions& plugin);

}  // namespace ropecheck::cli
