// The metrics of `drift --scores` (drift/DRIFT.md, "Scores"): the logit's own rounding, the compensated
// dot product, a softmax row's errors, and the summaries of a kernel's records.
#include <algorithm>
#include <bit>
#include <cmath>

#include "ropecheck/drift/scores.hpp"
#include "ropecheck/reference/double_double.hpp"

namespace ropecheck::drift {

double logit_rounding(double s, DType dt) { return ulp(s, dt) / 2; }

double dd_dot(std::span<const double> a, std::span<const double> b) {
  // Dot2: each product split exactly (two_prod, an explicit FMA), the high parts summed with 2Sum, every
  // low part and 2Sum error gathered in a second double: error <= u |sum| + gamma_n^2 sum |a_i b_i|.
  DD s{0.0, 0.0};
  for (std::size_t i = 0; i < a.size(); ++i) s = dd::add(s, dd::two_prod(a[i], b[i]));
  return s.hi + s.lo;
}

namespace scores_detail {

// exp(t_j - max t) / sum, in binary64 (relative error a few ulps per probability: far below what a kernel's
// rotation shows; drift/DRIFT.md gives the resolution).
std::vector<double> softmax(std::span<const double> t) {
  const double top = *std::max_element(t.begin(), t.end());
  std::vector<double> p(t.size());
  DD z{0.0, 0.0};
  for (std::size_t j = 0; j < t.size(); ++j) {
    p[j] = std::exp(t[j] - top);
    z = dd::add(z, p[j]);
  }
  const double zs = z.hi + z.lo;
  for (double& x : p) x /= zs;
  return p;
}

}  // namespace scores_detail

RowError softmax_row_error(std::span<const double> exact, std::span<const double> candidate,
                           std::span<const double> v, int dv) {
  RowError r;
  if (exact.empty()) return r;
  const std::vector<double> p = scores_detail::softmax(exact), ph = scores_detail::softmax(candidate);
  for (std::size_t j = 0; j < p.size(); ++j)
    if (p[j] > 0) r.prob_rel = std::max(r.prob_rel, std::fabs(ph[j] - p[j]) / p[j]);
  const std::size_t n = p.size(), d = static_cast<std::size_t>(dv);
  std::vector<double> col(n), absp(n), absv(n);
  for (std::size_t c = 0; c < d; ++c) {
    for (std::size_t j = 0; j < n; ++j) {
      col[j] = v[j * d + c];
      absv[j] = std::fabs(col[j]);
    }
    const double o = dd_dot(p, col), oh = dd_dot(ph, col), m = dd_dot(p, absv);
    if (m > 0) r.out_rel = std::max(r.out_rel, std::fabs(oh - o) / m);
  }
  return r;
}

int octave_bin(std::int64_t x) {
  return x <= 0 ? 0 : static_cast<int>(std::bit_width(static_cast<std::uint64_t>(x)));
}

namespace scores_detail {

double median(std::vector<double>& v) {
  if (v.empty()) return 0;
  const std::size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h), v.end());
  const double hi = v[h];
  if (v.size() % 2) return hi;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(h)) + hi) / 2;
}

// Records [the ones `in` selects] summarised.
template <class In>
ScoreSummary summarize(const std::vector<ScoreRecord>& records, In in) {
  ScoreSummary s;
  std::vector<double> f32, bf16, rel;
  for (const ScoreRecord& r : records) {
    if (!in(r)) continue;
    ++s.count;
    if (r.nonfinite) ++s.nonfinite;
    s.abs_max = std::max(s.abs_max, r.error);
    f32.push_back(r.f32_units);
    bf16.push_back(r.bf16_units);
    rel.push_back(r.rel);
    s.f32_max = std::max(s.f32_max, r.f32_units);
    s.bf16_max = std::max(s.bf16_max, r.bf16_units);
    s.rel_max = std::max(s.rel_max, r.rel);
    if (!r.bound_ratio) ++s.saturated;
    else s.bound_max = std::max(s.bound_max.value_or(0.0), *r.bound_ratio);
  }
  s.f32_median = median(f32);
  s.bf16_median = median(bf16);
  s.rel_median = median(rel);
  return s;
}

void add_rows(ScoreSummary& s, const std::vector<RowRecord>& rows, int bin) {
  for (const RowRecord& r : rows)
    if (bin < 0 || octave_bin(r.query) == bin) {
      s.prob_rel_max = std::max(s.prob_rel_max, r.error.prob_rel);
      s.out_rel_max = std::max(s.out_rel_max, r.error.out_rel);
    }
}

template <class Key>
std::vector<ScoreBin> bins(const std::vector<ScoreRecord>& records, Key key) {
  int top = -1;
  for (const ScoreRecord& r : records) top = std::max(top, octave_bin(key(r)));
  std::vector<ScoreBin> out;
  for (int b = 0; b <= top; ++b) {
    ScoreBin bin{b, b == 0 ? 0 : std::int64_t{1} << (b - 1), std::int64_t{1} << b, {}};
    bin.summary = summarize(records, [&](const ScoreRecord& r) { return octave_bin(key(r)) == b; });
    if (bin.summary.count > 0) out.push_back(bin);
  }
  return out;
}

}  // namespace scores_detail

void summarize_scores(ScoresKernel& k) {
  using namespace scores_detail;
  // Distance |m - n|: a full (bidirectional) set has keys after the query too.
  k.by_distance = bins(k.records, [](const ScoreRecord& r) { return r.query > r.key ? r.query - r.key : r.key - r.query; });
  k.by_position = bins(k.records, [](const ScoreRecord& r) { return r.query; });
  for (ScoreBin& b : k.by_position) add_rows(b.summary, k.rows, b.bin);
  k.total = summarize(k.records, [](const ScoreRecord&) { return true; });
  add_rows(k.total, k.rows, -1);
}

}  // namespace ropecheck::drift
