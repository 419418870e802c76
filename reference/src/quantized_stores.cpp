// The stores of golden --stores for a block of tokens (quantized_stores.hpp): the f64 values taken as
// exact (53-bit MPFR copies), quantized by quantized_rounding.hpp, margins reduced by the f64 error.
#include "ropecheck/reference/quantized_stores.hpp"

#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ropecheck/reference/quantized_rounding.hpp"

namespace ropecheck::quant {
namespace {

// 53-bit MPFR copies of a run of f64 values (exact).
class Exact {
 public:
  explicit Exact(std::span<const double> y) : v_(y.size()) {
    for (std::size_t i = 0; i < y.size(); ++i) {
      mpfr_init2(&v_[i], 53);
      mpfr_set_d(&v_[i], y[i], MPFR_RNDN);
    }
    for (auto& x : v_) p_.push_back(&x);
  }
  ~Exact() {
    for (auto& x : v_) mpfr_clear(&x);
  }
  Exact(const Exact&) = delete;
  Exact& operator=(const Exact&) = delete;
  std::span<const mpfr_srcptr> all() const { return p_; }

 private:
  std::vector<__mpfr_struct> v_;
  std::vector<mpfr_srcptr> p_;
};

// The largest |f64 value - exact value| of a group: half an ulp of its largest magnitude.
double f64_error(std::span<const double> y) {
  double a = 0;
  for (double v : y) a = std::max(a, std::fabs(v));
  return std::max(a * 0x1p-53, 0x1p-1074);
}

// A margin on the f64 values as one on the exact values, as a binary32 lower bound.
float exact_margin(double m, double err) {
  if (!(m > err)) return 0.0f;
  const double r = m - err;
  float f = static_cast<float>(r);
  if (static_cast<double>(f) > r) f = std::nextafter(f, 0.0f);
  return f;
}

void fp8_groups(const StoreSpec& s, std::span<const double> y, std::size_t group, StoreBlock& out) {
  for (std::size_t g = 0; g * group < y.size(); ++g) {
    const std::span<const double> yg = y.subspan(g * group, group);
    const Exact e(yg);
    const double err = f64_error(yg);
    const Fp8GroupExact r = fp8_dynamic_exact(e.all(), s.fp8, s.overflow);
    out.scales.push_back(r.scale);
    out.scale_margin.push_back(exact_margin(r.scale_margin, err));
    for (const ExactCode& c : r.codes) {
      out.bytes.push_back(static_cast<std::uint8_t>(c.code));
      out.margin.push_back(exact_margin(c.margin, err));
    }
  }
}

// A given scale (per tensor or per head): each code is its own group, fp8_exact of y / s; the scale is a
// golden input, so it has no margin and no stored copy here.
void fp8_given(const StoreSpec& s, std::span<const double> y, std::int64_t heads, std::int64_t head_dim, StoreBlock& out) {
  for (std::size_t v = 0; v * static_cast<std::size_t>(head_dim) < y.size(); ++v) {  // one head vector
    const double sc = given_scale(s, static_cast<std::int64_t>(v) % heads);
    const std::span<const double> yv = y.subspan(v * static_cast<std::size_t>(head_dim), static_cast<std::size_t>(head_dim));
    const Exact e(yv);
    for (std::size_t j = 0; j < yv.size(); ++j) {
      const ExactCode c = fp8_exact(e.all()[j], sc, s.fp8, s.overflow);
      out.bytes.push_back(static_cast<std::uint8_t>(c.code));
      out.margin.push_back(exact_margin(c.margin, f64_error(yv.subspan(j, 1))));
    }
  }
}

// A data-derived scale over every token (per tensor, per head): y is the whole tensor. The group's amax
// is the largest |f64 value|, taken as exact like every value here; the codes are computed one head
// vector at a time against it (the whole group never held in MPFR at once), the f64 error that of the
// group's largest magnitude.
void fp8_whole(const StoreSpec& s, std::span<const double> y, std::int64_t heads, std::int64_t head_dim, StoreBlock& out) {
  const auto D = static_cast<std::size_t>(head_dim);
  const std::size_t groups = s.scale == ScaleGranularity::per_head ? static_cast<std::size_t>(heads) : 1;
  std::vector<double> amax(groups, 0.0);
  for (std::size_t i = 0; i < y.size(); ++i) {
    double& a = amax[static_cast<std::size_t>(fp8_scale_group(s, static_cast<std::int64_t>(i), heads, head_dim))];
    a = std::max(a, std::fabs(y[i]));
  }
  out.scales.resize(groups);
  out.scale_margin.resize(groups);
  for (std::size_t v = 0; v * D < y.size(); ++v) {  // one head vector
    const auto g = static_cast<std::size_t>(fp8_scale_group(s, static_cast<std::int64_t>(v * D), heads, head_dim));
    const Exact e(y.subspan(v * D, D)), a(std::span<const double>(&amax[g], 1));
    const double err = std::max(amax[g] * 0x1p-53, 0x1p-1074);
    const Fp8GroupExact r = fp8_dynamic_exact(e.all(), a.all()[0], s.fp8, s.overflow);
    out.scales[g] = r.scale;
    out.scale_margin[g] = exact_margin(r.scale_margin, err);
    for (const ExactCode& c : r.codes) {
      out.bytes.push_back(static_cast<std::uint8_t>(c.code));
      out.margin.push_back(exact_margin(c.margin, err));
    }
  }
}

template <class ExactBlock, class Fn>
void ggml_blocks(std::span<const double> y, StoreBlock& out, Fn quantize) {
  for (std::size_t b = 0; b * kGgmlBlock < y.size(); ++b) {
    const std::span<const double> yb = y.subspan(b * kGgmlBlock, kGgmlBlock);
    const Exact e(yb);
    const double err = f64_error(yb);
    const ExactBlock r = quantize(std::span<const mpfr_srcptr, kGgmlBlock>(e.all().data(), kGgmlBlock));
    const auto bytes = to_bytes(r.block);
    out.bytes.insert(out.bytes.end(), bytes.begin(), bytes.end());
    out.scale_margin.push_back(exact_margin(r.scale_margin, err));
    for (double m : r.margin) out.margin.push_back(exact_margin(m, err));
  }
}

void affine_groups(const StoreSpec& s, std::span<const double> y, std::int64_t head_dim, StoreBlock& out) {
  const auto G = static_cast<std::size_t>(s.affine.group_size), D = static_cast<std::size_t>(head_dim);
  for (std::size_t h = 0; h * D < y.size(); ++h) {  // one head vector: its codes packed together
    std::vector<std::uint8_t> codes;
    for (std::size_t g = 0; g < D / G; ++g) {
      const std::span<const double> yg = y.subspan(h * D + g * G, G);
      const Exact e(yg);
      const double err = f64_error(yg);
      const AffineExact r = mlx_affine_exact(e.all(), s.affine);
      codes.insert(codes.end(), r.q.codes.begin(), r.q.codes.end());
      out.scales.push_back(r.q.groups[0].scale);
      out.biases.push_back(r.q.groups[0].bias);
      out.scale_margin.push_back(exact_margin(r.scale_margin[0], err));
      out.decision_margin.push_back(exact_margin(r.decision_margin[0], err));
      for (double m : r.margin) out.margin.push_back(exact_margin(m, err));
    }
    const std::vector<std::uint32_t> w = affine_pack(codes, s.affine.bits);
    out.words.insert(out.words.end(), w.begin(), w.end());
  }
}

}  // namespace

StoreBlock store_block(const StoreSpec& s, std::span<const double> y, std::int64_t tokens, std::int64_t heads,
                       std::int64_t head_dim) {
  if (y.size() != static_cast<std::size_t>(tokens * heads * head_dim))
    throw std::invalid_argument("ropecheck: store_block: values do not match [tokens, heads, head_dim]");
  StoreBlock out;
  switch (s.kind) {
    case StoreKind::fp8:
      if (s.given_scale()) {
        fp8_given(s, y, heads, head_dim, out);
        break;
      }
      if (s.whole_tensor_scale()) {
        fp8_whole(s, y, heads, head_dim, out);
        break;
      }
      fp8_groups(s, y, static_cast<std::size_t>(s.scale == ScaleGranularity::per_token ? heads * head_dim : head_dim),
                 out);
      break;
    case StoreKind::q8_0: ggml_blocks<Q8_0Exact>(y, out, [](auto x) { return q8_0_exact(x); }); break;
    case StoreKind::q4_0: ggml_blocks<Q4_0Exact>(y, out, [](auto x) { return q4_0_exact(x); }); break;
    case StoreKind::affine: affine_groups(s, y, head_dim, out); break;
  }
  return out;
}

}  // namespace ropecheck::quant
