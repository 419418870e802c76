// A kernel plugin (golden/KERNEL_ABI.md) as a property-suite target: `ropecheck props --kernel LIB.so`.
// Lives in golden/ because props must not depend on golden.
#pragma once

#include <filesystem>
#include <memory>

#include "ropecheck/golden/plugin_client.hpp"
#include "ropecheck/props/target.hpp"

namespace ropecheck::golden {

// Loads the plugin (the plugin client: isolation, load errors as one-line TensorError) and wraps
// its ropecheck_rope_apply / ropecheck_sinusoidal entry points as a Target that claims `accuracy`
// with outputs requested in `dtype`. Inputs are passed as f32 (the ABI's x is float); frequencies
// are resolved without a run-time sequence length (seq_len = max_position_embeddings), as the suite
// fixes for every target. A call the kernel answers ROPECHECK_UNSUPPORTED (or a dtype it declares
// unsupported) is reported as unsupported (the property is skipped). A failed call (crash, timeout,
// exit, overrun, unwritten output, unknown code) reads as NaN outputs and is reported through
// Target::take_failures, so the property fails naming what happened. Negative positions are
// generated only when the kernel declares ROPECHECK_CAP_NEGATIVE_POSITIONS.
std::unique_ptr<props::Target> make_plugin_target(const std::filesystem::path& library,
                                                  accuracy::AccuracyClass accuracy = accuracy::AccuracyClass::fp32_angle,
                                                  DType dtype = DType::f32, const PluginClientOptions& options = {});

}  // namespace ropecheck::golden
