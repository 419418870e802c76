// Run-time choice of the CPU path: the AVX-512 backend when it was compiled in and this CPU (and OS)
// has AVX-512 F, BW, VL and DQ (libgcc's __builtin_cpu_supports checks both), the portable one
// otherwise. Checked once.
#include "kernel_detail.hpp"

namespace ropecheck::kernels::detail {

#ifdef ROPECHECK_KERNELS_AVX512
const Backend& avx512_backend_impl();  // simd_avx512.cpp

const Backend* avx512_backend() {
  static const bool usable = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return usable ? &avx512_backend_impl() : nullptr;
}
#else
const Backend* avx512_backend() { return nullptr; }  // not an x86-64 GCC / Clang build
#endif

}  // namespace ropecheck::kernels::detail
