// Golden values of the quantized stores (reference/quantized_rounding.hpp): the exact-arithmetic
// helpers, FP8 and the GGML blocks; MLX's affine groups are in quantized_affine.cpp.
#include "ropecheck/reference/quantized_rounding.hpp"

#include <algorithm>
#include <stdexcept>

#include "quantized_internal.hpp"
#include "ropecheck/reference/rounding.hpp"

namespace ropecheck::quant {
namespace detail {

Mp mp_d(double v) {
  Mp r = mp(53);
  mpfr_set_d(r->get(), v, MPFR_RNDN);  // exact
  return r;
}

Mp sub_exact(mpfr_srcptr a, mpfr_srcptr b) {
  // Bits from the higher of the two leading bits (plus a carry) down to the lower of the last bits.
  mpfr_prec_t prec = std::max(mpfr_get_prec(a), mpfr_get_prec(b)) + 1;
  if (mpfr_regular_p(a) && mpfr_regular_p(b)) {
    const mpfr_exp_t hi = std::max(mpfr_get_exp(a), mpfr_get_exp(b)) + 1;
    const mpfr_exp_t lo = std::min(mpfr_get_exp(a) - mpfr_get_prec(a), mpfr_get_exp(b) - mpfr_get_prec(b));
    prec = std::max<mpfr_prec_t>(prec, static_cast<mpfr_prec_t>(hi - lo));
  }
  if (prec > (mpfr_prec_t{1} << 20)) throw std::invalid_argument("ropecheck: values too far apart for an exact difference");
  Mp r = mp(prec);
  if (mpfr_sub(r->get(), a, b, MPFR_RNDN) != 0) throw std::logic_error("ropecheck: inexact exact difference");
  return r;
}

Mp mul_exact(mpfr_srcptr a, double k) {
  Mp r = mp(mpfr_get_prec(a) + 53);
  mpfr_mul_d(r->get(), a, k, MPFR_RNDN);  // exact: at most prec(a) + 53 bits
  return r;
}

Mp abs_exact(mpfr_srcptr a) {
  Mp r = mp(mpfr_get_prec(a));
  mpfr_abs(r->get(), a, MPFR_RNDN);
  return r;
}

Mp div_odd(mpfr_srcptr a, mpfr_srcptr b) {
  Mp q = mp(std::max(mpfr_get_prec(a), mpfr_get_prec(b)) + 64);
  if (mpfr_div(q->get(), a, b, MPFR_RNDZ) != 0 && mpfr_regular_p(q->get()) &&
      mpfr_min_prec(q->get()) < mpfr_get_prec(q->get())) {
    // Truncated with its last bit 0: the next value away from zero has it set and no carry.
    if (mpfr_signbit(q->get())) {
      mpfr_nextbelow(q->get());
    } else {
      mpfr_nextabove(q->get());
    }
  }
  return q;
}

double round_binary(mpfr_srcptr x, int precision, int min_normal_exp) {
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = mpfr_signbit(x) != 0;
  if (mpfr_inf_p(x)) return neg ? -kInf : kInf;
  if (mpfr_zero_p(x)) return neg ? -0.0 : 0.0;
  const mpfr_exp_t e = mpfr_get_exp(x);  // |x| in [2^(e-1), 2^e)
  if (e > 1000) return neg ? -kInf : kInf;
  // As reference/rounding.cpp: keep as many bits as the grid has in x's binade, one MPFR rounding.
  const mpfr_exp_t quantum_exp = std::max<mpfr_exp_t>(e - precision, min_normal_exp - precision + 1);
  const mpfr_exp_t keep = e - quantum_exp;
  double mag = 0.0;
  if (keep >= 1) {
    MpfrValue y(static_cast<mpfr_prec_t>(keep));
    mpfr_abs(y.get(), x, MPFR_RNDN);
    mag = mpfr_get_d(y.get(), MPFR_RNDN);
  } else if (keep == 0) {
    // Between 0 and the smallest grid step: above half of it rounds up, the exact half (a tie
    // between 0, even, and the step) to 0.
    const int cmp_half = neg ? -mpfr_cmp_si_2exp(x, -1, e - 1) : mpfr_cmp_ui_2exp(x, 1, e - 1);
    mag = cmp_half > 0 ? std::ldexp(1.0, static_cast<int>(quantum_exp)) : 0.0;
  }
  return neg ? -mag : mag;
}

long round_int(mpfr_srcptr t, IntRule rule) {
  MpfrValue r(64);
  if (rule == IntRule::nearest_even) {
    mpfr_rint(r.get(), t, MPFR_RNDN);
  } else {
    mpfr_round(r.get(), t);  // ties away from zero
    if (rule == IntRule::half_up && mpfr_sgn(t) < 0) {
      MpfrValue frac(mpfr_get_prec(t));
      mpfr_frac(frac.get(), t, MPFR_RNDN);  // exact; -1/2 at a negative tie
      if (mpfr_cmp_si_2exp(frac.get(), -1, -1) == 0) mpfr_add_ui(r.get(), r.get(), 1, MPFR_RNDN);
    }
  }
  return mpfr_get_si(r.get(), MPFR_RNDN);
}

double int_distance(double t, long code, long lo, long hi) {
  double d = kInf;
  if (code > lo) d = std::min(d, t - (static_cast<double>(code) - 0.5));
  if (code < hi) d = std::min(d, (static_cast<double>(code) + 0.5) - t);
  return distance_down(d, t);
}

double dtype_distance(mpfr_srcptr x, DType t) {
  const double a = std::fabs(mpfr_get_d(x, MPFR_RNDN));
  const double r = std::fabs(round_to_double(x, t));
  double lo = -kInf, hi = kInf;
  if (!std::isfinite(r)) {
    const double max_finite = bits_to_double((double_to_bits(kInf, t) - 1), t);
    lo = max_finite + ulp(max_finite, t) / 2;
  } else {
    const std::uint64_t bits = double_to_bits(r, t);
    if (r != 0.0) lo = (r + bits_to_double(bits - 1, t)) / 2;
    const double next = bits_to_double(bits + 1, t);
    hi = std::isinf(next) ? r + ulp(r, t) / 2 : (r + next) / 2;
  }
  return distance_down(std::min(a - lo, hi - a), a);
}

}  // namespace detail

namespace {

using namespace detail;

// Distance from |t| to the nearest point where its FP8 code changes; `code` is what t rounds to.
// +0 and -0 are one value, so 0 has no boundary below; saturated codes none above.
double fp8_distance(double a, std::uint8_t code, Fp8 f, Fp8Overflow o) {
  const Fp8Info& fi = fp8_info(f);
  const double v = std::fabs(fp8_decode(code, f));
  double lo = -kInf, hi = kInf;
  if (!std::isfinite(v)) {
    lo = fi.overflow_from;
  } else {
    const int mag = code & 0x7F;
    if (mag != 0) lo = (v + fp8_decode(static_cast<std::uint8_t>(mag - 1), f)) / 2;
    if (v < fi.max_finite) {
      hi = (v + fp8_decode(static_cast<std::uint8_t>(mag + 1), f)) / 2;
    } else if (o == Fp8Overflow::nonfinite) {
      hi = fi.overflow_from;
    }
  }
  return distance_down(std::min(a - lo, hi - a), a);
}

// The code of t (rounded to odd) and its distance in units of t.
std::pair<std::uint8_t, double> fp8_code(mpfr_srcptr t, Fp8 f, Fp8Overflow o) {
  const Fp8Info& fi = fp8_info(f);
  const std::uint8_t code = fp8_encode(round_binary(t, fi.precision, fi.min_normal_exp), f, o);
  return {code, fp8_distance(std::fabs(mpfr_get_d(t, MPFR_RNDN)), code, f, o)};
}

// Margin in units of the values for t = c x / A, every x (A = max |x| among them) moved by at most
// eps: |t' - t| <= eps (|c| + |t|) / (A - eps), below dist iff eps < dist A / (|c| + |t| + dist).
double ratio_margin(double dist, double a, double c, double t) {
  return std::isinf(dist) ? kInf : dist * a / (std::fabs(c) + std::fabs(t) + dist);
}

}  // namespace

ExactCode fp8_exact(mpfr_srcptr x, double s, Fp8 f, Fp8Overflow o) {
  if (!(s > 0) || !std::isfinite(s)) throw std::invalid_argument("ropecheck: an FP8 scale must be positive and finite");
  if (mpfr_nan_p(x)) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {fp8_encode(nan, f, o), kInf};  // MPFR keeps no sign for a NaN: the positive NaN code
  }
  const Mp sd = mp_d(s);
  const Mp t = div_odd(x, sd->get());
  const auto [code, dist] = fp8_code(t->get(), f, o);
  return {code, lower(dist * s)};
}

