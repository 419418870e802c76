#include "ropecheck/golden/checker.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <atomic>
#include <thread>

#include "ropecheck/golden/baseline.hpp"
#include "ropecheck/reference/rope_reference.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/reference/sinusoidal_reference.hpp"
#include "tensor_io_detail.hpp"

namespace ropecheck::golden {

using accuracy::AccuracyClass;
using accuracy::ClassBound;
using accuracy::PairAngle;
using accuracy::Quantity;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string strf(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string strf(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  const int n = std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof buf) return std::string(buf, static_cast<std::size_t>(n));
  std::string s(static_cast<std::size_t>(n) + 1, '\0');
  va_start(ap, f);
  std::vsnprintf(s.data(), s.size(), f, ap);
  va_end(ap);
  s.resize(static_cast<std::size_t>(n));
  return s;
}

std::string join(const std::vector<std::string>& v, std::size_t max_items = 24) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max_items; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max_items) s += strf(", ... (%zu in all)", v.size());
  return s.empty() ? "(none)" : s;
}

std::optional<DType> float_dtype(TensorDType t) {
  switch (t) {
    case TensorDType::f64: return DType::f64;
    case TensorDType::f32: return DType::f32;
    case TensorDType::f16: return DType::f16;
    case TensorDType::bf16: return DType::bf16;
    default: return std::nullopt;
  }
}

// Element decoding without per-call allocation; f16 through a table.
const std::array<double, 65536>& f16_table() {
  static const std::array<double, 65536> t = [] {
    std::array<double, 65536> a{};
    for (std::uint32_t b = 0; b < 65536; ++b) a[b] = bits_to_double(b, DType::f16);
    return a;
  }();
  return t;
}

struct Reader {
  const std::uint8_t* data;
  TensorDType dtype;
  const std::array<double, 65536>* f16;

  explicit Reader(const Tensor& t) : data(t.data.data()), dtype(t.dtype), f16(&f16_table()) {}
  double operator()(std::int64_t i) const {
    const std::size_t k = static_cast<std::size_t>(i);
    switch (dtype) {
      case TensorDType::f64: {
        double v;
        std::memcpy(&v, data + 8 * k, 8);
        return v;
      }
      case TensorDType::f32: {
        float v;
        std::memcpy(&v, data + 4 * k, 4);
        return static_cast<double>(v);
      }
      case TensorDType::f16: {
        std::uint16_t b;
        std::memcpy(&b, data + 2 * k, 2);
        return (*f16)[b];
      }
      case TensorDType::bf16: {
        std::uint16_t b;
        std::memcpy(&b, data + 2 * k, 2);
        return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
      }
      default: return std::nan("");
    }
  }
};

std::string base_of(const std::string& name) { return name.substr(0, name.find('.')); }

// What the error model needs to know about the elements of one output tensor.
struct Geometry {
  enum class Kind { pair_table, pe, rotated } kind = Kind::pair_table;
  const std::vector<Position>* positions = nullptr;
  std::vector<double> freq, log_freq;  // per pair (RoPE) or frequency index (sinusoidal)
  std::vector<int> stream;             // per pair: the position stream driving it
  std::vector<int> pair_of, partner;   // per channel (rotated): -1 = pass-through
  std::vector<int> column_freq;        // per pe column: frequency index, -1 for a zero column
  const Tensor* in = nullptr;          // q or k (rotated)
  std::int64_t P = 0, D = 0, H = 1;
  double att = 1;
  std::int64_t offset = 0;

  Geometry(const GoldenSet& g, const std::string& base) : positions(&g.positions()) {
    if (g.is_rope()) {
      const RopeSpec& r = g.spec().rope;
      freq = rope_frequencies<double>(r, g.seq_len()).inv_freq;
      P = rope_pairs(r);
      D = r.head_dim;
      H = g.heads();
      att = g.attention_factor();
      for (int j = 0; j < P; ++j) stream.push_back(r.mrope == MropeMode::none ? 0 : mrope_stream(r, j));
      pair_of.assign(static_cast<std::size_t>(D), -1);
      partner.assign(static_cast<std::size_t>(D), -1);
      const int block = rope_block_channels(r);
      for (int j = 0; j < P; ++j) {
        const auto [a, b] = pair_channels(r, j);
        if (a >= block || b >= block) continue;
        pair_of[static_cast<std::size_t>(a)] = pair_of[static_cast<std::size_t>(b)] = j;
        partner[static_cast<std::size_t>(a)] = b;
        partner[static_cast<std::size_t>(b)] = a;
      }
      if (base == "q_rot" || base == "k_rot") {
        kind = Kind::rotated;
        in = &g.tensor(base == "q_rot" ? "q" : "k");  // f32, checked when the set was loaded
      }
    } else {
      kind = Kind::pe;
      const SinusoidalSpec& s = g.spec().sinusoidal;
      freq = sinusoidal_frequencies<double>(s);
      D = s.d_model;
      offset = s.position_offset;
      for (int c = 0; c < D; ++c) {
        const SinusoidalColumn col = sinusoidal_column(s, c);
        column_freq.push_back(col.kind == SinusoidalKind::zero ? -1 : col.frequency);
      }
    }
    for (double w : freq) log_freq.push_back(w == 0 ? 0.0 : std::fabs(std::log(std::fabs(w))));
  }

