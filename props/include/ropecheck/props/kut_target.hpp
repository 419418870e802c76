// A kernel under test (kut/kernel_under_test.hpp) as a property-suite target: the one adapter from
// the suite's doubles ([tokens][heads][head_dim], a Position per token) to typed storage, for every
// source (ropecheck's CPU and CUDA kernels, C-ABI plugins).
//
// Inputs are passed as f32 (the suite's inputs are bf16-exact); outputs are requested in the target's
// dtype and decoded exactly. Frequencies are resolved without a run-time sequence length, as the suite
// fixes for every target. A call the kernel answers unsupported (or a dtype or entry point it does not
// declare) makes the property skip; a failed call (a plugin that crashed, hung, ...) reads as NaN
// outputs and is reported through take_failures(), which also lets the kernel be called again
// (KernelUnderTest::forgive) for the next property. Negative positions are generated only when the
// kernel declares them.
#pragma once

#include <memory>

#include "ropecheck/kut/kernel_under_test.hpp"
#include "ropecheck/props/target.hpp"

namespace ropecheck::props {

// `info`'s name, description, accuracy and dtype are the caller's; negative_positions comes from the
// kernel. With `every_dtype`, with_output(d) gives the same kernel storing its outputs in d (a plugin:
// it answers UNSUPPORTED for the dtypes it does not implement); without, with_output gives nullptr.
std::unique_ptr<Target> make_kut_target(std::shared_ptr<kut::KernelUnderTest> kernel, TargetInfo info,
                                        bool every_dtype = false);

}  // namespace ropecheck::props
