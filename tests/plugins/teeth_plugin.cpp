// Kernel plugins with one realistic bug each, for the property suite's teeth through the C ABI
// (tests/cli/test_props.sh and test_props_teeth). Built as teeth_plugin_<mode>.so:
//   correct                 RoPE in float32 from the caller's inverse frequencies and attention factor
//                           (rope.inv_freq, rope.attention_factor rounded to f32), x * cos + rotate_half(x)
//                           * sin, stored rounding to nearest even in f32 / f16 / bf16 (f64: UNSUPPORTED).
//                           Any scaling (the frequencies come from the caller), no multimodal RoPE.
//                           Class fp32-angle.
//   k_head_offset           the k path reads head h + 1's row for head h (wrapping inside the token)
//   att_dropped             the attention factor never applied
//   att_twice               the attention factor applied twice (att^2)
//   bf16_truncate           bf16 results truncated (low 16 bits of the f32 pattern dropped)
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ropecheck/kernel_abi.h"

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

std::uint16_t to_bf16(float f) {
  std::uint32_t u = bits_of(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
#if defined(TEETH_MODE_bf16_truncate)
  return static_cast<std::uint16_t>(u >> 16);  // the bug: rounding toward zero
#else
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
#endif
}

std::uint16_t to_f16(float f) {
  const std::uint32_t u = bits_of(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return static_cast<std::uint16_t>(sign | (a > 0x7F800000u ? 0x7E00u : 0x7C00u));
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (a >= 0x38800000u) {
    const std::uint32_t r = a + 0x0FFFu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
  const float units = std::nearbyint(std::fabs(f) * 16777216.0f);
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(units));
}

void store(void* out, std::int32_t dtype, std::size_t i, float v) {
  if (dtype == ROPECHECK_DTYPE_F32)
    static_cast<float*>(out)[i] = v;
  else if (dtype == ROPECHECK_DTYPE_F16)
    static_cast<std::uint16_t*>(out)[i] = to_f16(v);
  else
    static_cast<std::uint16_t*>(out)[i] = to_bf16(v);
}

}  // namespace

extern "C" {

ROPECHECK_KERNEL_EXPORT uint32_t ropecheck_kernel_abi_version(void) { return ROPECHECK_KERNEL_ABI_VERSION; }
ROPECHECK_KERNEL_EXPORT const char* ropecheck_kernel_name(void) { return "teeth-plugin"; }

ROPECHECK_KERNEL_EXPORT int ropecheck_rope_apply(const ropecheck_rope_problem* p) {
  if (p->out_dtype != ROPECHECK_DTYPE_F32 && p->out_dtype != ROPECHECK_DTYPE_F16 && p->out_dtype != ROPECHECK_DTYPE_BF16) {
    std::snprintf(p->message, p->message_capacity, "float32 kernel: f32, f16 and bf16 outputs only");
    return ROPECHECK_UNSUPPORTED;
  }
  if (p->rope.mrope_mode != ROPECHECK_MROPE_NONE || p->position_streams != 1) {
    std::snprintf(p->message, p->message_capacity, "multimodal RoPE not implemented");
    return ROPECHECK_UNSUPPORTED;
  }
  const auto P = static_cast<std::size_t>(p->rope.pairs), D = static_cast<std::size_t>(p->rope.head_dim);
  const auto H = static_cast<std::size_t>(p->heads), T = static_cast<std::size_t>(p->tokens);
  const bool interleaved = p->rope.layout == ROPECHECK_LAYOUT_INTERLEAVED;
  std::vector<float> inv(P), c(P), s(P);
  for (std::size_t j = 0; j < P; ++j) inv[j] = static_cast<float>(p->rope.inv_freq[j]);
  float att = static_cast<float>(p->rope.attention_factor);
#if defined(TEETH_MODE_att_dropped)
  att = 1.0f;
#elif defined(TEETH_MODE_att_twice)
  att = att * att;
#endif
  const bool is_k = p->input_name && std::strcmp(p->input_name, "k") == 0;
  (void)is_k;
  for (std::size_t t = 0; t < T; ++t) {
    const auto pos = static_cast<float>(p->positions[t]);
    for (std::size_t j = 0; j < P; ++j) {
      const float theta = pos * inv[j];
      c[j] = std::cos(theta) * att;
      s[j] = std::sin(theta) * att;
    }
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t row = (t * H + h) * D;
#if defined(TEETH_MODE_k_head_offset)
      const std::size_t src = (t * H + (is_k ? (h + 1) % H : h)) * D;  // the bug: k reads its neighbour
#else
      const std::size_t src = row;
#endif
      const float* x = p->x + src;
      for (std::size_t j = 0; j < P; ++j) {
        const std::size_t ia = interleaved ? 2 * j : j, ib = interleaved ? 2 * j + 1 : j + P;
        const float a = x[ia], b = x[ib];
        store(p->out, p->out_dtype, row + ia, a * c[j] + (-b) * s[j]);
        store(p->out, p->out_dtype, row + ib, b * c[j] + a * s[j]);
      }
      for (std::size_t ch = 2 * P; ch < D; ++ch) store(p->out, p->out_dtype, row + ch, x[ch]);
    }
  }
  return ROPECHECK_OK;
}

}  // extern "C"