  std::int64_t per_token() const { return kind == Kind::pair_table ? P : (kind == Kind::pe ? D : H * D); }
  std::int64_t stream_position(std::int64_t token, int pair) const {
    const Position& p = (*positions)[static_cast<std::size_t>(token)];
    const int s = stream[static_cast<std::size_t>(pair)];
    return s == 0 ? p.t : (s == 1 ? p.h : p.w);
  }
  double input(std::int64_t i) const {
    float v;
    std::memcpy(&v, in->data.data() + 4 * static_cast<std::size_t>(i), 4);
    return static_cast<double>(v);
  }
};

int bin_of(std::int64_t position) {
  const std::uint64_t a = position < 0 ? static_cast<std::uint64_t>(-(position + 1)) + 1 : static_cast<std::uint64_t>(position);
  return static_cast<int>(std::bit_width(a));  // 0 -> 0, [2^(k-1), 2^k) -> k
}

void note_first(std::optional<std::int64_t>& first, std::int64_t p) {
  if (!first || p < *first) first = p;
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
constexpr std::size_t kBins = 64;

struct ClassAcc {
  std::int64_t violations = 0;
  std::optional<std::int64_t> first;
  double worst = 0;
};
struct BinAcc {
  std::int64_t elements = 0, violations = 0, saturated = 0;
  double max_pair = 0, max_ulps = 0;
  ErrorStatsAcc err;
};
// Everything one chunk of tokens contributes; chunks are merged in order.
struct Acc {
  std::int64_t identical = 0, nan = 0, inf = 0, mismatches = 0, finite = 0;
  double max_ulps = 0, sum_ulps = 0, max_abs = 0, max_rel = 0, sum_sq_err = 0, sum_sq_truth = 0, max_pair = 0,
         sum_pair = 0;
  std::array<ClassAcc, kClasses> cls{};
  std::int64_t violations = 0, saturated = 0;
  std::optional<std::int64_t> first, first_saturated;
  double worst_score = 0;
  std::array<BinAcc, kBins> bins{};
  ErrorStatsAcc err;
  std::vector<Ranked> heap;  // the chunk's worst, a heap whose front ranks last
};

TensorReport check_tensor(const GoldenSet& g, const std::string& golden_name, const Tensor& cand, const CheckOptions& opt) {
  TensorReport rep;
  rep.golden_name = golden_name;
  rep.candidate_name = cand.name;
  rep.base = base_of(golden_name);
  rep.dtype = cand.dtype;
  rep.shape = cand.shape;
  rep.elements = cand.numel();
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
  auto eval = [&](Acc& a, std::int64_t i, std::int64_t pos, Quantity q, const PairAngle& angle, double M) {
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
      a.sum_ulps += ulps;
      a.sum_pair += pair_rel;
      a.sum_sq_err += e * e;
      a.sum_sq_truth += y * y;
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
      ClassAcc& ca = a.cls[k];
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
    BinAcc& b = a.bins[static_cast<std::size_t>(bin_of(pos))];
    ++b.elements;
    if (pair_rel > b.max_pair) b.max_pair = pair_rel;
    if (ulps > b.max_ulps) b.max_ulps = ulps;
    if (std::isfinite(c) && std::isfinite(y)) {  // error statistics: finite elements only (error_stats.hpp)
      a.err.add(score, pair_rel);
      b.err.add(score, pair_rel);
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
      if (a.heap.size() < K) {
        a.heap.push_back(r);
        std::push_heap(a.heap.begin(), a.heap.end(), ranks_before);
      } else if (ranks_before(r, a.heap.front())) {
        std::pop_heap(a.heap.begin(), a.heap.end(), ranks_before);
        a.heap.back() = r;
        std::push_heap(a.heap.begin(), a.heap.end(), ranks_before);
      }
    }
  };

  // Tokens [t0, t1) into one accumulator.
  auto run_chunk = [&](Acc& a, std::int64_t t0, std::int64_t t1) {
    const auto& pos = *geo.positions;
    switch (geo.kind) {
      case Geometry::Kind::pair_table:
        for (std::int64_t t = t0; t < t1; ++t)
          for (int j = 0; j < geo.P; ++j) {
            const std::int64_t p = geo.stream_position(t, j);
            const std::size_t jj = static_cast<std::size_t>(j);
            eval(a, t * geo.P + j, p, Quantity::table,
                 {std::fabs(static_cast<double>(p) * geo.freq[jj]), geo.log_freq[jj]}, 1.0);
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
        }
        break;
      case Geometry::Kind::rotated:
        for (std::int64_t t = t0; t < t1; ++t)
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
        break;
    }
  };

  // Fixed chunks of tokens (independent of the thread count, so the sums are too), merged in order.
  const std::int64_t T = g.tokens();
  const std::int64_t per_token = std::max<std::int64_t>(1, geo.per_token());
  const std::int64_t chunk_tokens = std::max<std::int64_t>(1, (std::int64_t{1} << 16) / per_token);
  const std::int64_t chunks = (T + chunk_tokens - 1) / chunk_tokens;
  std::vector<Acc> accs(static_cast<std::size_t>(chunks));
  int threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<std::int64_t>(threads, chunks));
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    for (std::int64_t k; (k = next.fetch_add(1)) < chunks;)
      run_chunk(accs[static_cast<std::size_t>(k)], k * chunk_tokens, std::min(T, (k + 1) * chunk_tokens));
  };
  if (threads <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
    for (std::thread& th : pool) th.join();
  }

  Acc tot;
  std::vector<Ranked> worst;
  for (const Acc& a : accs) {
    tot.identical += a.identical;
    tot.nan += a.nan;
    tot.inf += a.inf;
    tot.mismatches += a.mismatches;
    tot.finite += a.finite;
    tot.max_ulps = std::max(tot.max_ulps, a.max_ulps);
    tot.sum_ulps += a.sum_ulps;
    tot.max_abs = std::max(tot.max_abs, a.max_abs);
    tot.max_rel = std::max(tot.max_rel, a.max_rel);
    tot.sum_sq_err += a.sum_sq_err;
    tot.sum_sq_truth += a.sum_sq_truth;
    tot.max_pair = std::max(tot.max_pair, a.max_pair);
    tot.sum_pair += a.sum_pair;
    for (std::size_t k = 0; k < kClasses; ++k) {
      tot.cls[k].violations += a.cls[k].violations;
      if (a.cls[k].first) note_first(tot.cls[k].first, *a.cls[k].first);
      tot.cls[k].worst = std::max(tot.cls[k].worst, a.cls[k].worst);
    }
    tot.violations += a.violations;
    if (a.first) note_first(tot.first, *a.first);
    tot.saturated += a.saturated;
    if (a.first_saturated) note_first(tot.first_saturated, *a.first_saturated);
    tot.worst_score = std::max(tot.worst_score, a.worst_score);
    for (std::size_t b = 0; b < kBins; ++b) {
      tot.bins[b].elements += a.bins[b].elements;
      tot.bins[b].violations += a.bins[b].violations;
      tot.bins[b].saturated += a.bins[b].saturated;
      tot.bins[b].max_pair = std::max(tot.bins[b].max_pair, a.bins[b].max_pair);
      tot.bins[b].max_ulps = std::max(tot.bins[b].max_ulps, a.bins[b].max_ulps);
      tot.bins[b].err.merge(a.bins[b].err);
    }
    tot.err.merge(a.err);
    worst.insert(worst.end(), a.heap.begin(), a.heap.end());
  }

  rep.identical = tot.identical;
  rep.nan_count = tot.nan;
  rep.inf_count = tot.inf;
  rep.nonfinite_mismatches = tot.mismatches;
  rep.max_ulps = tot.max_ulps;
  rep.max_abs_error = tot.max_abs;
  rep.max_rel_error = tot.max_rel;
  rep.max_pair_relative = tot.max_pair;
  rep.error = tot.err.result();
  if (tot.finite > 0) {
    rep.mean_ulps = tot.sum_ulps / static_cast<double>(tot.finite);
    rep.mean_pair_relative = tot.sum_pair / static_cast<double>(tot.finite);
  }
  rep.nmse = tot.mismatches > 0 ? kInf
                                : (tot.sum_sq_truth > 0 ? tot.sum_sq_err / tot.sum_sq_truth : (tot.sum_sq_err == 0 ? 0 : kInf));
  for (std::size_t k = 0; k < kClasses; ++k)
    rep.classes.push_back({accuracy::kAccuracyClasses[k], tot.cls[k].violations == 0, tot.cls[k].violations,
                           tot.cls[k].first, tot.cls[k].worst});
  rep.saturated = tot.saturated;
  rep.first_saturated_position = tot.first_saturated;
  if (tot.violations > 0) {
    rep.verdict = ropecheck::Verdict::fail;
    rep.reason = strf("%lld element%s violate %s (first at position %lld)", static_cast<long long>(tot.violations),
                      tot.violations == 1 ? "" : "s", cr.to_string().c_str(), static_cast<long long>(tot.first.value_or(-1)));
  } else if (tot.saturated > 0) {
    rep.verdict = ropecheck::Verdict::not_tested;
    rep.reason = strf("%lld of %lld elements not discriminated by %s (saturated: bound >= the pair's magnitude, an all-zero output passes) from position %lld; %s",
                      static_cast<long long>(tot.saturated), static_cast<long long>(rep.elements), cr.to_string().c_str(),
                      static_cast<long long>(*tot.first_saturated), std::string(ropecheck::kSaturationAdvice).c_str());
  }
  rep.pass = rep.verdict == ropecheck::Verdict::pass;
  rep.violations = tot.violations;
  rep.first_violating_position = tot.first;
  rep.worst_score = tot.worst_score;
  for (std::size_t b = 0; b < kBins; ++b) {
    if (tot.bins[b].elements == 0) continue;
    PositionBin pb;
    pb.lo = b == 0 ? 0 : std::int64_t{1} << (b - 1);
    pb.hi = b == 0 ? 1 : (b < 63 ? std::int64_t{1} << b : std::numeric_limits<std::int64_t>::max());
    pb.elements = tot.bins[b].elements;
    pb.max_pair_relative = tot.bins[b].max_pair;
    pb.max_ulps = tot.bins[b].max_ulps;
    pb.violations = tot.bins[b].violations;
    pb.error = tot.bins[b].err.result();
    pb.saturated = tot.bins[b].saturated;
    rep.bins.push_back(pb);
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

// JSON numbers; non-finite values become null (CHECK_REPORT.md).
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
nlohmann::json opt_pos(const std::optional<std::int64_t>& p) { return p ? nlohmann::json(*p) : nlohmann::json(nullptr); }

std::string g4(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return strf("%.4g", v);
}

}  // namespace

