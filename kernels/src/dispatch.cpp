// Run-time choice of the CPU path: the AVX-512 backend when this CPU has the instructions it was
// compiled for (checked once with __builtin_cpu_supports), the portable one otherwise.
#include "kernel_detail.hpp"

namespace ropecheck::kernels::detail {

const Backend* avx512_backend() { return nullptr; }  // the AVX-512 backend lands in the next step

}  // namespace ropecheck::kernels::detail
