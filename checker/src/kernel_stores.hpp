// A kernel's quantized stores of a set written with --stores (kernel_abi.h revision 3): the fused
// rope_quantize call once per store of the set, on the whole golden inputs, its codes, scales and biases
// as candidate tensors named as the golden store and its companions (stores.hpp), so the stores checker
// judges them as it judges a file's. Private to the checker (kernel_blocks.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ropecheck/checker/kernel_run.hpp"
#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::checker {

struct KernelStores {
  std::vector<io::Tensor> tensors;  // "q_rot.e4m3fn", "q_rot.e4m3fn.scale", ...: the manifest's dtypes and shapes
  std::vector<std::string> notes;   // stores not computed and why (their golden tensors are then not tested)
  std::vector<KernelFailure> failures;
  std::map<std::string, std::vector<std::string>> outputs_of;  // a call's problem -> its store, for finish()
};

// Every store of the set through kernel.rope_quantize: a kernel without the entry point, or one that
// answers unsupported, leaves the stores to the check's not tested with a note; a failed call is a
// failure, its outputs 0xFF bytes (NaN scales and codes: they fail).
KernelStores run_kernel_stores(kut::KernelUnderTest& kernel, const golden::GoldenSet& golden);

}  // namespace ropecheck::checker