std::string Criterion::to_string() const {
  switch (kind) {
    case Kind::accuracy_class: return "class " + std::string(accuracy::to_string(accuracy_class));
    case Kind::max_ulp: return "max-ulp " + g4(max_ulp);
    case Kind::tolerance: return "atol " + g4(atol) + " rtol " + g4(rtol);
  }
  return "?";
}

nlohmann::json Criterion::to_json() const {
  switch (kind) {
    case Kind::accuracy_class: return {{"kind", "class"}, {"class", std::string(accuracy::to_string(accuracy_class))}};
    case Kind::max_ulp: return {{"kind", "max-ulp"}, {"max_ulp", max_ulp}};
    case Kind::tolerance: return {{"kind", "tolerance"}, {"atol", atol}, {"rtol", rtol}};
  }
  return nullptr;
}

std::optional<AccuracyClass> TensorReport::best_class() const {
  for (const ClassResult& c : classes)
    if (c.satisfied) return c.accuracy_class;
  return std::nullopt;
}

std::vector<AccuracyClass> CheckReport::satisfied_classes() const {
  std::vector<AccuracyClass> out;
  for (AccuracyClass c : accuracy::kAccuracyClasses) {
    bool all = !tensors.empty();
    for (const TensorReport& t : tensors)
      for (const ClassResult& r : t.classes)
        if (r.accuracy_class == c && !r.satisfied) all = false;
    if (all) out.push_back(c);
  }
  return out;
}

