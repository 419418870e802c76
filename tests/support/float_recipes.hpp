// Test-only emulations of how real frameworks compute RoPE in floating point ("recipes"),
// used to calibrate the error model (test_error_model) and to build realistic candidates for the
// checker (test_checker). They mirror Hugging Face transformers' modeling_rope_utils.py and
// apply_rotary_pos_emb operation by operation, in float (every intermediate rounded to binary32
// as PyTorch does on CPU), with glibc's powf / sinf / cosf standing in for the framework's libm.
// The fast-math __sinf / __cosf model is documented at fast_sincos_model().
#pragma once

#include <mpfr.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::recipes {

// ---- storage formats -------------------------------------------------------------------------

// float -> bf16 bits, round to nearest even (PyTorch c10::round_to_nearest_even); NaN -> 0x7FC0.
inline std::uint16_t f32_to_bf16_bits(float f) {
  if (std::isnan(f)) return 0x7FC0;
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  const std::uint32_t bias = ((u >> 16) & 1u) + 0x7FFFu;
  return static_cast<std::uint16_t>((u + bias) >> 16);
}
inline float bf16_bits_to_f32(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float round_bf16(float f) { return bf16_bits_to_f32(f32_to_bf16_bits(f)); }
inline float round_f16(float f) { return static_cast<float>(static_cast<_Float16>(f)); }
inline std::uint16_t f16_bits(float f) {
  const auto h = static_cast<_Float16>(f);
  std::uint16_t b = 0;
  std::memcpy(&b, &h, 2);
  return b;
}

// A float value rounded to a storage format (as a float; f64 and f32 keep it).
inline float round_float_to(float v, DType t) {
  switch (t) {
    case DType::bf16: return round_bf16(v);
    case DType::f16: return round_f16(v);
    default: return v;
  }
}

// A double rounded ONCE (RNE) to format t, as a double (via MPFR, exact). One MPFR number per thread,
// not one allocation per call: the calibration tests call this millions of times.
inline double round_double_to(double v, DType t) {
  if (t == DType::f64) return v;
  struct Scratch {
    mpfr_t x;
    Scratch() { mpfr_init2(x, 53); }
    ~Scratch() { mpfr_clear(x); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
  };
  thread_local Scratch s;
  mpfr_set_d(s.x, v, MPFR_RNDN);
  return round_to_double(s.x, t);
}

// ---- f32 inverse frequencies, the Hugging Face way ---------------------------------------------

// Exponent 2j/dim as torch computes it: arange(0, dim, 2).float() / dim, one f32 division.
inline float hf_exponent(int j, int dim) { return static_cast<float>(2 * j) / static_cast<float>(dim); }

// base ** exponent with a float tensor exponent: computed in f32 (the scalar base cast to f32).
inline float hf_pow(double base, float e) { return std::pow(static_cast<float>(base), e); }

// inv_freq of transformers' _compute_*_parameters, every tensor op in f32; the Python-float
// parts (YaRN correction range, llama3 wavelength limits, dynamic NTK base) in double.
inline std::vector<float> hf_inv_freq_f32(const RopeSpec& r, std::optional<std::int64_t> seq_len = std::nullopt) {
  const RopeScaling& s = r.scaling;
  const int P = rope_pairs(r), R = r.rotary_dim;
  std::vector<float> inv(static_cast<std::size_t>(P));
  auto default_inv = [&](double base, int j, int dim) { return 1.0f / hf_pow(base, hf_exponent(j, dim)); };
  switch (s.type) {
    case ScalingType::none:
      for (int j = 0; j < P; ++j) inv[j] = default_inv(r.base, j, R);
      break;
    case ScalingType::linear:
      for (int j = 0; j < P; ++j) inv[j] = default_inv(r.base, j, R) / static_cast<float>(*s.factor);
      break;
    case ScalingType::dynamic: {
      double base = r.base;
      const double seq = static_cast<double>(std::max<std::int64_t>(seq_len.value_or(0), r.max_position_embeddings));
      const double L = static_cast<double>(r.max_position_embeddings), f = *s.factor;
      base = base * std::pow(f * seq / L - (f - 1), static_cast<double>(R) / (R - 2));
      for (int j = 0; j < P; ++j) inv[j] = default_inv(base, j, R);
      break;
    }
    case ScalingType::yarn: {
      const float f = static_cast<float>(effective_factor(r));
      const YarnRange<double> range = yarn_correction_range<double>(r);
      const float lo = static_cast<float>(range.low), span = static_cast<float>(range.high - range.low);
      for (int j = 0; j < P; ++j) {
        const float pos_freq = hf_pow(r.base, hf_exponent(j, R));
        const float extrap = 1.0f / pos_freq;
        const float interp = 1.0f / (f * pos_freq);
        float ramp = (static_cast<float>(j) - lo) / span;
        ramp = std::min(1.0f, std::max(0.0f, ramp));
        const float extrap_factor = 1.0f - ramp;
        inv[j] = interp * (1.0f - extrap_factor) + extrap * extrap_factor;
      }
      break;
    }
    case ScalingType::llama3: {
      const float f = static_cast<float>(*s.factor);
      const double L = static_cast<double>(*s.original_max_position_embeddings);
      const float low_wl = static_cast<float>(L / s.low_freq_factor), high_wl = static_cast<float>(L / s.high_freq_factor);
      const float two_pi = static_cast<float>(2 * 3.141592653589793);
      for (int j = 0; j < P; ++j) {
        const float base_inv = default_inv(r.base, j, R);
        const float wavelen = two_pi / base_inv;
        const float llama = wavelen > low_wl ? base_inv / f : base_inv;
        const float smooth = (static_cast<float>(L) / wavelen - static_cast<float>(s.low_freq_factor)) /
                             static_cast<float>(s.high_freq_factor - s.low_freq_factor);
        const float smoothed = (1.0f - smooth) * llama / f + smooth * llama;
        const bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
        inv[j] = medium ? smoothed : llama;
      }
      break;
    }
    case ScalingType::longrope: {
      const bool use_long = seq_len && *seq_len > effective_original_max_positions(r);
      const std::vector<double>& ext = use_long ? s.long_factor : s.short_factor;
      for (int j = 0; j < P; ++j)
        inv[j] = 1.0f / (static_cast<float>(ext[static_cast<std::size_t>(j)]) * hf_pow(r.base, hf_exponent(j, R)));
      break;
    }
    case ScalingType::proportional: {
      const float f = static_cast<float>(s.factor.value_or(1.0));
      for (int j = 0; j < P; ++j) inv[j] = j < R / 2 ? default_inv(r.base, j, r.head_dim) / f : 0.0f;
      break;
    }
  }
  return inv;
}

// ---- fast-math sin / cos model -----------------------------------------------------------------

// A model of CUDA's __sinf / __cosf (what -use_fast_math turns sinf / cosf into): the argument is
// scaled to revolutions by one f32 multiply with f32(1/(2 pi)) = 0x1.45f306p-3 rounded toward zero
// (SASS FMUL.RZ before MUFU.SIN / MUFU.COS), and the hardware evaluates sin(2 pi r) of that f32 r.
// The hardware's own error on the reduced argument (2^-21.41 absolute per the CUDA guide) is left
// out, so this model UNDER-states the real error. No GPU was used to confirm it.
inline float mul_rz(float a, float b) {
  const double exact = static_cast<double>(a) * static_cast<double>(b);  // exact: 48 bits
  float r = static_cast<float>(exact);
  if (std::fabs(static_cast<double>(r)) > std::fabs(exact)) r = std::nextafter(r, 0.0f);
  return r;
}
inline std::pair<float, float> fast_sincos_model(float x) {
  const float rev = mul_rz(x, 0x1.45f306p-3f);
  const double frac = static_cast<double>(rev) - std::floor(static_cast<double>(rev));  // exact
  const double a = 2 * 3.14159265358979323846 * frac;
  return {static_cast<float>(std::sin(a)), static_cast<float>(std::cos(a))};
}

// ---- one RoPE kernel, parameterised by its precision choices -----------------------------------

enum class InvFreqMode {
  hf_f32,       // hf_inv_freq_f32 (the HF / Meta recipe)
  f64_to_f32,   // the exact-ish f64 value rounded once to f32 (TensorRT-LLM's fix)
  bf16,         // the HF f32 value cast to bf16 (the transformers #29496 bug)
  f16,          // ... cast to f16 (the OpenVINO bug)
};
enum class TrigMode { libm, fast_math_model };

struct Recipe {
  InvFreqMode inv = InvFreqMode::hf_f32;
  TrigMode trig = TrigMode::libm;
  // Table / activation dtype: f32 = tables and rotation in f32; bf16 / f16 = cos, sin cast to that
  // dtype and the rotation done in it (every op rounded to it, via f32 as PyTorch's CPU does).
  DType table = DType::f32;
  DType out = DType::f32;  // the stored dtype of the result
};

class RecipeKernel {
 public:
  RecipeKernel(const RopeSpec& r, std::optional<std::int64_t> seq_len, Recipe recipe)
      : spec_(r), recipe_(recipe) {
    const std::vector<float> hf = hf_inv_freq_f32(r, seq_len);
    const RopeFrequencies<double> f64 = rope_frequencies<double>(r, seq_len);
    att_ = static_cast<float>(f64.attention_factor);
    inv_.resize(hf.size());
    for (std::size_t j = 0; j < hf.size(); ++j) {
      switch (recipe.inv) {
        case InvFreqMode::hf_f32: inv_[j] = hf[j]; break;
        case InvFreqMode::f64_to_f32: inv_[j] = static_cast<float>(f64.inv_freq[j]); break;
        case InvFreqMode::bf16: inv_[j] = round_bf16(hf[j]); break;
        case InvFreqMode::f16: inv_[j] = round_f16(hf[j]); break;
      }
    }
  }

  float inv_freq(int j) const { return inv_[static_cast<std::size_t>(j)]; }
  float attention_factor() const { return att_; }

  // f32 angle of pair j at integer position p: float(p) * inv, one f32 product.
  float angle(std::int64_t p, int j) const { return static_cast<float>(p) * inv_freq(j); }

  // Plain cos and sin of the angle, as the kernel's table stores them (no attention factor),
  // rounded to the table dtype, then stored in `out`.
  std::pair<float, float> cos_sin_table(std::int64_t p, int j) const {
    auto [c, s] = trig(angle(p, j));
    c = round_float_to(round_float_to(c, recipe_.table), recipe_.out);
    s = round_float_to(round_float_to(s, recipe_.table), recipe_.out);
    return {c, s};
  }

  // Rotated pair (a, b) -> (a c' - b s', b c' + a s') with c' = cos * att folded into the table in
  // f32 (HF: emb.cos() * attention_scaling), cast to the table dtype; products and the sum rounded
  // to the table dtype; the result stored in `out`.
  std::pair<float, float> rotate(float a, float b, std::int64_t p, int j) const {
    auto [c, s] = trig(angle(p, j));
    if (att_ != 1.0f) {
      c *= att_;
      s *= att_;
    }
    const DType t = recipe_.table;
    c = round_float_to(c, t);
    s = round_float_to(s, t);
    const float ac = round_float_to(a * c, t), bs = round_float_to(b * s, t);
    const float bc = round_float_to(b * c, t), as = round_float_to(a * s, t);
    const float ya = round_float_to(ac - bs, t), yb = round_float_to(bc + as, t);
    return {round_float_to(ya, recipe_.out), round_float_to(yb, recipe_.out)};
  }

 private:
  std::pair<float, float> trig(float x) const {
    if (recipe_.trig == TrigMode::fast_math_model) {
      const auto [s, c] = fast_sincos_model(x);
      return {c, s};
    }
    return {std::cos(x), std::sin(x)};
  }

  RopeSpec spec_;
  Recipe recipe_;
  std::vector<float> inv_;
  float att_ = 1.0f;
};

// The f64 way: inverse frequencies, angle, cos and sin in binary64 (the reference's formulas
// instantiated on double, i.e. pow / sin / cos of glibc), rotation in double, one final rounding.
class F64Kernel {
 public:
  F64Kernel(const RopeSpec& r, std::optional<std::int64_t> seq_len, DType out)
      : f_(rope_frequencies<double>(r, seq_len)), out_(out) {}
  double angle(std::int64_t p, int j) const { return static_cast<double>(p) * f_.inv_freq[static_cast<std::size_t>(j)]; }
  std::pair<double, double> cos_sin_table(std::int64_t p, int j) const {
    const double x = angle(p, j);
    return {round_double_to(std::cos(x), out_), round_double_to(std::sin(x), out_)};
  }
  std::pair<double, double> rotate(double a, double b, std::int64_t p, int j) const {
    const double x = angle(p, j), c = std::cos(x), s = std::sin(x), att = f_.attention_factor;
    return {round_double_to(att * (a * c - b * s), out_), round_double_to(att * (b * c + a * s), out_)};
  }

 private:
  RopeFrequencies<double> f_;
  DType out_;
};

// ---- the `accurate` recipe (kernels/recipe.hpp): angle in binary64, sin / cos in f32 ----------------

// theta reduced modulo pi/2 in binary64 with a three-part Cody-Waite constant: returns the reduced
// argument r in about [-pi/4, pi/4] and the quadrant k mod 4, theta = k pi/2 + r. C1 and C2 carry 33
// significant bits each (fdlibm's pio2_1, pio2_2), C3 the next 53 (pio2_2t), so pi/2 is held to
// about 2^-119 relative; each step is one fused multiply-add, the first of which is exact (theta -
// k C1 is a multiple of ulp(k C1) below 1 in magnitude).
struct Reduced {
  double r = 0;
  int quadrant = 0;
};
inline Reduced reduce_pio2_cody_waite(double theta) {
  constexpr double kTwoOverPi = 6.36619772367581382433e-01;
  constexpr double C1 = 1.57079632673412561417e+00, C2 = 6.07710050630396597660e-11, C3 = 2.02226624879595063154e-21;
  const double k = std::nearbyint(theta * kTwoOverPi);
  double r = std::fma(-k, C1, theta);
  r = std::fma(-k, C2, r);
  r = std::fma(-k, C3, r);
  const std::int64_t ki = static_cast<std::int64_t>(k);
  return {r, static_cast<int>(((ki % 4) + 4) % 4)};
}

// cos / sin of theta = k pi/2 + r as the recipe computes them: r rounded once to f32, glibc's sinf /
// cosf on it (< 1 ulp; standing in for the kernel's minimax polynomials on [-pi/4, pi/4]), the
// quadrant applied exactly (swaps and sign changes).
inline std::pair<float, float> reduced_cos_sin_f32(double theta) {
  const Reduced red = reduce_pio2_cody_waite(theta);
  const float rf = static_cast<float>(red.r);
  const float c = std::cos(rf), s = std::sin(rf);
  switch (red.quadrant) {
    case 0: return {c, s};
    case 1: return {-s, c};
    case 2: return {-c, -s};
    default: return {s, -c};
  }
}

// The `accurate` recipe with a float storage dtype (f32, f16, bf16): inverse frequencies in binary64
// (the reference's formulas on double), theta = p * w in binary64, reduced in binary64,
// reduced_cos_sin_f32, the attention factor folded in f32, the rotation in f32 (no FMA), one
// rounding to `out`. The class it is derived to land in: f32-reduced (ERROR_MODEL.md section 10).
class AccurateKernel {
 public:
  AccurateKernel(const RopeSpec& r, std::optional<std::int64_t> seq_len, DType out)
      : f_(rope_frequencies<double>(r, seq_len)), att_(static_cast<float>(f_.attention_factor)), out_(out) {}
  double angle(std::int64_t p, int j) const { return static_cast<double>(p) * f_.inv_freq[static_cast<std::size_t>(j)]; }
  std::pair<float, float> cos_sin_table(std::int64_t p, int j) const {
    const auto [c, s] = reduced_cos_sin_f32(angle(p, j));
    return {round_float_to(c, out_), round_float_to(s, out_)};
  }
  std::pair<float, float> rotate(float a, float b, std::int64_t p, int j) const {
    auto [c, s] = reduced_cos_sin_f32(angle(p, j));
    if (att_ != 1.0f) {
      c *= att_;
      s *= att_;
    }
    const float ac = a * c, bs = b * s, bc = b * c, as = a * s;
    const float ya = ac - bs, yb = bc + as;
    return {round_float_to(ya, out_), round_float_to(yb, out_)};
  }

 private:
  RopeFrequencies<double> f_;
  float att_ = 1.0f;
  DType out_;
};

}  // namespace ropecheck::recipes
