// dequantize_store (store_values.hpp). The steps: FP8 the grid's spacing at the decoded value times the
// f32 scale (ds = 0: the codes use the stored scale); GGML |d| of the f16 d plus |q| one f16 step of d
// (the codes were computed with the binary32 d); MLX |scale| plus |q| one step of the scale dtype and
// one of the bias (0 for f32: the codes use the stored values).
#include <cmath>
#include <cstring>
#include <span>

#include "ropecheck/kernels/store_values.hpp"

#include "ropecheck/core/dtype.hpp"

namespace ropecheck::kernels {

namespace {

// A data-derived scale is stored per group (quant::fp8_scale_group); a given scale is the set's, per tensor
// or per head (no stored scale: t.scales is empty), and every element is its own group (ERROR_MODEL.md 15.1).
void fp8_values(const StoredTensor& t, const quant::StoreSpec& s, std::int64_t heads, std::int64_t head_dim,
                StoredValuesAndSteps& o) {
  for (std::size_t i = 0; i < o.value.size(); ++i) {
    const auto k = static_cast<std::size_t>(quant::fp8_scale_group(s, static_cast<std::int64_t>(i), heads, head_dim));
    // A given scale: every element its own group; else the scale's group (per tensor, per head: over tokens).
    const auto g = s.given_scale() ? i : k;
    float sc;
    if (s.given_scale())
      sc = s.given[k];
    else
      std::memcpy(&sc, t.scales.data() + 4 * k, 4);
    o.value[i] = quant::fp8_dequantize(t.codes[i], sc, s.fp8);
    const double v = quant::fp8_decode(t.codes[i], s.fp8);
    o.step[i] = std::isfinite(v) ? quant::fp8_step(v, s.fp8) * sc : 0;
    o.group[i] = static_cast<std::int64_t>(g);
    o.scale[i] = sc;
  }
}

void ggml_values(const StoredTensor& t, bool q8, StoredValuesAndSteps& o) {
  const std::size_t bytes = q8 ? 34 : 18;
  const auto& f16 = f16_values();
  for (std::size_t k = 0; k * quant::kGgmlBlock < o.value.size(); ++k) {
    const std::uint8_t* p = t.codes.data() + k * bytes;
    for (int j = 0; j < quant::kGgmlBlock; ++j) {
      const std::size_t i = k * quant::kGgmlBlock + static_cast<std::size_t>(j);
      double d = 0, q = 0;
      if (q8) {
        const quant::BlockQ8_0 b = quant::q8_0_from_bytes(std::span<const std::uint8_t, 34>(p, 34));
        o.value[i] = quant::ggml_value(b, j), d = f16[b.d], q = b.qs[static_cast<std::size_t>(j)];
      } else {
        const quant::BlockQ4_0 b = quant::q4_0_from_bytes(std::span<const std::uint8_t, 18>(p, 18));
        o.value[i] = quant::ggml_value(b, j), d = f16[b.d], q = quant::q4_0_code(b, j) - 8;
      }
      o.scale_step[i] = ulp(d, DType::f16);
      o.scale[i] = d;
      o.step[i] = std::fabs(d) + std::fabs(q) * o.scale_step[i];
      o.group[i] = static_cast<std::int64_t>(k);
    }
  }
}

void affine_values(const StoredTensor& t, const quant::StoreSpec& s, StoredValuesAndSteps& o) {
  const std::size_t n = o.value.size(), G = static_cast<std::size_t>(s.affine.group_size);
  std::vector<std::uint32_t> words(t.codes.size() / 4);
  std::memcpy(words.data(), t.codes.data(), words.size() * 4);
  const std::vector<std::uint8_t> codes = quant::affine_unpack(words, s.affine.bits, n);
  const DType sd = s.affine.scale_dtype;
  std::vector<double> sc(n / G), bi(n / G);
  decode(t.scales.data(), sd, sc);
  decode(t.biases.data(), sd, bi);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t g = i / G;
    const quant::AffineGroup grp{sc[g], bi[g]};
    o.value[i] = quant::affine_value(codes[i], grp);
    const double ds = sd == DType::f32 ? 0 : ulp(sc[g], sd), db = sd == DType::f32 ? 0 : ulp(bi[g], sd);
    o.step[i] = std::fabs(sc[g]) + codes[i] * ds + db;
    o.scale_step[i] = ds;
    o.scale[i] = sc[g];
    o.group[i] = static_cast<std::int64_t>(g);
  }
}

}  // namespace

StoredValuesAndSteps dequantize_store(const StoredTensor& t, const quant::StoreSpec& s, std::int64_t tokens,
                                      std::int64_t heads, std::int64_t head_dim) {
  StoredValuesAndSteps o;
  const auto n = static_cast<std::size_t>(tokens * heads * head_dim);
  o.value.assign(n, 0), o.step.assign(n, 0), o.scale_step.assign(n, 0), o.scale.assign(n, 0), o.group.assign(n, 0);
  switch (s.kind) {
    case quant::StoreKind::fp8:
      fp8_values(t, s, heads, head_dim, o);
      break;
    case quant::StoreKind::q8_0:
    case quant::StoreKind::q4_0: ggml_values(t, s.kind == quant::StoreKind::q8_0, o); break;
    case quant::StoreKind::affine: affine_values(t, s, o); break;
  }
  return o;
}

}  // namespace ropecheck::kernels