Fp8GroupExact fp8_dynamic_exact(std::span<const mpfr_srcptr> group, Fp8 f, Fp8Overflow o) {
  mpfr_srcptr amax = nullptr;
  for (mpfr_srcptr x : group)
    if (amax == nullptr || mpfr_cmpabs(x, amax) > 0) amax = x;
  if (amax == nullptr) throw std::invalid_argument("ropecheck: empty scale group");
  return fp8_dynamic_exact(group, amax, f, o);
}

Fp8GroupExact fp8_dynamic_exact(std::span<const mpfr_srcptr> group, mpfr_srcptr amax, Fp8 f, Fp8Overflow o) {
  const double fmax = fp8_info(f).max_finite;
  const Mp a = abs_exact(amax);
  const double ad = mpfr_get_d(a->get(), MPFR_RNDN);
  // s* = max(A / fmax, 1 / (fmax 512)): the clamp decides by A against 1/512; A moves by <= eps.
  const bool clamped = mpfr_cmp_ui_2exp(a->get(), 1, -9) < 0;
  const double clamp_margin = std::fabs(ad - std::ldexp(1.0, -9));
  Fp8GroupExact out;
  if (clamped) {
    out.scale = static_cast<float>(1.0 / (fmax * 512.0));  // quotient of binary32 integers: RN_f32
    out.scale_margin = lower(clamp_margin);
  } else {
    const Mp fm = mp_d(fmax);
    const Mp s = div_odd(a->get(), fm->get());
    out.scale = round_to_double(s->get(), DType::f32);
    out.scale_margin = lower(std::min(dtype_distance(s->get(), DType::f32) * fmax, clamp_margin));
  }
  for (mpfr_srcptr x : group) {
    Mp num = mul_exact(x, clamped ? fmax * 512.0 : fmax);
    Mp t = clamped ? std::move(num) : div_odd(num->get(), a->get());
    const auto [code, dist] = fp8_code(t->get(), f, o);
    const double td = mpfr_get_d(t->get(), MPFR_RNDN);
    const double m = clamped ? dist / (fmax * 512.0) : ratio_margin(dist, ad, fmax, td);
    out.codes.push_back({code, lower(std::min(m, clamp_margin))});
  }
  return out;
}

