// store_mistakes.hpp: each store mistake applied to the owners' binary32 quantizers (core/quantized.hpp),
// in the owners' arithmetic (binary32 where ggml and MLX compute in it), one scale group at a time.
#include "ropecheck/reference/store_mistakes.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ropecheck::quant {

const std::vector<StoreMistakeInfo>& store_mistake_catalogue() {
  static const std::vector<StoreMistakeInfo> c = {
      {"quantize-before-rotate", "the input quantized (and dequantized) before the rotation, the result quantized again",
       "a KV-cache write that rotates the cached (quantized) k; recipe mistake"},
      {"scale-from-input", "the data-derived scale (FP8 scale, GGML d, MLX scale / bias) taken from the unrotated input",
       "FlashInfer rope_quantize_fp8's scales are the caller's: computed before the rotation; recipe mistake"},
      {"scale-inverted", "FP8: codes of x * s instead of x / s; GGML, MLX: 1 / s stored as the scale",
       "vLLM scaled_fp8_quant takes the scale, torch._scaled_mm its inverse; recipe mistake"},
      {"scale-applied-twice", "codes of x / s / s (the scale divided out twice)", "a fused kernel over a pre-scaled input; recipe mistake"},
      {"e5m2-for-e4m3fn", "the other FP8 format's bit patterns (e5m2 where e4m3fn is asked, or the reverse)",
       "torch.float8_e4m3fn vs float8_e5m2 (kv_cache_dtype fp8_e4m3 / fp8_e5m2 in vLLM); recipe mistake"},
      {"overflow-rule-swapped", "FP8 overflow: saturate and nonfinite exchanged",
       "CUDA __NV_SATFINITE vs ml_dtypes / torch c10 casts; recipe mistake"},
      {"ggml-d-truncated", "GGML d rounded to f16 toward zero instead of to nearest even",
       "ggml GGML_FP32_TO_FP16 vs a truncating conversion; recipe mistake"},
      {"q4_0-abs-max", "q4_0 d from the largest |x| instead of the signed value of largest |x|",
       "ggml quantize_row_q4_0_ref (max, not amax, so code 0 is the edge); recipe mistake"},
      {"mlx-scale-bias-swapped", "MLX scales written as the biases and the biases as the scales",
       "mx.quantize returns (w_q, scales, biases); recipe mistake"},
      {"mlx-scale-dtype", "MLX scale and bias rounded to bf16 (f16 when bf16 is asked) before their store",
       "mlx_lm QuantizedKVCache scales in the cache's dtype; recipe mistake"},
      {"mlx-no-edge-shift", "MLX bias = min, scale = (max - min) / n: the edge not shifted to a code (no q0)",
       "mlx/backend/cpu/quantized.cpp (q0 = rint(edge / s)); older MLX quantize; recipe mistake"},
  };
  return c;
}

bool store_mistake_applies(std::string_view id, const StoreSpec& s) {
  if (id == "scale-from-input" && s.given_scale()) return false;  // nothing is derived from the data
  if (id == "e5m2-for-e4m3fn" || id == "overflow-rule-swapped") return s.kind == StoreKind::fp8;
  if (id == "ggml-d-truncated") return s.kind == StoreKind::q8_0 || s.kind == StoreKind::q4_0;
  if (id == "q4_0-abs-max") return s.kind == StoreKind::q4_0;
  if (id.starts_with("mlx-")) return s.kind == StoreKind::affine;
  return true;
}