CheckReport check_candidate(const GoldenSet& golden, const std::vector<Tensor>& candidate, const CheckOptions& options) {
  if (options.criterion.kind == Criterion::Kind::max_ulp && !(options.criterion.max_ulp >= 0))
    throw TensorError("--max-ulp must be a non-negative number");
  if (options.criterion.kind == Criterion::Kind::tolerance &&
      !(options.criterion.atol >= 0 && options.criterion.rtol >= 0 && std::isfinite(options.criterion.atol) &&
        std::isfinite(options.criterion.rtol)))
    throw TensorError("--atol and --rtol must be non-negative numbers");

  const std::vector<std::string> outputs = golden.output_names();
  const std::set<std::string> output_set(outputs.begin(), outputs.end());
  std::set<std::string> bases;
  for (const std::string& o : outputs) bases.insert(base_of(o));

  std::map<std::string, std::size_t> by_name;  // candidate name -> index
  std::vector<std::string> cand_names;
  for (std::size_t i = 0; i < candidate.size(); ++i) {
    if (!by_name.emplace(candidate[i].name, i).second)
      throw TensorError("the candidate has two tensors named " + detail::quote_name(candidate[i].name));
    cand_names.push_back(candidate[i].name);
  }

  std::map<std::string, std::size_t> match;  // golden output -> candidate index
  std::vector<bool> used(candidate.size(), false);
  auto assign = [&](const std::string& g, std::size_t ci, const std::string& how) {
    if (match.count(g))
      throw TensorError("two candidate tensors resolve to golden output " + detail::quote_name(g) + ": " +
                        detail::quote_name(candidate[match[g]].name) + " and " + detail::quote_name(candidate[ci].name) +
                        " (" + how + ")");
    match[g] = ci;
    used[ci] = true;
  };
  for (const auto& [g, c] : options.name_map) {
    if (!output_set.count(g))
      throw TensorError("--map " + detail::sanitize(g) + "=" + detail::sanitize(c) + ": the golden set has no output " +
                        detail::quote_name(g) + " (outputs: " + join(outputs) + ")");
    const auto it = by_name.find(c);
    if (it == by_name.end())
      throw TensorError("--map " + detail::sanitize(g) + "=" + detail::sanitize(c) + ": the candidate has no tensor " +
                        detail::quote_name(c) + " (it has: " + join(cand_names) + ")");
    if (used[it->second]) throw TensorError("--map: candidate tensor " + detail::quote_name(c) + " is mapped twice");
    assign(g, it->second, "--map");
  }
  std::vector<std::string> ignored;
  for (std::size_t i = 0; i < candidate.size(); ++i) {
    if (used[i]) continue;
    const Tensor& t = candidate[i];
    if (output_set.count(t.name)) {
      assign(t.name, i, "same name");
    } else if (bases.count(t.name)) {
      const std::optional<DType> d = float_dtype(t.dtype);
      const std::string target = t.name + "." + (d ? std::string(to_string(*d)) : std::string(to_string(t.dtype)));
      if (!output_set.count(target)) {
        std::vector<std::string> have;
        for (const std::string& o : outputs)
          if (base_of(o) == t.name) have.push_back(o);
        throw TensorError("candidate tensor " + detail::quote_name(t.name) + " (" + std::string(to_string(t.dtype)) +
                          ") resolves to " + detail::quote_name(target) + ", which the golden set does not have (it has " +
                          join(have) + ")");
      }
      assign(target, i, "base name with the candidate's dtype");
    } else {
      ignored.push_back(t.name);
    }
  }
  if (match.empty())
    throw TensorError("no candidate tensor matches a golden output: the candidate has " + join(cand_names) +
                      "; the golden outputs are " + join(outputs) +
                      " (name a tensor like a golden output, use a base name such as q_rot, or --map GOLDEN=CANDIDATE)");

  // Dtypes and shapes must match the manifest.
  for (const auto& [g, ci] : match) {
    const ManifestTensor& m = *golden.find(g);
    const Tensor& t = candidate[ci];
    if (t.dtype != m.dtype)
      throw TensorError(g + ": candidate tensor " + detail::quote_name(t.name) + " is " + std::string(to_string(t.dtype)) +
                        " but the golden tensor is " + std::string(to_string(m.dtype)));
    if (t.shape != m.shape)
      throw TensorError(g + ": candidate tensor " + detail::quote_name(t.name) + " has shape " +
                        detail::shape_for_message(t.shape) + " but the golden tensor has shape " +
                        detail::shape_for_message(m.shape));
    validate(t);
  }

  // What was asked for (CheckOptions::only). The f64 copy of each output is the truth every check
  // compares with, written whatever --dtypes said: asked for only when matched, named exactly, or
  // when f64 is the set's only dtype.
  const bool f64_only = golden.dtypes().size() == 1;
  auto truth_copy = [&](const std::string& o) { return !f64_only && o == base_of(o) + ".f64" && !match.count(o); };
  std::set<std::string> asked;
  if (options.only.empty()) {
    for (const std::string& o : outputs)
      if (!truth_copy(o)) asked.insert(o);
  } else {
    for (const std::string& item : options.only) {
      if (output_set.count(item)) {
        asked.insert(item);
      } else if (bases.count(item)) {
        for (const std::string& o : outputs)
          if (base_of(o) == item && !truth_copy(o)) asked.insert(o);
      } else {
        throw TensorError("--only " + detail::sanitize(item) + ": the golden set has no output or base " +
                          detail::quote_name(item) + " (outputs: " + join(outputs) + ")");
      }
    }
  }

  CheckReport rep;
  rep.golden_dir = golden.dir().string();
  rep.spec_name = golden.spec().name;
  rep.golden_fingerprint = golden_fingerprint(golden);
  rep.criterion = options.criterion;
  rep.ignored_candidate = ignored;
  rep.verdict = ropecheck::Verdict::pass;
  std::int64_t saturated_tensors = 0;
  for (const std::string& o : outputs) {
    const auto it = match.find(o);
    if (it == match.end() || !asked.count(o)) {
      rep.unchecked_golden.push_back(o);
      if (asked.count(o)) rep.not_tested.push_back(o);
      continue;
    }
    rep.tensors.push_back(check_tensor(golden, o, candidate[it->second], options));
    rep.verdict = ropecheck::combine(rep.verdict, rep.tensors.back().verdict);
    saturated_tensors += rep.tensors.back().verdict == ropecheck::Verdict::not_tested;
  }
  if (!rep.not_tested.empty()) rep.verdict = ropecheck::combine(rep.verdict, ropecheck::Verdict::not_tested);
  if (rep.verdict == ropecheck::Verdict::fail) {
    std::int64_t failing = 0;
    for (const TensorReport& t : rep.tensors) failing += t.verdict == ropecheck::Verdict::fail;
    rep.reason = strf("%lld of %zu tensors fail %s", static_cast<long long>(failing), rep.tensors.size(),
                      options.criterion.to_string().c_str());
  } else if (rep.verdict == ropecheck::Verdict::not_tested) {
    std::vector<std::string> why;
    if (!rep.not_tested.empty())
      why.push_back("no candidate tensor for " + std::to_string(rep.not_tested.size()) + " asked-for golden output" +
                    (rep.not_tested.size() == 1 ? "" : "s") + " (" + join(rep.not_tested, 8) +
                    "; name what the kernel produces with --only)");
    if (saturated_tensors > 0)
      why.push_back(std::to_string(saturated_tensors) + " tensor" + (saturated_tensors == 1 ? "" : "s") +
                    " with saturated bounds (" + std::string(ropecheck::kSaturationAdvice) + ")");
    for (const std::string& w : why) rep.reason += (rep.reason.empty() ? "" : "; ") + w;
  }
  rep.pass = rep.verdict == ropecheck::Verdict::pass;
  return rep;
}

