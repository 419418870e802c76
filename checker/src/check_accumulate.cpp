// The checker's per-tensor pass: every element of a token range of one candidate tensor against the
// truth (the golden set's f64 copy) under the error model, accumulated per worker thread into
// statistics that merge exactly (check_part.hpp): counts, maxima, first positions, the worst elements
// under a total order, and sums taken per token in double, then added exactly (ExactSum), so the result
// does not depend on the thread count or on how the tokens are split over `--shard` processes.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "check_geometry.hpp"
#include "check_internal.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/formulas/rope.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"
#include "ropecheck/io/detail/tensor_io.hpp"

namespace ropecheck::checker::check_detail {
// The checker's vocabulary from the modules below it.
using golden::GoldenSet;
using golden::ManifestTensor;
using io::Tensor;
using io::TensorDType;

using accuracy::AccuracyClass;
using accuracy::ClassBound;
using accuracy::PairAngle;
using accuracy::Quantity;

namespace {

int bin_of(std::int64_t position) {
  const std::uint64_t a = position < 0 ? static_cast<std::uint64_t>(-(position + 1)) + 1 : static_cast<std::uint64_t>(position);
  return static_cast<int>(std::bit_width(a));  // 0 -> 0, [2^(k-1), 2^k) -> k
}

// 2^k for k in [-1074, 1023].
inline double pow2(int k) {
  if (k >= -1022) return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52);
  return std::ldexp(1.0, k);
}
// ulp(y, dt) of rounding.hpp for finite y, without frexp / ldexp.
inline double fast_ulp(double y, int precision, int min_normal_exp) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(y) & 0x7FFFFFFFFFFFFFFFULL;
  int e = static_cast<int>(b >> 52) - 1023;  // -1023 for 0 and subnormal doubles
  if (e < min_normal_exp) e = min_normal_exp;
  return pow2(e - precision + 1);
}

struct Ranked {  // an element in the worst list
  double score;
  std::int64_t index;
};
// a ranks before b: higher score, then lower index (a total order: the list does not depend on threads).
inline bool ranks_before(const Ranked& a, const Ranked& b) { return a.score != b.score ? a.score > b.score : a.index < b.index; }

constexpr std::size_t kClasses = accuracy::kAccuracyClasses.size();
constexpr std::size_t kBins = kPositionBins;

// One token's sums, in double in element order, added exactly to the statistics when the token ends.
struct TokenSums {
  double sum_ulps = 0, sum_pair = 0, sum_sq_err = 0, sum_sq_truth = 0;
  ErrorStatsAcc err;
  int bins = 0;  // the bins the token's elements fall in (one per stream position; the rare fifth flushes)
  std::array<int, 4> bin{};
  std::array<ErrorStatsAcc, 4> bin_err{};
};

void add_exact(ErrorSums& into, const ErrorStatsAcc& a) {
  into.n += a.n;
  into.max_b = std::max(into.max_b, a.max_b);
  into.max_u = std::max(into.max_u, a.max_u);
  into.sum_b.add(a.sum_b);
  into.sq_b.add(a.sq_b);
  into.sum_u.add(a.sum_u);
  into.sq_u.add(a.sq_u);
}

// What one worker accumulates.
struct Acc {
  TensorStats s;
  std::vector<Ranked> heap;  // the worker's worst, a heap whose front ranks last
  TokenSums tok;

  ErrorStatsAcc& token_bin(int b) {
    for (int k = 0; k < tok.bins; ++k)
      if (tok.bin[static_cast<std::size_t>(k)] == b) return tok.bin_err[static_cast<std::size_t>(k)];
    if (tok.bins == static_cast<int>(tok.bin.size())) flush_bins();
    const std::size_t k = static_cast<std::size_t>(tok.bins++);
    tok.bin[k] = b;
    tok.bin_err[k] = {};
    return tok.bin_err[k];
  }
  void flush_bins() {
    for (int k = 0; k < tok.bins; ++k)
      add_exact(s.bins[static_cast<std::size_t>(tok.bin[static_cast<std::size_t>(k)])].err,
                tok.bin_err[static_cast<std::size_t>(k)]);
    tok.bins = 0;
  }
  void end_token() {
    s.sum_ulps.add(tok.sum_ulps);
    s.sum_pair.add(tok.sum_pair);
    s.sum_sq_err.add(tok.sum_sq_err);
    s.sum_sq_truth.add(tok.sum_sq_truth);
    add_exact(s.err, tok.err);
    flush_bins();
    tok.sum_ulps = tok.sum_pair = tok.sum_sq_err = tok.sum_sq_truth = 0;
    tok.err = {};
  }
};

}  // namespace

