// Recomputing a small fixed sample of a golden set's values from its manifest's spec.
#pragma once

#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::golden::detail {
using namespace ropecheck::io;  // tensors and files are this module's material
using namespace ropecheck::io::detail;  // the tensor files\' layout and writer

// The file hashes protect the data files but not manifest.json itself: an edited spec (base 500000 ->
// 10000) would otherwise be taken at its word, and `check --kernel` would blame the kernel. Recomputes
// at most kSampleTokens tokens x a few pairs / channels of the f64 outputs (cos, sin, q_rot, k_rot or
// pe; a few dozen values) and the attention factor with the exact reference (MPFR) and throws
// InputError, one line, when the stored data and the spec disagree. A value may differ by at most one
// f64 ulp (the reference's working precision carries 64 guard bits; a correctly rounded value can sit
// that close to a rounding boundary only with probability ~2^-64 per value).
inline constexpr int kSampleTokens = 4;
void verify_sample(const GoldenSet& set, bool files_hashed = true);

}  // namespace ropecheck::golden::detail