Q8_0Exact q8_0_exact(std::span<const mpfr_srcptr, kGgmlBlock> x) {
  mpfr_srcptr amax = x[0];
  for (mpfr_srcptr v : x)
    if (mpfr_cmpabs(v, amax) > 0) amax = v;
  const Mp a = abs_exact(amax);
  Q8_0Exact out;
  if (mpfr_zero_p(a->get())) {
    // d = 0, codes 0: any nonzero perturbation sets d = eps / 127 and codes up to +-127. d stays 0
    // in f16 while below half the smallest subnormal.
    out.scale_margin = lower(127 * std::ldexp(1.0, -25));
    return out;
  }
  const double ad = mpfr_get_d(a->get(), MPFR_RNDN);
  const Mp c127 = mp_d(127.0);
  const Mp d = div_odd(a->get(), c127->get());
  out.block.d = static_cast<std::uint16_t>(round_to_bits(d->get(), DType::f16));
  out.scale_margin = lower(dtype_distance(d->get(), DType::f16) * 127);
  for (int j = 0; j < kGgmlBlock; ++j) {
    const auto uj = static_cast<std::size_t>(j);
    const Mp num = mul_exact(x[uj], 127.0);
    const Mp t = div_odd(num->get(), a->get());
    const long code = round_int(t->get(), IntRule::nearest_away);
    const double td = mpfr_get_d(t->get(), MPFR_RNDN);
    out.block.qs[uj] = static_cast<std::int8_t>(code);
    out.margin[uj] = lower(ratio_margin(int_distance(td, code, -127, 127), ad, 127, td));
  }
  return out;
}

Q4_0Exact q4_0_exact(std::span<const mpfr_srcptr, kGgmlBlock> x) {
  std::size_t k = 0;  // the first element of largest magnitude
  for (std::size_t j = 1; j < x.size(); ++j)
    if (mpfr_cmpabs(x[j], x[k]) > 0) k = j;
  const Mp a = abs_exact(x[k]);
  const double ad = mpfr_get_d(a->get(), MPFR_RNDN);
  // d* = m / -8 takes m's sign: an element of the other sign within 2 eps of A in magnitude could
  // become the maximum and flip every code.
  double sign_margin = kInf;
  for (std::size_t j = 0; j < x.size(); ++j) {
    if (j == k || mpfr_zero_p(x[j]) || mpfr_signbit(x[j]) == mpfr_signbit(x[k])) continue;
    sign_margin = std::min(sign_margin, (ad - std::fabs(mpfr_get_d(x[j], MPFR_RNDA))) / 2);
  }
  Q4_0Exact out;
  std::array<int, kGgmlBlock> codes{};
  if (mpfr_zero_p(a->get())) {
    // ggml: max = 0, d = 0 / -8 = -0, id = 0, every code (int8_t)(0 + 8.5) = 8; any perturbation moves them.
    out.block.d = 0x8000;
    codes.fill(8);
    out.scale_margin = lower(8 * std::ldexp(1.0, -25));
  } else {
    const Mp d = mul_exact(x[k], -0.125);  // exact: a power of two
    out.block.d = static_cast<std::uint16_t>(round_to_bits(d->get(), DType::f16));
    out.scale_margin = lower(std::min(dtype_distance(d->get(), DType::f16) * 8, sign_margin));
    for (std::size_t j = 0; j < x.size(); ++j) {
      const Mp num = mul_exact(x[j], -8.0);
      const Mp t = div_odd(num->get(), x[k]);
      const long c = std::min(7L, round_int(t->get(), IntRule::half_up));  // code - 8; t >= -8
      const double td = mpfr_get_d(t->get(), MPFR_RNDN);
      codes[j] = static_cast<int>(c + 8);
      out.margin[j] = lower(std::min(ratio_margin(int_distance(td, c, -8, 7), ad, 8, td), sign_margin));
    }
  }
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const auto uj = static_cast<std::size_t>(j);
    out.block.qs[uj] = static_cast<std::uint8_t>(codes[uj] | (codes[uj + kGgmlBlock / 2] << 4));
  }
  return out;
}

}  // namespace ropecheck::quant
