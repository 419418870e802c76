// rope_quantize.hpp: rotate to binary32, then the owners' quantizers of core/quantized.hpp, and the
// store mistakes injected into them. Everything per scale group; no allocation per element.
#include "ropecheck/kernels/rope_quantize.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace ropecheck::kernels {

using quant::StoreKind;
using M = StoreMistake;

std::string_view to_string(StoreMistake m) {
  static constexpr std::array<std::string_view, 12> names = {
      "none", "quantize-before-rotate", "scale-from-input", "scale-inverted", "scale-applied-twice", "e5m2-for-e4m3fn",
      "overflow-rule-swapped", "ggml-d-truncated", "q4_0-abs-max", "mlx-scale-bias-swapped", "mlx-scale-dtype",
      "mlx-no-edge-shift"};
  return names[static_cast<std::size_t>(m)];
}

namespace {

constexpr int B = quant::kGgmlBlock;

template <class T>
void append(std::vector<std::uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

// Every FP8 scale grouping at once: element i's scale is fp8_scale_group's (per token, per (token, head),
// per tensor, per head over every token: the amax gathered over the group first, as vLLM's per-tensor
// kernel reduces the whole tensor before it codes any element; or the given one).
void fp8_store(std::span<const float> x, std::span<const float> in, std::int64_t H, std::int64_t D, const quant::StoreSpec& s,
               M m, StoredTensor& out) {
  const quant::Fp8 f = m == M::e5m2_for_e4m3fn ? (s.fp8 == quant::Fp8::e4m3fn ? quant::Fp8::e5m2 : quant::Fp8::e4m3fn) : s.fp8;
  const quant::Fp8Overflow o = m == M::overflow_rule_swapped ? (s.overflow == quant::Fp8Overflow::saturate
                                                                     ? quant::Fp8Overflow::nonfinite
                                                                     : quant::Fp8Overflow::saturate)
                                                              : s.overflow;
  const auto group = [&](std::size_t i) { return static_cast<std::size_t>(quant::fp8_scale_group(s, static_cast<std::int64_t>(i), H, D)); };
  std::vector<float> scales(s.given.begin(), s.given.end());  // a given scale: vLLM's static k_scale / v_scale
  if (!s.given_scale()) {
    std::vector<float> amax(x.empty() ? 0 : group(x.size() - 1) + 1, 0.0f);
    const std::span<const float> src = m == M::scale_from_input ? in : x;
    for (std::size_t i = 0; i < x.size(); ++i) amax[group(i)] = std::max(amax[group(i)], std::fabs(src[i]));
    for (float a : amax) scales.push_back(quant::fp8_scale_from_amax(a, s.fp8));
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double scale = scales[group(i)];
    const double used = m == M::scale_inverted ? 1.0 / scale : m == M::scale_applied_twice ? scale * scale : scale;
    out.codes.push_back(quant::fp8_quantize(x[i], used, f, o));
  }
  if (!s.given_scale())
    for (float sc : scales) append(out.scales, sc);
}

// ggml's q8_0 loop (quantize_row_q8_0_ref) with amax given and the reciprocal applied `times` times.
quant::BlockQ8_0 q8_0_with(std::span<const float> x, float amax, int times) {
  quant::BlockQ8_0 b;
  const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < B; ++j) {
    float t = x[static_cast<std::size_t>(j)] * id;
    if (times == 2) t *= id;
    b.qs[static_cast<std::size_t>(j)] = static_cast<std::int8_t>(std::clamp(std::round(t), -127.0f, 127.0f));
  }
  b.d = static_cast<std::uint16_t>(double_to_bits(quant::round_to(d, DType::f16), DType::f16));
  return b;
}

// ggml's q4_0 loop (quantize_row_q4_0_ref) with the signed max given.
quant::BlockQ4_0 q4_0_with(std::span<const float> x, float max, int times) {
  quant::BlockQ4_0 b;
  const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < B; ++j) {
    float t = x[static_cast<std::size_t>(j)] * id;
    if (times == 2) t *= id;
    const int c = std::min(15, static_cast<int>(std::clamp(t + 8.5f, 0.0f, 16.0f)));
    auto& byte = b.qs[static_cast<std::size_t>(j % 16)];
    byte = static_cast<std::uint8_t>(j < 16 ? (byte & 0xF0) | c : (byte & 0x0F) | (c << 4));
  }
  b.d = static_cast<std::uint16_t>(double_to_bits(quant::round_to(d, DType::f16), DType::f16));
  return b;
}

