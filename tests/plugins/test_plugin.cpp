// Kernel plugins that misbehave on purpose, one per TEST_PLUGIN_MODE, for the loader's guards
// (tests/cli/test_check.sh). Built as test_plugin_<mode>.so by tests/CMakeLists.txt:
//   no_version       exports no ropecheck_kernel_abi_version             -> load error, exit 2
//   wrong_abi        reports ABI version 99                              -> load error, exit 2
//   no_entry         exports the version and name only                   -> load error, exit 2
//   overrun          writes one element past the end of `out`            -> failed call, exit 1
//   fail             returns 7 with a message                            -> failed call, exit 1
//   unsupported_all  answers UNSUPPORTED to everything                   -> no output, exit 2
//   nan              returns OK without writing (outputs stay NaN)       -> failed call, exit 1
//   sinusoidal       a correct binary64 sinusoidal kernel (Vaswani interleaved only, f64 / f32
//                    output), and no RoPE entry point                    -> class fp64-angle
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ropecheck/kernel_abi.h"

extern "C" {

#if !defined(TEST_PLUGIN_MODE_no_version)
ROPECHECK_KERNEL_EXPORT uint32_t ropecheck_kernel_abi_version(void) {
#if defined(TEST_PLUGIN_MODE_wrong_abi)
  return 99;
#else
  return ROPECHECK_KERNEL_ABI_VERSION;
#endif
}
#endif

ROPECHECK_KERNEL_EXPORT const char* ropecheck_kernel_name(void) { return "test-plugin"; }

#if !defined(TEST_PLUGIN_MODE_no_entry) && !defined(TEST_PLUGIN_MODE_sinusoidal)
ROPECHECK_KERNEL_EXPORT int ropecheck_rope_apply(const ropecheck_rope_problem* p) {
  static_cast<void>(p);
#if defined(TEST_PLUGIN_MODE_overrun)
  const std::size_t n = static_cast<std::size_t>(p->tokens) * static_cast<std::size_t>(p->heads) *
                        static_cast<std::size_t>(p->rope.head_dim);
  if (p->out_dtype == ROPECHECK_DTYPE_F32) {
    float* out = static_cast<float*>(p->out);
    for (std::size_t i = 0; i <= n; ++i) out[i] = 0.0f;  // one too many
    return ROPECHECK_OK;
  }
  return ROPECHECK_UNSUPPORTED;
#elif defined(TEST_PLUGIN_MODE_fail)
  std::snprintf(p->message, p->message_capacity, "device lost\nsecond line never shown");
  return 7;
#elif defined(TEST_PLUGIN_MODE_unsupported_all)
  std::snprintf(p->message, p->message_capacity, "nothing implemented");
  return ROPECHECK_UNSUPPORTED;
#else
  return ROPECHECK_OK;  // nan (and the load-error modes, never called): writes nothing
#endif
}
#endif

#if defined(TEST_PLUGIN_MODE_sinusoidal)
ROPECHECK_KERNEL_EXPORT int ropecheck_sinusoidal(const ropecheck_sinusoidal_problem* p) {
  const ropecheck_sinusoidal_params& s = p->sinusoidal;
  if (s.layout != ROPECHECK_SINUSOIDAL_INTERLEAVED || s.frequencies != ROPECHECK_SINUSOIDAL_VASWANI || s.d_model % 2 != 0) {
    std::snprintf(p->message, p->message_capacity, "only even-width Vaswani interleaved tables");
    return ROPECHECK_UNSUPPORTED;
  }
  if (p->out_dtype != ROPECHECK_DTYPE_F64 && p->out_dtype != ROPECHECK_DTYPE_F32) return ROPECHECK_UNSUPPORTED;
  const std::size_t d = static_cast<std::size_t>(s.d_model);
  for (std::size_t t = 0; t < static_cast<std::size_t>(p->tokens); ++t) {
    const double pos = static_cast<double>(p->positions[t] + s.position_offset);
    for (std::size_t i = 0; i < d / 2; ++i) {
      const double w = 1.0 / std::pow(s.base, static_cast<double>(2 * i) / static_cast<double>(d));
      const double v[2] = {std::sin(pos * w), std::cos(pos * w)};
      for (std::size_t k = 0; k < 2; ++k) {
        if (p->out_dtype == ROPECHECK_DTYPE_F64)
          static_cast<double*>(p->out)[t * d + 2 * i + k] = v[k];
        else
          static_cast<float*>(p->out)[t * d + 2 * i + k] = static_cast<float>(v[k]);
      }
    }
  }
  return ROPECHECK_OK;
}
#endif

}  // extern "C"