namespace {

constexpr int B = kGgmlBlock;

template <class T>
void append(std::vector<std::uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

std::uint16_t f16_bits(double v) { return static_cast<std::uint16_t>(double_to_bits(round_to(v, DType::f16), DType::f16)); }

// The scale of element i is fp8_scale_group's: a data-derived one from the amax of its group (per token,
// per (token, head), per tensor, per head over every token); a given one (per tensor or per head) is the
// set's, neither derived nor stored (ERROR_MODEL.md 15.1).
void fp8(std::string_view m, std::span<const float> x, std::span<const float> in, std::int64_t heads, std::int64_t head_dim,
         const StoreSpec& s, StoreBytes& out) {
  const Fp8 f = m == "e5m2-for-e4m3fn" ? (s.fp8 == Fp8::e4m3fn ? Fp8::e5m2 : Fp8::e4m3fn) : s.fp8;
  const Fp8Overflow o = m != "overflow-rule-swapped" ? s.overflow
                        : s.overflow == Fp8Overflow::saturate ? Fp8Overflow::nonfinite
                                                              : Fp8Overflow::saturate;
  const auto group = [&](std::size_t i) { return static_cast<std::size_t>(fp8_scale_group(s, static_cast<std::int64_t>(i), heads, head_dim)); };
  std::vector<float> scales(s.given.begin(), s.given.end());
  if (!s.given_scale()) {
    std::vector<float> amax(x.empty() ? 0 : group(x.size() - 1) + 1, 0.0f);
    const std::span<const float> src = m == "scale-from-input" ? in : x;
    for (std::size_t i = 0; i < x.size(); ++i) amax[group(i)] = std::max(amax[group(i)], std::fabs(src[i]));
    for (float a : amax) scales.push_back(fp8_scale_from_amax(a, s.fp8));
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double scale = scales[group(i)];
    const double used = m == "scale-inverted" ? 1.0 / scale : m == "scale-applied-twice" ? scale * scale : scale;
    out.codes.push_back(fp8_quantize(x[i], used, f, o));
  }
  if (!s.given_scale())
    for (float sc : scales) append(out.scales, sc);
}

float signed_max(std::span<const float> x) {  // the first element of largest |x| (ggml's max)
  float amax = 0, max = 0;
  for (float v : x)
    if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
  return max;
}

// quantize_row_q8_0_ref / quantize_row_q4_0_ref with the block's extreme given and the reciprocal
// multiplied in `times` times.
BlockQ8_0 q8_0_with(std::span<const float> x, float amax, int times) {
  BlockQ8_0 b;
  const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < B; ++j) {
    float t = x[static_cast<std::size_t>(j)] * id;
    if (times == 2) t *= id;
    b.qs[static_cast<std::size_t>(j)] = static_cast<std::int8_t>(std::clamp(std::round(t), -127.0f, 127.0f));
  }
  b.d = f16_bits(d);
  return b;
}
BlockQ4_0 q4_0_with(std::span<const float> x, float max, int times) {
  BlockQ4_0 b;
  const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < B; ++j) {
    float t = x[static_cast<std::size_t>(j)] * id;
    if (times == 2) t *= id;
    const int c = std::min(15, static_cast<int>(std::clamp(t + 8.5f, 0.0f, 16.0f)));
    auto& byte = b.qs[static_cast<std::size_t>(j % 16)];
    byte = static_cast<std::uint8_t>(j < 16 ? (byte & 0xF0) | c : (byte & 0x0F) | (c << 4));
  }
  b.d = f16_bits(d);
  return b;
}

void ggml(std::string_view m, std::span<const float> x, std::span<const float> in, const StoreSpec& s, StoreBytes& out) {
  const bool plain = m.empty() || m == "none";
  const int times = m == "scale-applied-twice" ? 2 : 1;
  for (std::size_t k = 0; k * B < x.size(); ++k) {
    const std::span<const float> xb = x.subspan(k * B, B);
    const float mx = signed_max(m == "scale-from-input" ? in.subspan(k * B, B) : xb);
    if (s.kind == StoreKind::q8_0) {
      BlockQ8_0 b = plain ? ggml_quantize_q8_0(std::span<const float, B>(xb.data(), B)) : q8_0_with(xb, std::fabs(mx), times);
      const double d = std::fabs(mx) / 127.0f;
      if (m == "scale-inverted" && d != 0) b.d = f16_bits(1 / d);
      if (m == "ggml-d-truncated" && round_to(d, DType::f16) > d) --b.d;  // one f16 step toward zero
      const auto bytes = to_bytes(b);
      out.codes.insert(out.codes.end(), bytes.begin(), bytes.end());
    } else {
      BlockQ4_0 b = plain ? ggml_quantize_q4_0(std::span<const float, B>(xb.data(), B))
                          : q4_0_with(xb, m == "q4_0-abs-max" ? std::fabs(mx) : mx, times);
      const float d = mx / -8.0f;
      if (m == "scale-inverted" && d != 0) b.d = f16_bits(1.0 / d);
      if (m == "ggml-d-truncated" && std::fabs(round_to(d, DType::f16)) > std::fabs(d)) --b.d;
      const auto bytes = to_bytes(b);
      out.codes.insert(out.codes.end(), bytes.begin(), bytes.end());
    }
  }
}