float signed_max(std::span<const float> x) {  // the first element of largest |x|
  float amax = 0, max = 0;
  for (float v : x)
    if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
  return max;
}

void ggml_store(std::span<const float> x, std::span<const float> in, const quant::StoreSpec& s, M m, StoredTensor& out) {
  for (std::size_t k = 0; k * B < x.size(); ++k) {
    const std::span<const float> xb = x.subspan(k * B, B);
    const std::span<const float> src = m == M::scale_from_input ? in.subspan(k * B, B) : xb;
    const int times = m == M::scale_applied_twice ? 2 : 1;
    const float mx = signed_max(src);
    if (s.kind == StoreKind::q8_0) {
      quant::BlockQ8_0 b = q8_0_with(xb, std::fabs(mx), times);
      if (m == M::none) b = quant::ggml_quantize_q8_0(std::span<const float, B>(xb.data(), B));
      const double d = std::fabs(mx) / 127.0f;
      if (m == M::scale_inverted && d != 0) b.d = static_cast<std::uint16_t>(double_to_bits(quant::round_to(1 / d, DType::f16), DType::f16));
      if (m == M::ggml_d_truncated && quant::round_to(d, DType::f16) > d) --b.d;  // one f16 step toward zero
      const auto bytes = quant::to_bytes(b);
      out.codes.insert(out.codes.end(), bytes.begin(), bytes.end());
    } else {
      quant::BlockQ4_0 b = q4_0_with(xb, m == M::q4_0_abs_max ? std::fabs(mx) : mx, times);
      if (m == M::none) b = quant::ggml_quantize_q4_0(std::span<const float, B>(xb.data(), B));
      const float d = mx / -8.0f;
      if (m == M::scale_inverted && d != 0) b.d = static_cast<std::uint16_t>(double_to_bits(quant::round_to(1.0 / d, DType::f16), DType::f16));
      if (m == M::ggml_d_truncated && std::fabs(quant::round_to(d, DType::f16)) > std::fabs(d)) --b.d;
      const auto bytes = quant::to_bytes(b);
      out.codes.insert(out.codes.end(), bytes.begin(), bytes.end());
    }
  }
}

void affine_store(std::span<const float> x, std::span<const float> in, const quant::StoreSpec& s, M m, StoredTensor& out) {
  const quant::AffineSpec& a = s.affine;
  const auto G = static_cast<std::size_t>(a.group_size);
  const int n = (1 << a.bits) - 1;
  quant::AffineQuantized q = quant::mlx_affine_quantize(m == M::scale_from_input ? in : x, a);
  const auto codes_of = [&](std::size_t g, double scale, double bias, int times) {
    for (std::size_t j = 0; j < G; ++j) {
      double t = (x[g * G + j] - bias) / scale;
      if (times == 2) t /= scale;
      q.codes[g * G + j] = static_cast<std::uint8_t>(std::clamp(std::nearbyint(t), 0.0, double(n)));
    }
  };
  for (std::size_t g = 0; g < q.groups.size(); ++g) {
    quant::AffineGroup& gr = q.groups[g];
    if (m == M::scale_from_input) codes_of(g, gr.scale, gr.bias, 1);
    if (m == M::scale_applied_twice) codes_of(g, gr.scale, gr.bias, 2);
    if (m == M::mlx_no_edge_shift) {
      const auto [lo, hi] = std::minmax_element(x.begin() + static_cast<std::ptrdiff_t>(g * G),
                                                x.begin() + static_cast<std::ptrdiff_t>((g + 1) * G));
      gr = {std::max<double>(static_cast<float>((*hi - *lo) / static_cast<float>(n)), 1e-7f), *lo};
      gr = {quant::round_to(gr.scale, a.scale_dtype), quant::round_to(gr.bias, a.scale_dtype)};
      codes_of(g, gr.scale, gr.bias, 1);
    }
    if (m == M::scale_inverted) gr.scale = 1 / gr.scale;
    if (m == M::mlx_scale_dtype) {
      const DType wrong = a.scale_dtype == DType::bf16 ? DType::f16 : DType::bf16;
      gr = {quant::round_to(gr.scale, wrong), quant::round_to(gr.bias, wrong)};
    }
    if (m == M::mlx_scale_bias_swapped) std::swap(gr.scale, gr.bias);
    gr = {quant::round_to(gr.scale, a.scale_dtype), quant::round_to(gr.bias, a.scale_dtype)};  // what the tensor holds
  }
  for (std::uint32_t w : quant::affine_pack(q.codes, a.bits)) append(out.codes, w);
  const std::size_t bytes = format_info(a.scale_dtype).storage_bits / 8;
  out.scales.resize(q.groups.size() * bytes);
  out.biases.resize(q.groups.size() * bytes);
  for (std::size_t g = 0; g < q.groups.size(); ++g) {
    store_element(out.scales.data() + g * bytes, q.groups[g].scale, a.scale_dtype);
    store_element(out.biases.data() + g * bytes, q.groups[g].bias, a.scale_dtype);
  }
}

