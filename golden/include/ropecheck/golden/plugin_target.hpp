// A kernel plugin (golden/KERNEL_ABI.md) as a property-suite target: `ropecheck props --kernel LIB.so`.
// Lives in golden/ because props must not depend on golden.
#pragma once

#include <filesystem>
#include <memory>

#include "ropecheck/props/target.hpp"

namespace ropecheck::golden {

// Loads the plugin (load_kernel_plugin's checks and one-line TensorError) and wraps its
// ropecheck_rope_apply / ropecheck_sinusoidal entry points as a Target that claims `accuracy` with
// outputs requested in `dtype`. Inputs are passed as f32 (the ABI's x is float); frequencies are
// resolved without a run-time sequence length (seq_len = max_position_embeddings), as the suite
// fixes for every target. A call the kernel answers ROPECHECK_UNSUPPORTED is reported as unsupported
// (the property is skipped); any other failure code throws TensorError.
std::unique_ptr<props::Target> make_plugin_target(const std::filesystem::path& library,
                                                  accuracy::AccuracyClass accuracy = accuracy::AccuracyClass::fp32_angle,
                                                  DType dtype = DType::f32);

}  // namespace ropecheck::golden