void affine(std::string_view m, std::span<const float> x, std::span<const float> in, const StoreSpec& s, StoreBytes& out) {
  const AffineSpec& a = s.affine;
  const auto G = static_cast<std::size_t>(a.group_size);
  const int n = (1 << a.bits) - 1;
  AffineQuantized q = mlx_affine_quantize(m == "scale-from-input" ? in : x, a);
  const auto codes_of = [&](std::size_t g, double scale, double bias, int times) {
    for (std::size_t j = 0; j < G; ++j) {
      double t = (x[g * G + j] - bias) / scale;
      if (times == 2) t /= scale;
      q.codes[g * G + j] = static_cast<std::uint8_t>(std::clamp(std::nearbyint(t), 0.0, double(n)));
    }
  };
  for (std::size_t g = 0; g < q.groups.size(); ++g) {
    AffineGroup& gr = q.groups[g];
    if (m == "scale-from-input") codes_of(g, gr.scale, gr.bias, 1);
    if (m == "scale-applied-twice") codes_of(g, gr.scale, gr.bias, 2);
    if (m == "mlx-no-edge-shift") {
      const auto [lo, hi] = std::minmax_element(x.begin() + static_cast<std::ptrdiff_t>(g * G),
                                                x.begin() + static_cast<std::ptrdiff_t>((g + 1) * G));
      gr = {std::max<double>(static_cast<float>((*hi - *lo) / static_cast<float>(n)), 1e-7f), *lo};
      gr = {round_to(gr.scale, a.scale_dtype), round_to(gr.bias, a.scale_dtype)};
      codes_of(g, gr.scale, gr.bias, 1);
    }
    if (m == "scale-inverted") gr.scale = 1 / gr.scale;
    if (m == "mlx-scale-dtype") {
      const DType wrong = a.scale_dtype == DType::bf16 ? DType::f16 : DType::bf16;
      gr = {round_to(gr.scale, wrong), round_to(gr.bias, wrong)};
    }
    if (m == "mlx-scale-bias-swapped") std::swap(gr.scale, gr.bias);
    gr = {round_to(gr.scale, a.scale_dtype), round_to(gr.bias, a.scale_dtype)};  // what the tensors hold
  }
  for (std::uint32_t w : affine_pack(q.codes, a.bits)) append(out.codes, w);
  const std::size_t bytes = format_info(a.scale_dtype).storage_bits / 8;
  out.scales.resize(q.groups.size() * bytes);
  out.biases.resize(q.groups.size() * bytes);
  for (std::size_t g = 0; g < q.groups.size(); ++g) {
    store_element(out.scales.data() + g * bytes, q.groups[g].scale, a.scale_dtype);
    store_element(out.biases.data() + g * bytes, q.groups[g].bias, a.scale_dtype);
  }
}

}  // namespace

StoreBytes mistaken_store(std::string_view id, std::span<const float> x, std::span<const float> input, std::int64_t tokens,
                          std::int64_t heads, std::int64_t head_dim, const StoreSpec& s) {
  (void)tokens;
  StoreBytes out;
  switch (s.kind) {
    case StoreKind::fp8:
      fp8(id, x, input, heads, head_dim, s, out);
      break;
    case StoreKind::q8_0:
    case StoreKind::q4_0: ggml(id, x, input, s, out); break;
    case StoreKind::affine: affine(id, x, input, s, out); break;
  }
  return out;
}

std::vector<float> store_dequantized(std::span<const float> x, std::int64_t tokens, std::int64_t heads,
                                     std::int64_t head_dim, const StoreSpec& s) {
  std::vector<float> out(x.size());
  if (s.kind == StoreKind::affine) {
    const AffineQuantized q = mlx_affine_quantize(x, s.affine);
    for (std::size_t j = 0; j < x.size(); ++j)
      out[j] = static_cast<float>(affine_value(q.codes[j], q.groups[j / static_cast<std::size_t>(s.affine.group_size)]));
    return out;
  }
  const StoreBytes st = mistaken_store("", x, {}, tokens, heads, head_dim, s);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (s.kind == StoreKind::fp8) {
      const auto g = static_cast<std::size_t>(fp8_scale_group(s, static_cast<std::int64_t>(i), heads, head_dim));
      float scale = 0;
      if (s.given_scale())
        scale = s.given[g];
      else
        std::memcpy(&scale, st.scales.data() + g * 4, 4);
      out[i] = static_cast<float>(fp8_dequantize(st.codes[i], scale, s.fp8));
    } else if (s.kind == StoreKind::q8_0) {
      out[i] = static_cast<float>(
          ggml_value(q8_0_from_bytes(std::span<const std::uint8_t, 34>(st.codes.data() + i / B * 34, 34)), static_cast<int>(i % B)));
    } else {
      out[i] = static_cast<float>(
          ggml_value(q4_0_from_bytes(std::span<const std::uint8_t, 18>(st.codes.data() + i / B * 18, 18)), static_cast<int>(i % B)));
    }
  }
  return out;
}

}  // namespace ropecheck::quant
