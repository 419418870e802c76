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
// and the mistakes the diagnosis names (tests/cli/test_diagnose.sh):
//   base_default            inverse frequencies of base 10000 whatever the spec's (unscaled or linear specs)
//   offset7                 positions + 7
//   factor4                 a linear scaling factor of 4 whatever the spec's (linear specs)
//   longrope_swapped        the other LongRoPE factor list (read from the spec JSON)
//   reciprocal              1 / w as the inverse frequency (periods for frequencies)
//   int16_positions         positions cast to int16
//   int32_positions         positions cast to int32
#include <cmath>
#include <cstdlib>
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

#if defined(TEETH_MODE_longrope_swapped)
// The list `key` of the spec JSON ("long_factor": [1.0, 1.2, ...]), read crudely: the test's specs only.
std::vector<double> json_list(const char* json, const char* key) {
  std::vector<double> v;
  const char* k = json ? std::strstr(json, key) : nullptr;
  const char* b = k ? std::strchr(k, '[') : nullptr;
  if (!b) return v;
  for (const char* c = b + 1; *c && *c != ']';) {
    char* end = nullptr;
    const double d = std::strtod(c, &end);
    if (end == c) {
      ++c;
      continue;
    }
    v.push_back(d);
    c = end;
  }
  return v;
}
#endif

// The inverse frequencies this mode computes with, from the caller's (the spec's) ones.
std::vector<float> mode_frequencies(const ropecheck_rope_problem* p) {
  const auto P = static_cast<std::size_t>(p->rope.pairs);
  std::vector<float> inv(P);
  for (std::size_t j = 0; j < P; ++j) {
    double w = p->rope.inv_freq[j];
#if defined(TEETH_MODE_base_default)
    // base^(-2j/R) / f -> 10000^(-2j/R) / f
    w *= std::pow(p->rope.base / 10000.0, 2.0 * static_cast<double>(j) / p->rope.rotary_dim);
#elif defined(TEETH_MODE_factor4)
    w *= p->rope.factor / 4.0;
#elif defined(TEETH_MODE_reciprocal)
    w = w != 0 ? 1.0 / w : 0.0;
#elif defined(TEETH_MODE_longrope_swapped)
    if (p->rope.longrope_ext) {
      const bool long_in_use = p->rope.seq_len > p->rope.original_max_position_embeddings;
      const std::vector<double> other = json_list(p->spec_json, long_in_use ? "\"short_factor\"" : "\"long_factor\"");
      if (j < other.size()) w *= p->rope.longrope_ext[j] / other[j];
    }
#endif
    inv[j] = static_cast<float>(w);
  }
  return inv;
}

// The position this mode rotates token t by.
float mode_position(std::int64_t p) {
#if defined(TEETH_MODE_offset7)
  p += 7;
#elif defined(TEETH_MODE_int16_positions)
  p = static_cast<std::int16_t>(static_cast<std::uint16_t>(static_cast<std::uint64_t>(p) & 0xFFFFu));
#elif defined(TEETH_MODE_int32_positions)
  p = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(p) & 0xFFFFFFFFu));
#endif
  return static_cast<float>(p);
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
  std::vector<float> c(P), s(P);
  const std::vector<float> inv = mode_frequencies(p);
  float att = static_cast<float>(p->rope.attention_factor);
#if defined(TEETH_MODE_att_dropped)
  att = 1.0f;
#elif defined(TEETH_MODE_att_twice)
  att = att * att;
#endif
  const bool is_k = p->input_name && std::strcmp(p->input_name, "k") == 0;
  (void)is_k;
  for (std::size_t t = 0; t < T; ++t) {
    const float pos = mode_position(p->positions[t]);
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
