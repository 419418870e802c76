// The CUDA source of kernels under test (kernel_under_test.hpp): ropecheck's CUDA kernels
// (kernels/cuda_kernels.hpp), one kernel per precision recipe. Built into ropecheck_kut_cuda, which
// links the CUDA runtime statically when nvcc was found and is a stub otherwise; not installed (the
// package exports no CUDA target).
//
// The kernel runs on the current CUDA device. Without one it cannot be made (no silent fallback):
// the test-only switch ROPECHECK_CUDA_EMULATION=1 runs the same CUDA kernel code on the host instead
// (kernels/cuda/emulation.hpp: the device code's phases thread by thread, with the host libm's sin /
// cos), and the kernel's name and description then say "host emulation", so that an emulated run is
// never mistaken for a GPU run.
#pragma once

#include <memory>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::kut {

// The environment variable of the test-only switch, and whether it is set to 1.
inline constexpr const char* kCudaEmulationVariable = "ROPECHECK_CUDA_EMULATION";
bool cuda_emulation_requested();
// Whether this ropecheck was built with the CUDA kernels.
bool cuda_built();

// The CUDA kernel of `recipe`: every entry point and output dtype, negative positions. Named
// "cuda:RECIPE (DEVICE)" or "cuda:RECIPE (host emulation)". Throws std::runtime_error, one line:
// "this ropecheck was built without CUDA", or "no CUDA device (REASON)" when there is no device and
// the emulation switch is not set.
std::unique_ptr<KernelUnderTest> make_cuda_kernel(kernels::Recipe recipe);

}  // namespace ropecheck::kut
