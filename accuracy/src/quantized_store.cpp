// Accuracy classes for quantized stores (accuracy/quantized_store.hpp; ERROR_MODEL.md, "Quantized stores").
#include "ropecheck/accuracy/quantized_store.hpp"

#include <algorithm>
#include <cmath>

namespace ropecheck::accuracy {
namespace {

constexpr double kU32 = 1.0 / 16777216.0;  // 2^-24
constexpr double kG1 = 1 + model::kSecondOrder;

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// A data-derived scale: identity when decided; undecided, within e / c + one step of the stored format
// of the exact scale (c = d scale / d amax) counts as not tested.
StoreVerdict judge_scale(double golden, double candidate, double exact, double margin, double budget, double per_value,
                         DType stored) {
  if (budget < margin) return same_value(golden, candidate) ? StoreVerdict::pass : StoreVerdict::fail;
  const double tol = budget * per_value + ulp(exact, stored);
  return std::fabs(candidate - exact) <= tol ? StoreVerdict::not_tested : StoreVerdict::fail;
}

double f16(std::uint16_t bits) { return bits_to_double(bits, DType::f16); }

}  // namespace

std::string_view to_string(StoreVerdict v) {
  switch (v) {
    case StoreVerdict::pass: return "pass";
    case StoreVerdict::not_tested: return "not-tested";
    case StoreVerdict::fail: return "fail";
  }
  return "?";
}

double quantizer_input_error(AccuracyClass c, Quantity q, const PairAngle& a, double M, double y) {
  return class_bound(c, DType::f32, q).allowed(a, M) + std::ldexp(std::fabs(y), -53);
}

double given_scale_budget(double e, double y, double scale) {
  return e + kG1 * model::kQuantQuotient * kU32 * (std::fabs(y) + e) + 2 * min_subnormal(DType::f32) * scale;
}

double group_budget(GroupStore k, double e_max, double amax) {
  double rel = 0;  // roundings proportional to amax (+ e_max: amax of the kernel's values)
  double abs_amax = 0;
  switch (k) {
    case GroupStore::fp8_dynamic:
    case GroupStore::q8_0: rel = model::kQuantQuotient + model::kQuantScale; break;
    case GroupStore::q4_0:
      rel = model::kQuantQuotient + model::kQuantScale;
      abs_amax = model::kQ4Offset;
      break;
    case GroupStore::affine: rel = model::kAffine; break;
  }
  return e_max + kG1 * kU32 * (rel * (amax + e_max) + abs_amax * amax) + 2 * min_subnormal(DType::f32) * (1 + amax);
}

StoreVerdict judge(const ElementCheck& e) {
  // The value check holds for every correct kernel, decided or not: it is what catches a wrong stored
  // scale or bias next to right codes.
  bool value_ok = false;
  if (std::isnan(e.candidate)) {
    value_ok = e.nonfinite_reachable;
  } else if (std::isinf(e.candidate)) {
    value_ok = e.nonfinite_reachable && std::signbit(e.candidate) == std::signbit(e.exact);
  } else {
    value_ok = e.saturation_reachable || std::fabs(e.candidate - e.exact) <= e.budget + e.step;
  }
  if (e.budget < e.margin) return e.same_code && value_ok ? StoreVerdict::pass : StoreVerdict::fail;
  return value_ok ? StoreVerdict::not_tested : StoreVerdict::fail;
}

StoreVerdict judge_fp8(std::uint8_t golden, double margin, double y, std::uint8_t candidate, double s, quant::Fp8 f,
                       quant::Fp8Overflow o, double budget) {
  const quant::Fp8Info& fi = quant::fp8_info(f);
  const double c = quant::fp8_decode(candidate, f);
  ElementCheck e;
  e.same_code = same_value(quant::fp8_decode(golden, f), c);
  e.candidate = c * s;
  e.exact = y;
  e.step = quant::fp8_step(std::isfinite(c) ? c : fi.max_finite, f) * s;
  e.budget = budget;
  e.margin = margin;
  e.nonfinite_reachable = o == quant::Fp8Overflow::nonfinite && (std::fabs(y) + budget) / s >= fi.overflow_from;
  // A saturated code stands for every value beyond the largest finite one, on y's side.
  e.saturation_reachable = o == quant::Fp8Overflow::saturate && std::fabs(c) == fi.max_finite &&
                           std::signbit(c) == std::signbit(y) && (std::fabs(y) + budget) / s >= fi.max_finite;
  return judge(e);
}

Fp8GroupVerdicts judge_fp8_group(float golden_scale, double scale_margin, std::span<const std::uint8_t> golden,
                                 std::span<const double> margins, std::span<const double> y, float candidate_scale,
                                 std::span<const std::uint8_t> candidate, quant::Fp8 f, quant::Fp8Overflow o,
                                 double budget) {
  const quant::Fp8Info& fi = quant::fp8_info(f);
  double amax = 0;
  for (double v : y) amax = std::max(amax, std::fabs(v));
  const double exact_scale = std::max(amax / fi.max_finite, 1.0 / (fi.max_finite * 512.0));
  Fp8GroupVerdicts out;
  out.scale = judge_scale(golden_scale, candidate_scale, exact_scale, scale_margin, budget, 1 / fi.max_finite, DType::f32);
  for (std::size_t j = 0; j < y.size(); ++j) {
    out.elements.push_back(judge_fp8(golden[j], margins[j], y[j], candidate[j], candidate_scale, f, o, budget));
  }
  return out;
}

GroupVerdicts<quant::kGgmlBlock> judge_q8_0(const quant::BlockQ8_0& golden, double scale_margin,
                                            std::span<const double, quant::kGgmlBlock> margins,
                                            std::span<const double, quant::kGgmlBlock> y,
                                            const quant::BlockQ8_0& candidate, double budget) {
  double amax = 0;
  for (double v : y) amax = std::max(amax, std::fabs(v));
  const double dc = f16(candidate.d);
  GroupVerdicts<quant::kGgmlBlock> out;
  out.scale = judge_scale(f16(golden.d), dc, amax / 127, scale_margin, budget, 1.0 / 127, DType::f16);
  for (std::size_t j = 0; j < y.size(); ++j) {
    const int q = candidate.qs[j];
    ElementCheck e;
    e.same_code = golden.qs[j] == q;
    e.candidate = q * dc;
    e.exact = y[j];
    e.step = std::fabs(dc) + std::abs(q) * ulp(dc, DType::f16);
    e.budget = budget;
    e.margin = margins[j];
    out.elements[j] = judge(e);
  }
  return out;
}

GroupVerdicts<quant::kGgmlBlock> judge_q4_0(const quant::BlockQ4_0& golden, double scale_margin,
                                            std::span<const double, quant::kGgmlBlock> margins,
                                            std::span<const double, quant::kGgmlBlock> y,
                                            const quant::BlockQ4_0& candidate, double budget) {
  std::size_t k = 0;  // the first element of largest magnitude, as ggml picks it
  bool other_sign_near = false;
  for (std::size_t j = 1; j < y.size(); ++j)
    if (std::fabs(y[j]) > std::fabs(y[k])) k = j;
  for (double v : y)  // an element of the other sign within 2 budgets of the maximum may take its place
    if (v != 0 && std::signbit(v) != std::signbit(y[k]) && std::fabs(v) >= std::fabs(y[k]) - 2 * budget)
      other_sign_near = true;
  const double dc = f16(candidate.d);
  GroupVerdicts<quant::kGgmlBlock> out;
  if (other_sign_near && !(budget < scale_margin)) {
    out.scale = judge_scale(std::fabs(f16(golden.d)), std::fabs(dc), std::fabs(y[k]) / 8, scale_margin, budget, 1.0 / 8,
                            DType::f16);
  } else {
    out.scale = judge_scale(f16(golden.d), dc, y[k] / -8, scale_margin, budget, 1.0 / 8, DType::f16);
  }
  for (int j = 0; j < quant::kGgmlBlock; ++j) {
    const auto uj = static_cast<std::size_t>(j);
    const int q = quant::q4_0_code(candidate, j) - 8;
    ElementCheck e;
    e.same_code = quant::q4_0_code(golden, j) - 8 == q;
    e.candidate = q * dc;
    e.exact = y[uj];
    e.step = std::fabs(dc) + std::abs(q) * ulp(dc, DType::f16);
    e.budget = budget;
    e.margin = margins[uj];
    out.elements[uj] = judge(e);
  }
  return out;
}

// The exact scale and bias of a group whose decisions are settled, and how far the scale moves when
// every value moves by e (mlx_affine_quantize's algorithm in binary64, which decides as the exact one
// wherever the decision margin exceeds the budget, far above binary64's resolution).
struct AffineExactScale {
  double scale = 0, bias = 0, per_value = 0;
};
AffineExactScale affine_exact_scale(std::span<const double> y, const quant::AffineSpec& spec) {
  const double n = (1 << spec.bits) - 1, eps = static_cast<double>(1e-7f);
  const double lo = *std::min_element(y.begin(), y.end()), hi = *std::max_element(y.begin(), y.end());
  const bool mask = std::fabs(lo) > std::fabs(hi);
  const double edge = mask ? lo : hi;
  const bool clamped = (hi - lo) / n < eps;
  const double s0 = (mask ? 1 : -1) * (clamped ? eps : (hi - lo) / n);
  const double q0 = std::nearbyint(edge / s0);
  if (q0 != 0) return {edge / q0, edge, 1 / std::fabs(q0)};
  return {s0, 0, clamped ? 0 : 2 / n};
}

AffineGroupVerdicts judge_affine_group(std::span<const std::uint8_t> golden, const quant::AffineGroup& golden_group,
                                       double scale_margin, double decision_margin, std::span<const double> margins,
                                       std::span<const double> y, std::span<const std::uint8_t> candidate,
                                       const quant::AffineGroup& candidate_group, const quant::AffineSpec& spec,
                                       double budget) {
  const DType dt = spec.scale_dtype;
  const double s = candidate_group.scale, b = candidate_group.bias;
  AffineGroupVerdicts out;
  if (budget < scale_margin) {
    const bool same = same_value(golden_group.scale, s) && same_value(golden_group.bias, b);
    out.scale = same ? StoreVerdict::pass : StoreVerdict::fail;
  } else if (budget < decision_margin) {
    const AffineExactScale ex = affine_exact_scale(y, spec);
    const bool ok = std::fabs(s - ex.scale) <= budget * ex.per_value + ulp(ex.scale, dt) &&
                    std::fabs(b - ex.bias) <= budget + ulp(ex.bias, dt);
    out.scale = ok ? StoreVerdict::not_tested : StoreVerdict::fail;
  } else {
    out.scale = StoreVerdict::not_tested;
  }
  for (std::size_t j = 0; j < y.size(); ++j) {
    ElementCheck e;
    e.same_code = golden[j] == candidate[j];
    e.candidate = quant::affine_value(candidate[j], candidate_group);
    e.exact = y[j];
    e.step = std::fabs(s) + candidate[j] * ulp(s, dt) + ulp(b, dt);
    e.budget = budget;
    e.margin = margins[j];
    out.elements.push_back(judge(e));
  }
  return out;
}

}  // namespace ropecheck::accuracy