// The values a store gives back (quantize_before_rotate's input): each code with its scale (and bias).
std::vector<float> dequantized(std::span<const float> x, std::int64_t T, std::int64_t H, std::int64_t D,
                               const quant::StoreSpec& s) {
  const StoredTensor st = quantize_store(x, T, H, D, s);
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    switch (s.kind) {
      case StoreKind::fp8: {
        const auto g = static_cast<std::size_t>(quant::fp8_scale_group(s, static_cast<std::int64_t>(i), H, D));
        float scale = 0;
        if (s.given_scale())
          scale = s.given[g];
        else
          std::memcpy(&scale, st.scales.data() + g * 4, 4);
        out[i] = static_cast<float>(quant::fp8_dequantize(st.codes[i], scale, s.fp8));
        break;
      }
      case StoreKind::q8_0:
        out[i] = static_cast<float>(quant::ggml_value(
            quant::q8_0_from_bytes(std::span<const std::uint8_t, 34>(st.codes.data() + i / B * 34, 34)), static_cast<int>(i % B)));
        break;
      case StoreKind::q4_0:
        out[i] = static_cast<float>(quant::ggml_value(
            quant::q4_0_from_bytes(std::span<const std::uint8_t, 18>(st.codes.data() + i / B * 18, 18)), static_cast<int>(i % B)));
        break;
      case StoreKind::affine: {
        const quant::AffineQuantized q = quant::mlx_affine_quantize(x, s.affine);
        for (std::size_t j = 0; j < x.size(); ++j)
          out[j] = static_cast<float>(quant::affine_value(q.codes[j], q.groups[j / static_cast<std::size_t>(s.affine.group_size)]));
        return out;
      }
    }
  }
  return out;
}

}  // namespace

StoredTensor quantize_store(std::span<const float> x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                            const quant::StoreSpec& spec, StoreMistake mistake, std::span<const float> input) {
  if (x.size() != static_cast<std::size_t>(tokens * heads * head_dim) ||
      (mistake == M::scale_from_input && input.size() != x.size()))
    throw std::invalid_argument("quantize_store: values do not match [tokens, heads, head_dim]");
  if (const std::string p = quant::store_head_dim_problem(spec, head_dim); !p.empty()) throw std::invalid_argument(p);
  StoredTensor out;
  switch (spec.kind) {
    case StoreKind::fp8:
      if (const std::string p = quant::store_heads_problem(spec, heads); !p.empty()) throw std::invalid_argument(p);
      fp8_store(x, input, heads, head_dim, spec, mistake, out);
      break;
    case StoreKind::q8_0:
    case StoreKind::q4_0: ggml_store(x, input, spec, mistake, out); break;
    case StoreKind::affine: affine_store(x, input, spec, mistake, out); break;
  }
  return out;
}

StoredTensor rope_quantize(const RopePlan& plan, const PositionsView& positions, const TensorView& in,
                           const quant::StoreSpec& spec, StoreMistake mistake) {
  const std::int64_t T = in.tokens, H = in.heads, D = in.head_dim;
  std::vector<float> x(static_cast<std::size_t>(T * H * D)), y(x.size());  // the input (exact in f32) and rotated
  const std::int64_t bytes = format_info(in.dtype).storage_bits / 8;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t d = 0; d < D; ++d)
        x[static_cast<std::size_t>((t * H + h) * D + d)] = static_cast<float>(load_element(
            static_cast<const std::uint8_t*>(in.data) + (t * in.stride_token + h * in.stride_head + d * in.stride_dim) * bytes,
            in.dtype));
  if (mistake == M::quantize_before_rotate) {
    const std::vector<float> xq = dequantized(x, T, H, D, spec);
    rope_apply(plan, positions, TensorView::contiguous(const_cast<float*>(xq.data()), DType::f32, T, H, D),
               TensorView::contiguous(y.data(), DType::f32, T, H, D));
    return quantize_store(y, T, H, D, spec);
  }
  rope_apply(plan, positions, in, TensorView::contiguous(y.data(), DType::f32, T, H, D));
  return quantize_store(y, T, H, D, spec, mistake, x);
}

}  // namespace ropecheck::kernels
