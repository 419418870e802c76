// One way to check a CUDA call: a failure throws std::runtime_error naming the call and CUDA's
// message, so that a user sees "cudaMalloc failed: out of memory" rather than a later crash.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace ropecheck::kernels::cuda_detail {

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("ropecheck::kernels (CUDA): ") + what + " failed: " + cudaGetErrorString(err));
}

}  // namespace ropecheck::kernels::cuda_detail