nlohmann::json CheckReport::to_json() const {
  nlohmann::json ts = nlohmann::json::array();
  for (const TensorReport& t : tensors) {
    nlohmann::json classes = nlohmann::json::array();
    for (const ClassResult& c : t.classes)
      classes.push_back({{"class", std::string(accuracy::to_string(c.accuracy_class))},
                         {"satisfied", c.satisfied},
                         {"violations", c.violations},
                         {"first_violating_position", opt_pos(c.first_violating_position)},
                         {"worst_margin", num(c.worst_margin)}});
    nlohmann::json worst_j = nlohmann::json::array();
    for (const ElementReport& e : t.worst)
      worst_j.push_back({{"index", e.index},
                         {"token", e.token},
                         {"position", {e.position.t, e.position.h, e.position.w}},
                         {"stream", e.stream},
                         {"head", e.head < 0 ? nlohmann::json(nullptr) : nlohmann::json(e.head)},
                         {"channel", e.channel < 0 ? nlohmann::json(nullptr) : nlohmann::json(e.channel)},
                         {"pair", e.pair < 0 ? nlohmann::json(nullptr) : nlohmann::json(e.pair)},
                         {"theta", num(e.theta)},
                         {"candidate", num(e.candidate)},
                         {"truth", num(e.truth)},
                         {"golden", num(e.golden)},
                         {"abs_error", num(e.abs_error)},
                         {"ulps", num(e.ulps)},
                         {"magnitude", num(e.magnitude)},
                         {"pair_relative", num(e.pair_relative)},
                         {"score", num(e.score)}});
    nlohmann::json bins_j = nlohmann::json::array();
    for (const PositionBin& b : t.bins)
      bins_j.push_back({{"lo", b.lo},
                        {"hi", b.hi},
                        {"elements", b.elements},
                        {"max_pair_relative", num(b.max_pair_relative)},
                        {"max_ulps", num(b.max_ulps)},
                        {"violations", b.violations},
                        {"saturated", b.saturated},
                        {"error_stats", golden::to_json(b.error)}});
    const std::optional<AccuracyClass> best = t.best_class();
    ts.push_back({{"golden", t.golden_name},
                  {"candidate", t.candidate_name},
                  {"dtype", std::string(to_string(t.dtype))},
                  {"shape", t.shape},
                  {"elements", t.elements},
                  {"identical", t.identical},
                  {"metrics",
                   {{"max_ulps", num(t.max_ulps)},
                    {"mean_ulps", num(t.mean_ulps)},
                    {"max_abs_error", num(t.max_abs_error)},
                    {"max_rel_error", num(t.max_rel_error)},
                    {"nmse", num(t.nmse)},
                    {"nan", t.nan_count},
                    {"inf", t.inf_count},
                    {"nonfinite_mismatches", t.nonfinite_mismatches},
                    {"max_pair_relative", num(t.max_pair_relative)},
                    {"mean_pair_relative", num(t.mean_pair_relative)}}},
                  {"error_stats", golden::to_json(t.error)},
                  {"classes", classes},
                  {"best_class", best ? nlohmann::json(std::string(accuracy::to_string(*best))) : nlohmann::json(nullptr)},
                  {"verdict",
                   {{"pass", t.pass},
                    {"state", std::string(to_string(t.verdict))},
                    {"reason", t.reason},
                    {"violations", t.violations},
                    {"first_violating_position", opt_pos(t.first_violating_position)},
                    {"saturated", t.saturated},
                    {"first_saturated_position", opt_pos(t.first_saturated_position)},
                    {"worst_score", num(t.worst_score)}}},
                  {"worst", worst_j},
                  {"position_bins", bins_j}});
  }
  nlohmann::json sat = nlohmann::json::array();
  for (AccuracyClass c : satisfied_classes()) sat.push_back(std::string(accuracy::to_string(c)));
  return {{"format", "ropecheck-check-report"},
          {"format_version", 1},
          {"golden", golden_dir},
          {"spec", spec_name},
          {"golden_fingerprint", golden_fingerprint},
          {"criterion", criterion.to_json()},
          {"pass", pass},
          {"verdict", std::string(to_string(verdict))},
          {"reason", reason},
          {"satisfied_classes", sat},
          {"tensors", ts},
          {"ignored_candidate", ignored_candidate},
          {"unchecked_golden", unchecked_golden},
          {"not_tested", not_tested}};
}

