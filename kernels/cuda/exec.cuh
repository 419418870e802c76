// Running a kernel: on the device, or on the host by emulation (emulation.hpp) with the same code.
//
// A kernel K is a struct with an Args type (passed by value) and three phases,
//   RC_HD static void phase0/1/2(const Args&, unsigned block, int tid, int nthreads, unsigned char* smem)
// separated by block-wide barriers. The device runs each phase on all threads of a block at once;
// the emulation runs the blocks one after the other and, within a block, each phase on every
// thread index in turn, which is what the barriers guarantee anyway. Shared memory is the dynamic
// `smem` buffer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "check.cuh"

namespace ropecheck::kernels::cuda_detail {

inline constexpr int kThreads = 256;

// The device entry. Its symbol carries K's template arguments, so the recipe tag shows in the PTX.
template <class K>
__global__ void __launch_bounds__(kThreads) kernel_entry(const typename K::Args a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned b = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  K::phase0(a, b, t, n, smem);
  __syncthreads();
  K::phase1(a, b, t, n, smem);
  __syncthreads();
  K::phase2(a, b, t, n, smem);
}

template <class K>
void emulate_on_host(const typename K::Args& a, unsigned blocks, std::size_t shared_bytes) {
  std::vector<double> storage(shared_bytes / sizeof(double) + 2);  // 8-byte aligned, as the device's
  auto* smem = reinterpret_cast<unsigned char*>(storage.data());
  for (unsigned b = 0; b < blocks; ++b) {
    for (int t = 0; t < kThreads; ++t) K::phase0(a, b, t, kThreads, smem);
    for (int t = 0; t < kThreads; ++t) K::phase1(a, b, t, kThreads, smem);
    for (int t = 0; t < kThreads; ++t) K::phase2(a, b, t, kThreads, smem);
  }
}

// Launches K on `stream` (checked), or emulates it on the host when `emulate`.
template <class K>
void run(const typename K::Args& a, unsigned blocks, std::size_t shared_bytes, void* stream, bool emulate,
         const char* what) {
  if (blocks == 0) return;
  if (emulate) return emulate_on_host<K>(a, blocks, shared_bytes);
  kernel_entry<K><<<blocks, kThreads, shared_bytes, static_cast<cudaStream_t>(stream)>>>(a);
  check(cudaGetLastError(), what);
}

}  // namespace ropecheck::kernels::cuda_detail