TensorStats check_tensor(const GoldenSet& g, const std::string& golden_name, const Tensor& cand, const CheckOptions& opt,
                         std::int64_t first_token, std::int64_t last_token) {
  TensorStats rep;
  rep.golden_name = golden_name;
  rep.candidate_name = cand.name;
  rep.base = base_of(golden_name);
  rep.dtype = cand.dtype;
  rep.shape = cand.shape;
  const DType dt = *float_dtype(cand.dtype);
  const FormatInfo& fi = format_info(dt);
  const double u_dt = unit_roundoff(dt);

  const Tensor& truth_t = g.tensor(rep.base + ".f64");
  const Tensor& same_t = g.tensor(golden_name);
  const Reader cand_r(cand), truth_r(truth_t), same_r(same_t);
  const Geometry geo(g, rep.base);

  std::array<std::array<ClassBound, 3>, kClasses> bounds{};
  for (std::size_t c = 0; c < kClasses; ++c)
    for (Quantity q : {Quantity::table, Quantity::rotated, Quantity::passthrough})
      bounds[c][static_cast<std::size_t>(q)] = accuracy::class_bound(accuracy::kAccuracyClasses[c], dt, q);
  const Criterion& cr = opt.criterion;
  const std::size_t crit_class = static_cast<std::size_t>(
      std::find(accuracy::kAccuracyClasses.begin(), accuracy::kAccuracyClasses.end(), cr.accuracy_class) -
      accuracy::kAccuracyClasses.begin());
  const bool crit_exact = cr.kind == Criterion::Kind::accuracy_class && cr.accuracy_class == AccuracyClass::exact;
  const bool crit_class_bound = cr.kind == Criterion::Kind::accuracy_class && !crit_exact;  // can saturate
  const std::size_t K = static_cast<std::size_t>(std::max(0, opt.worst_count));

  // One element: index, position of its driving stream, quantity, angle, magnitude M.
  auto eval = [&](Acc& acc, std::int64_t i, std::int64_t pos, Quantity q, const PairAngle& angle, double M) {
    TensorStats& a = acc.s;
    TokenSums& tk = acc.tok;
    ++a.elements;
    const double c = cand_r(i), y = truth_r(i), gv = same_r(i);
    const bool identical = c == gv || (std::isnan(c) && std::isnan(gv));
    a.identical += identical;
    a.nan += std::isnan(c);
    a.inf += std::isinf(c);
    double e = 0, ulps = 0, pair_rel = 0;
    bool mismatch = false;
    if (std::isfinite(c) && std::isfinite(y)) {
      e = std::fabs(c - y);
      ulps = e / fast_ulp(y, fi.precision, fi.min_normal_exp);
      pair_rel = M > 0 ? e / (M * u_dt) : (e == 0 ? 0 : kInf);
      tk.sum_ulps += ulps;
      tk.sum_pair += pair_rel;
      tk.sum_sq_err += e * e;
      tk.sum_sq_truth += y * y;
      ++a.finite;
      a.max_abs = std::max(a.max_abs, e);
      if (y != 0) a.max_rel = std::max(a.max_rel, e / std::fabs(y));
    } else {
      mismatch = !((std::isnan(c) && std::isnan(y)) || (std::isinf(c) && c == y));
      if (mismatch) {
        ++a.mismatches;
        e = ulps = pair_rel = a.max_abs = kInf;
      }
    }
    a.max_ulps = std::max(a.max_ulps, ulps);
    a.max_pair = std::max(a.max_pair, pair_rel);

    double crit_margin = 0;
    for (std::size_t k = 0; k < kClasses; ++k) {
      double margin;
      bool violated;
      if (k == 0) {  // exact
        violated = !identical;
        margin = identical ? 0.0
                           : (std::isfinite(c) && std::isfinite(gv) ? std::fabs(c - gv) / fast_ulp(gv, fi.precision, fi.min_normal_exp)
                                                                    : kInf);
      } else {
        margin = mismatch ? kInf : e / bounds[k][static_cast<std::size_t>(q)].allowed(angle, M);
        violated = margin > 1;
      }
      ClassStats& ca = a.classes[k];
      if (margin > ca.worst) ca.worst = margin;
      if (violated) {
        ++ca.violations;
        note_first(ca.first, pos);
      }
      if (k == crit_class) crit_margin = margin;
    }

    double score;
    bool fails;
    switch (cr.kind) {
      case Criterion::Kind::accuracy_class:
        score = crit_margin;
        fails = crit_exact ? !identical : score > 1;
        break;
      case Criterion::Kind::max_ulp:
        score = cr.max_ulp > 0 ? ulps / cr.max_ulp : (ulps == 0 ? 0 : kInf);
        fails = mismatch || score > 1;
        break;
      case Criterion::Kind::tolerance:
      default: {
        const double allowed = cr.atol + cr.rtol * std::fabs(y);
        score = mismatch ? kInf : (allowed > 0 ? e / allowed : (e == 0 ? 0 : kInf));
        fails = mismatch || score > 1;
      }
    }
    if (score > a.worst_score) a.worst_score = score;
    const int bin = bin_of(pos);
    BinStats& b = a.bins[static_cast<std::size_t>(bin)];
    ++b.elements;
    if (pair_rel > b.max_pair) b.max_pair = pair_rel;
    if (ulps > b.max_ulps) b.max_ulps = ulps;
    if (std::isfinite(c) && std::isfinite(y)) {  // error statistics: finite elements only (error_stats.hpp)
      tk.err.add(score, pair_rel);
      acc.token_bin(bin).add(score, pair_rel);
    }
    if (fails) {
      ++a.violations;
      ++b.violations;
      note_first(a.first, pos);
    } else if (crit_class_bound && bounds[crit_class][static_cast<std::size_t>(q)].saturated(angle)) {
      ++a.saturated;  // the bound accepts any output of this magnitude: not tested
      ++b.saturated;
      note_first(a.first_saturated, pos);
    }
    if (K > 0 && score > 0) {
      const Ranked r{score, i};
      auto& heap = acc.heap;
      if (heap.size() < K) {
        heap.push_back(r);
        std::push_heap(heap.begin(), heap.end(), ranks_before);
      } else if (ranks_before(r, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), ranks_before);
        heap.back() = r;
        std::push_heap(heap.begin(), heap.end(), ranks_before);
      }
    }
  };

  // Tokens [t0, t1) into one accumulator.
  auto run_chunk = [&](Acc& a, std::int64_t t0, std::int64_t t1) {
    const auto& pos = *geo.positions;
    switch (geo.kind) {
      case Geometry::Kind::pair_table:
        for (std::int64_t t = t0; t < t1; ++t) {
          for (int j = 0; j < geo.P; ++j) {
            const std::int64_t p = geo.stream_position(t, j);
            const std::size_t jj = static_cast<std::size_t>(j);
            eval(a, t * geo.P + j, p, Quantity::table,
                 {std::fabs(static_cast<double>(p) * geo.freq[jj]), geo.log_freq[jj]}, 1.0);
          }
          a.end_token();
        }
        break;
      case Geometry::Kind::pe:
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::int64_t p = pos[static_cast<std::size_t>(t)].t;
          const double pa = static_cast<double>(p + geo.offset);
          for (std::int64_t c = 0; c < geo.D; ++c) {
            const int f = geo.column_freq[static_cast<std::size_t>(c)];
            const PairAngle angle = f < 0 ? PairAngle{0, 0}
                                          : PairAngle{std::fabs(pa * geo.freq[static_cast<std::size_t>(f)]),
                                                      geo.log_freq[static_cast<std::size_t>(f)]};
            eval(a, t * geo.D + c, p, Quantity::table, angle, 1.0);
          }
          a.end_token();
        }
        break;
      case Geometry::Kind::rotated:
        for (std::int64_t t = t0; t < t1; ++t) {
          for (std::int64_t h = 0; h < geo.H; ++h) {
            const std::int64_t base = (t * geo.H + h) * geo.D;
            for (std::int64_t ch = 0; ch < geo.D; ++ch) {
              const std::int64_t i = base + ch;
              const int j = geo.pair_of[static_cast<std::size_t>(ch)];
              if (j < 0) {
                eval(a, i, pos[static_cast<std::size_t>(t)].t, Quantity::passthrough, {0, 0}, std::fabs(geo.input(i)));
                continue;
              }
              const std::int64_t p = geo.stream_position(t, j);
              const double M = geo.att * (std::fabs(geo.input(i)) +
                                          std::fabs(geo.input(base + geo.partner[static_cast<std::size_t>(ch)])));
              eval(a, i, p, Quantity::rotated,
                   {std::fabs(static_cast<double>(p) * geo.freq[static_cast<std::size_t>(j)]),
                    geo.log_freq[static_cast<std::size_t>(j)]},
                   M);
            }
          }
          a.end_token();
        }
        break;
    }
  };

  // Chunks of tokens taken by the workers in any order: every merge below is order-independent.
  const std::int64_t per_token = std::max<std::int64_t>(1, geo.per_token());
  const std::int64_t chunk_tokens = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / per_token);
  const std::int64_t chunks = (last_token - first_token + chunk_tokens - 1) / chunk_tokens;
  std::vector<Acc> accs(static_cast<std::size_t>(chunk_workers(chunks, opt.threads)));
  for_each_chunk_on(chunks, opt.threads, [&](std::int64_t k, int w) {
    const std::int64_t t0 = first_token + k * chunk_tokens;
    run_chunk(accs[static_cast<std::size_t>(w)], t0, std::min(last_token, t0 + chunk_tokens));
  });

  std::vector<Ranked> worst;
  for (const Acc& a : accs) {
    rep.merge_counts(a.s);
    worst.insert(worst.end(), a.heap.begin(), a.heap.end());
  }

  // The worst elements, described.
  std::sort(worst.begin(), worst.end(), ranks_before);
  if (worst.size() > K) worst.resize(K);
  for (const Ranked& w : worst) {
    const std::int64_t i = w.index;
    ElementReport r;
    r.index = i;
    const std::int64_t per = geo.per_token();
    r.token = i / per;
    r.position = (*geo.positions)[static_cast<std::size_t>(r.token)];
    r.stream = 0;
    r.magnitude = 1;
    switch (geo.kind) {
      case Geometry::Kind::pair_table:
        r.pair = static_cast<int>(i % geo.P);
        r.stream = geo.stream[static_cast<std::size_t>(r.pair)];
        r.theta = std::fabs(static_cast<double>(geo.stream_position(r.token, r.pair)) * geo.freq[static_cast<std::size_t>(r.pair)]);
        break;
      case Geometry::Kind::pe: {
        r.channel = static_cast<int>(i % geo.D);
        r.pair = geo.column_freq[static_cast<std::size_t>(r.channel)];
        if (r.pair >= 0)
          r.theta = std::fabs(static_cast<double>(r.position.t + geo.offset) * geo.freq[static_cast<std::size_t>(r.pair)]);
        break;
      }
      case Geometry::Kind::rotated: {
        r.channel = static_cast<int>(i % geo.D);
        r.head = static_cast<int>((i / geo.D) % geo.H);
        r.pair = geo.pair_of[static_cast<std::size_t>(r.channel)];
        if (r.pair >= 0) {
          r.stream = geo.stream[static_cast<std::size_t>(r.pair)];
          r.theta = std::fabs(static_cast<double>(geo.stream_position(r.token, r.pair)) * geo.freq[static_cast<std::size_t>(r.pair)]);
          r.magnitude = geo.att * (std::fabs(geo.input(i)) +
                                   std::fabs(geo.input(i - r.channel + geo.partner[static_cast<std::size_t>(r.channel)])));
        } else {
          r.magnitude = std::fabs(geo.input(i));
        }
        break;
      }
    }
    r.candidate = cand_r(i);
    r.truth = truth_r(i);
    r.golden = same_r(i);
    const bool finite = std::isfinite(r.candidate) && std::isfinite(r.truth);
    r.abs_error = finite ? std::fabs(r.candidate - r.truth) : kInf;
    r.ulps = finite ? r.abs_error / ulp(r.truth, dt) : kInf;
    r.pair_relative = !finite ? kInf : (r.magnitude > 0 ? r.abs_error / (r.magnitude * u_dt) : (r.abs_error == 0 ? 0 : kInf));
    r.score = w.score;
    rep.worst.push_back(r);
  }
  return rep;
}

}  // namespace ropecheck::checker::check_detail
