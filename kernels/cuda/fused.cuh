// Device math of the fused recipes (kernels/RECIPES.md): the Q/K RMSNorm of one head row, the FP8 code of
// one value and the data-derived FP8 scale, GGML's q8_0 / q4_0 blocks, the KV cache's element index. Each
// is the CPU recipe's operation sequence (kernels/src/qk_norm.cpp, core/src/quantized*.cpp,
// core/src/kv_cache.cpp) through fp.cuh's correctly rounded wrappers, so the host emulation and a GPU
// store the same bytes as the CPU.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "fp.cuh"
#include "launch.hpp"
#include "recipe_math.cuh"

namespace ropecheck::kernels::cuda_detail {

RC_HD double div_f64(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
RC_HD float sqrt_f32(float v) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(v);
#else
  return std::sqrt(v);
#endif
}
// roundf: to nearest, ties away from zero (ggml's q8_0).
RC_HD float round_away(float v) {
#ifdef __CUDA_ARCH__
  return roundf(v);
#else
  return std::round(v);
#endif
}

// ---- Q/K RMSNorm (qk_norm.cpp): one head row of D binary32 values -----------------------------------

// The sum of squares in channel order (one thread per row: the CPU's order, so the same rounding), then
// r = 1 / sqrt(sum / D + eps) and out = (x * r) * f, f = w or 1 + w in binary32.
RC_HD void rms_norm_row(const NormArgs& a, std::int64_t row) {
  const int D = a.head_dim;
  const std::int64_t base = row * D;
  float sum = 0.0f;
  for (int c = 0; c < D; ++c) {
    const float x = load_as_float(a.in, base + c, a.in_dt);
    sum = fp::add(sum, fp::mul(x, x));
  }
  const float r = fp::div(1.0f, sqrt_f32(fp::add(fp::div(sum, static_cast<float>(D)), a.eps)));
  for (int c = 0; c < D; ++c) {
    const float w = a.weight[c];
    const float f = a.one_plus ? fp::add(1.0f, w) : w;
    a.out[base + c] = fp::mul(fp::mul(load_as_float(a.in, base + c, a.in_dt), r), f);
  }
}

// ---- FP8 (core/quantized.hpp) ------------------------------------------------------------------------

RC_HD double fp8_max_finite(bool e5m2) { return e5m2 ? 57344.0 : 448.0; }

// The larger of m and |v|; a NaN v leaves m (the CPU's std::max(amax, |v|)). max is exact, so the order in
// which a block combines its threads' maxima cannot change the result.
RC_HD float max_abs(float m, float v) {
  const float a = fp::abs(v);
  return m < a ? a : m;
}

// vLLM's dynamic scale from amax: max(amax / max_finite, 1 / (max_finite * 512)), each quotient binary64
// rounded once to binary32 (fp8_dynamic_scale).
RC_HD float fp8_scale_of(float amax, bool e5m2) {
  const double fmax = fp8_max_finite(e5m2);
  const float scale = fp::f64_to_f32_rn(div_f64(static_cast<double>(amax), fmax));
  const float min_scale = fp::f64_to_f32_rn(div_f64(1.0, fp::mul(fmax, 512.0)));
  return scale < min_scale ? min_scale : scale;
}

// fp8(x / s): the quotient in binary64, one rounding to FP8 by CUDA's own conversion (cuda_fp8.h, the
// conversion FlashInfer's casts use), which matches core's fp8_encode bit for bit on finite values
// (ctest fp8_cuda_host_check) for both overflow rules.
RC_HD std::uint8_t fp8_code(float x, float s, bool e5m2, bool saturate) {
  const double q = div_f64(static_cast<double>(x), static_cast<double>(s));
  return static_cast<std::uint8_t>(
      __nv_cvt_double_to_fp8(q, saturate ? __NV_SATFINITE : __NV_NOSAT, e5m2 ? __NV_E5M2 : __NV_E4M3));
}

// ---- GGML blocks (core/src/quantized_blocks.cpp): 32 values in, 34 (q8_0) or 18 (q4_0) bytes out ---------

RC_HD void ggml_q8_0_block(const float* x, std::uint8_t* out) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = fp::abs(x[j]);
    amax = amax > a ? amax : a;  // ggml's MAX macro
  }
  const float d = fp::div(amax, 127.0f);
  const float id = d != 0.0f ? fp::div(1.0f, d) : 0.0f;
  const std::uint16_t dh = f32_to_f16_bits(d);
  out[0] = static_cast<std::uint8_t>(dh & 0xFF);
  out[1] = static_cast<std::uint8_t>(dh >> 8);
  for (int j = 0; j < 32; ++j)
    out[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(round_away(fp::mul(x[j], id))));
}

// The signed value of the first element of largest |x| is order-dependent on ties (+v and -v), so one
// thread walks the block in order, as ggml's reference does.
RC_HD void ggml_q4_0_block(const float* x, std::uint8_t* out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < fp::abs(x[j])) amax = fp::abs(x[j]), max = x[j];
  const float d = fp::div(max, -8.0f);
  const float id = d != 0.0f ? fp::div(1.0f, d) : 0.0f;
  const std::uint16_t dh = f32_to_f16_bits(d);
  out[0] = static_cast<std::uint8_t>(dh & 0xFF);
  out[1] = static_cast<std::uint8_t>(dh >> 8);
  for (int j = 0; j < 16; ++j) {
    int lo = static_cast<int>(fp::add(fp::mul(x[j], id), 8.5f)), hi = static_cast<int>(fp::add(fp::mul(x[j + 16], id), 8.5f));
    lo = lo < 15 ? lo : 15;  // (int8_t) truncates, then MIN(15, .)
    hi = hi < 15 ? hi : 15;
    out[2 + j] = static_cast<std::uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
  }
}

// ---- KV cache (core/kv_cache.hpp element_index) ---------------------------------------------------------

RC_HD std::int64_t cache_element(const CacheAppendArgs& a, std::int64_t slot, std::int64_t h, std::int64_t d) {
  const std::int64_t page = slot / a.page_size, off = slot % a.page_size;
  if (!a.hnd) return ((page * a.page_size + off) * a.heads + h) * a.head_dim + d;
  return ((page * a.heads + h) * a.page_size + off) * a.head_dim + d;
}

}  // namespace ropecheck::kernels::cuda_detail
