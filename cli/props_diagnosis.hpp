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
#include "ropecheck/plugin/kernel_name.hpp"

namespace ropecheck::cli {

struct CounterexampleDiagnosis {
  std::string positions;  // the golden set's --positions
  checker::CheckReport check;
  checker::Diagnosis diagnosis;
};

// nullopt when the counterexample cannot be replayed as a golden set (a negative position, a
// sinusoidal spec). Throws what the golden writer and the kernel factory throw.
std::optional<CounterexampleDiagnosis> diagnose_counterexample(const plugin::KernelName& kernel, const EncodingSpec& spec,
                                                               std::int64_t position, DType dtype,
                                                               accuracy::AccuracyClass accuracy_class,
                                                               const plugin::PluginClientOptions& plugin);

}  // namespace ropecheck::cli