std::string CheckReport::summary() const {
  std::string s;
  s += strf("ropecheck check: golden %s (spec %s), criterion %s\n", golden_dir.c_str(), spec_name.c_str(),
              criterion.to_string().c_str());
  const bool crit_exact =
      criterion.kind == Criterion::Kind::accuracy_class && criterion.accuracy_class == AccuracyClass::exact;
  for (const TensorReport& t : tensors) {
    s += strf("\n%s  <-  candidate '%s' (%s %s, %lld elements)  %s\n", t.golden_name.c_str(),
                detail::sanitize(t.candidate_name, 64).c_str(), std::string(to_string(t.dtype)).c_str(),
                shape_string(t.shape).c_str(), static_cast<long long>(t.elements),
                t.verdict == ropecheck::Verdict::pass ? "PASS" : (t.verdict == ropecheck::Verdict::fail ? "FAIL" : "NOT TESTED"));
    if (t.verdict == ropecheck::Verdict::not_tested) s += "  not tested: " + t.reason + "\n";
    s += strf("  error      max %s ulp (mean %s)   max abs %s   max rel %s   NMSE %s\n", g4(t.max_ulps).c_str(),
                g4(t.mean_ulps).c_str(), g4(t.max_abs_error).c_str(), g4(t.max_rel_error).c_str(), g4(t.nmse).c_str());
    s += strf("  pair-rel   max %s u (mean %s u), u = unit roundoff of %s   identical to golden: %.2f%%\n",
                g4(t.max_pair_relative).c_str(), g4(t.mean_pair_relative).c_str(), std::string(to_string(t.dtype)).c_str(),
                t.elements ? 100.0 * static_cast<double>(t.identical) / static_cast<double>(t.elements) : 100.0);
    s += "  vs bound   " + compact(t.error.bound) + "   in u: " + compact(t.error.u_dt) + "\n";
    if (t.nan_count || t.inf_count || t.nonfinite_mismatches)
      s += strf("  non-finite NaN %lld, Inf %lld, where the truth is finite (or the reverse): %lld\n",
                  static_cast<long long>(t.nan_count), static_cast<long long>(t.inf_count),
                  static_cast<long long>(t.nonfinite_mismatches));
    s += "  class        holds  violations  first position  worst margin\n";
    for (const ClassResult& c : t.classes) {
      const bool exact = c.accuracy_class == AccuracyClass::exact;
      s += strf("  %-11s  %-5s  %10lld  %14s  %s%s\n", std::string(accuracy::to_string(c.accuracy_class)).c_str(),
                  c.satisfied ? "yes" : "no", static_cast<long long>(c.violations),
                  c.first_violating_position ? std::to_string(*c.first_violating_position).c_str() : "-",
                  g4(c.worst_margin).c_str(), exact ? " ulp from golden" : "");
    }
    if (!t.worst.empty()) {
      s += strf("  worst elements (score: %s)\n",
                  criterion.kind == Criterion::Kind::accuracy_class
                      ? (crit_exact ? "ulps from the golden value" : "error / class bound")
                      : (criterion.kind == Criterion::Kind::max_ulp ? "ulps / max-ulp" : "error / (atol + rtol |truth|)"));
      s += "    score      token  position             head  chan  pair  theta       candidate      truth          ulps      pair-rel\n";
      for (const ElementReport& e : t.worst) {
        const std::string pos = e.position.t == e.position.h && e.position.h == e.position.w
                                    ? std::to_string(e.position.t)
                                    : strf("%lld/%lld/%lld", static_cast<long long>(e.position.t),
                                             static_cast<long long>(e.position.h), static_cast<long long>(e.position.w));
        s += strf("    %-9s  %5lld  %-19s  %4s  %4s  %4s  %-10s  %-13.6g  %-13.6g  %-8s  %s\n", g4(e.score).c_str(),
                    static_cast<long long>(e.token), pos.c_str(), e.head < 0 ? "-" : std::to_string(e.head).c_str(),
                    e.channel < 0 ? "-" : std::to_string(e.channel).c_str(),
                    e.pair < 0 ? "-" : std::to_string(e.pair).c_str(), g4(e.theta).c_str(), e.candidate, e.truth,
                    g4(e.ulps).c_str(), g4(e.pair_relative).c_str());
      }
    }
    s += "  by position  elements  max pair-rel (u)  max ulp  violations  saturated  rms pair-rel (u)  rms vs bound\n";
    for (const PositionBin& b : t.bins) {
      const std::string range = b.lo == 0 ? "[0, 1)" : strf("[%lld, %lld)", static_cast<long long>(b.lo), static_cast<long long>(b.hi));
      s += strf("  %-22s %9lld  %16s  %7s  %10lld  %9lld  %16s  %12s\n", range.c_str(), static_cast<long long>(b.elements),
                  g4(b.max_pair_relative).c_str(), g4(b.max_ulps).c_str(), static_cast<long long>(b.violations),
                  static_cast<long long>(b.saturated), g4(b.error.u_dt.rms).c_str(), g4(b.error.bound.rms).c_str());
    }
  }
  if (!ignored_candidate.empty()) s += "\nignored candidate tensors (no golden output): " + join(ignored_candidate) + "\n";
  if (!unchecked_golden.empty())
    s += strf("%s%zu golden outputs not checked (no candidate tensor, an f64 truth copy, or outside --only); "
              "asked for but not tested: %s\n",
              ignored_candidate.empty() ? "\n" : "", unchecked_golden.size(), join(not_tested).c_str());
  std::vector<std::string> sat;
  for (AccuracyClass c : satisfied_classes()) sat.emplace_back(accuracy::to_string(c));
  std::int64_t violations = 0, failing = 0;
  std::optional<std::int64_t> first;
  for (const TensorReport& t : tensors) {
    violations += t.violations;
    if (!t.pass) ++failing;
    if (t.first_violating_position) note_first(first, *t.first_violating_position);
  }
  if (pass)
    s += strf("\nPASS: %s holds on every element of %zu tensor%s; classes satisfied: %s\n", criterion.to_string().c_str(),
                tensors.size(), tensors.size() == 1 ? "" : "s", join(sat).c_str());
  else if (verdict == ropecheck::Verdict::not_tested)
    s += strf("\nNOT TESTED: nothing failed, but not everything asked for was tested: %s; classes satisfied: %s\n",
              reason.c_str(), join(sat).c_str());
  else
    s += strf("\nFAIL: %s violated by %lld element%s in %lld of %zu tensor%s (first at position %lld); classes satisfied: %s\n",
                criterion.to_string().c_str(), static_cast<long long>(violations), violations == 1 ? "" : "s",
                static_cast<long long>(failing), tensors.size(), tensors.size() == 1 ? "" : "s",
                static_cast<long long>(first.value_or(-1)), join(sat).c_str());
  return s;
}

}  // namespace ropecheck::golden
