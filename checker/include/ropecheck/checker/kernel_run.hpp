// A kernel under test (kut/kernel_under_test.hpp) run on a golden set's inputs, so that
// `ropecheck check --kernel ...` checks a kernel without files in between: the one caller for every
// source (ropecheck's CPU and CUDA kernels, C-ABI plugins).
//
// run_kernel() calls the kernel on the golden inputs, for every output dtype of the set (f64 and the
// listed ones):
//   RoPE sets:        rope_apply on q and on k (f32 inputs)   -> q_rot.<dt>, k_rot.<dt>
//                     rope_cos_sin (if the kernel has it)     -> cos.<dt>, sin.<dt>
//   sinusoidal sets:  sinusoidal                              -> pe.<dt>
// and returns the results as Tensors named like the golden outputs, ready for check_candidate().
// Frequencies are resolved with the set's sequence length (manifest). A dtype the kernel answers
// unsupported for (or does not declare, Capabilities::output_dtypes) is skipped with a note (the
// kernel's message if it gave one). The kernel *declines* the set (KernelRun::declined, one line with
// its reasons; no tensors; the check is then not tested) when it lacks the entry point the set needs
// (sinusoidal without sinusoidal; RoPE with neither RoPE entry point) or answers unsupported for every
// output dtype. InputError (unusable input) when it answers unsupported for k after producing q. A
// call that fails (a plugin that crashed, hung, ...) is a failed check instead: its outputs are NaN
// (so the checker fails them) and it is listed in KernelRun::failures.
#pragma once

#include <string>
#include <vector>

#include "ropecheck/golden/golden_set.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::checker {

struct KernelFailure {
  std::vector<std::string> outputs;  // the golden outputs the failed call was to produce
  std::string message;               // one line: the kernel, the entry point, what happened, the problem
};

struct KernelRun {
  std::vector<io::Tensor> tensors;     // named like the golden outputs ("q_rot.f32", "cos.bf16", "pe.f64")
  std::vector<std::string> notes;  // one line each: dtypes skipped (unsupported) and why, tables not provided
  std::vector<KernelFailure> failures;  // calls that failed (their tensors are NaN)
  std::string declined;  // non-empty: the kernel declined every output (its reasons); tensors is empty
};

KernelRun run_kernel(kut::KernelUnderTest& kernel, const golden::GoldenSet& golden);

}  // namespace ropecheck::checker
