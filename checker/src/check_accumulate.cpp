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

#include "check_internal.hpp"
#include "output_geometry.hpp"
#include "ropecheck/core/dtype.hpp"
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

struct Ranked {  // an element in the worst list, with what describe() needs after its block is gone
  double score;
  std::int64_t index;
  double candidate, truth, golden, magnitude;
  Position position;  // its token's
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

// A block's data as the pass reads it: element 0 of each view is the block's first element.
struct Block {
  std::int64_t t0 = 0, first = 0;  // the block's first token, and its first element's flat index
  StoredValues cand, truth, same;
  std::optional<StoredValues> in;  // rotated outputs: q or k
  const Position* positions = nullptr;  // positions[t - t0]
};

// One tensor's pass: geometry, bounds and criterion fixed once, then elements of a block evaluated into
// a worker's accumulator (eval), tokens walked by output kind (run_chunk), and the worst elements
// described at the end (describe).
class TensorPass {
 public:
  TensorPass(const GoldenSet& g, const std::string& golden_name, TensorDType cand_dtype, const CheckOptions& opt);
  void run_chunk(Acc& a, const Block& b, std::int64_t t0, std::int64_t t1) const;
  std::int64_t per_token() const { return geo_.per_token(); }
  std::size_t worst_count() const { return K_; }
  DType dtype() const { return dt_; }
  bool rotated() const { return geo_.kind == OutputGeometry::Kind::rotated; }
  ElementReport describe(const Ranked& w) const;

 private:
  void eval(Acc& acc, const Block& b, std::int64_t i, std::int64_t pos, Quantity q, const PairAngle& angle, double M) const;
  double class_margins(TensorStats& a, std::int64_t pos, Quantity q, const PairAngle& angle, double M, double c, double gv,
                       double e, bool identical, bool mismatch) const;
  void rank(Acc& acc, const Block& b, double score, std::int64_t i, double c, double y, double gv, double M) const;

  DType dt_;
  const FormatInfo& fi_;
  double u_dt_;
  OutputGeometry geo_;
  std::array<std::array<ClassBound, 3>, kClasses> bounds_{};
  const Criterion& cr_;
  std::size_t crit_class_;
  bool crit_exact_, crit_class_bound_;
  std::size_t K_;
};

TensorPass::TensorPass(const GoldenSet& g, const std::string& golden_name, TensorDType cand_dtype, const CheckOptions& opt)
    : dt_(*float_dtype(cand_dtype)),
      fi_(format_info(dt_)),
      u_dt_(unit_roundoff(dt_)),
      geo_(g, base_of(golden_name), /*load_data=*/false),
      cr_(opt.criterion),
      crit_class_(static_cast<std::size_t>(
          std::find(accuracy::kAccuracyClasses.begin(), accuracy::kAccuracyClasses.end(), opt.criterion.accuracy_class) -
          accuracy::kAccuracyClasses.begin())),
      crit_exact_(cr_.kind == Criterion::Kind::accuracy_class && cr_.accuracy_class == AccuracyClass::exact),
      crit_class_bound_(cr_.kind == Criterion::Kind::accuracy_class && !crit_exact_),  // can saturate
      K_(static_cast<std::size_t>(std::max(0, opt.worst_count))) {
  for (std::size_t c = 0; c < kClasses; ++c)
    for (Quantity q : {Quantity::table, Quantity::rotated, Quantity::passthrough})
      bounds_[c][static_cast<std::size_t>(q)] = accuracy::class_bound(accuracy::kAccuracyClasses[c], dt_, q);
}

// Every class's margin on one element (counted into a.classes); returns the criterion class's.
double TensorPass::class_margins(TensorStats& a, std::int64_t pos, Quantity q, const PairAngle& angle, double M, double c,
                                 double gv, double e, bool identical, bool mismatch) const {
  double crit_margin = 0;
  for (std::size_t k = 0; k < kClasses; ++k) {
    double margin;
    bool violated;
    if (k == 0) {  // exact
      violated = !identical;
      margin = identical ? 0.0
                         : (std::isfinite(c) && std::isfinite(gv) ? std::fabs(c - gv) / fast_ulp(gv, fi_.precision, fi_.min_normal_exp)
                                                                  : kInf);
    } else {
      margin = mismatch ? kInf : e / bounds_[k][static_cast<std::size_t>(q)].allowed(angle, M);
      violated = margin > 1;
    }
    ClassStats& ca = a.classes[k];
    if (margin > ca.worst) ca.worst = margin;
    if (violated) {
      ++ca.violations;
      note_first(ca.first, pos);
    }
    if (k == crit_class_) crit_margin = margin;
  }
  return crit_margin;
}

// The worker's worst list: a bounded heap under a total order (the result does not depend on threads).
void TensorPass::rank(Acc& acc, const Block& b, double score, std::int64_t i, double c, double y, double gv, double M) const {
  if (K_ == 0 || score <= 0) return;
  const Ranked r{score, i, c, y, gv, M, b.positions[i / geo_.per_token() - b.t0]};
  auto& heap = acc.heap;
  if (heap.size() < K_) {
    heap.push_back(r);
    std::push_heap(heap.begin(), heap.end(), ranks_before);
  } else if (ranks_before(r, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), ranks_before);
    heap.back() = r;
    std::push_heap(heap.begin(), heap.end(), ranks_before);
  }
}

// One element: index, position of its driving stream, quantity, angle, magnitude M.
void TensorPass::eval(Acc& acc, const Block& blk, std::int64_t i, std::int64_t pos, Quantity q, const PairAngle& angle,
                      double M) const {
  TensorStats& a = acc.s;
  TokenSums& tk = acc.tok;
  ++a.elements;
  const double c = blk.cand[i - blk.first], y = blk.truth[i - blk.first], gv = blk.same[i - blk.first];
  const bool identical = c == gv || (std::isnan(c) && std::isnan(gv));
  a.identical += identical;
  a.nan += std::isnan(c);
  a.inf += std::isinf(c);
  double e = 0, ulps = 0, pair_rel = 0;
  bool mismatch = false;
  if (std::isfinite(c) && std::isfinite(y)) {
    e = std::fabs(c - y);
    ulps = e / fast_ulp(y, fi_.precision, fi_.min_normal_exp);
    pair_rel = M > 0 ? e / (M * u_dt_) : (e == 0 ? 0 : kInf);
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
  const double crit_margin = class_margins(a, pos, q, angle, M, c, gv, e, identical, mismatch);

  double score;
  bool fails;
  switch (cr_.kind) {
    case Criterion::Kind::accuracy_class:
      score = crit_margin;
      fails = crit_exact_ ? !identical : score > 1;
      break;
    case Criterion::Kind::max_ulp:
      score = cr_.max_ulp > 0 ? ulps / cr_.max_ulp : (ulps == 0 ? 0 : kInf);
      fails = mismatch || score > 1;
      break;
    case Criterion::Kind::tolerance:
    default: {
      const double allowed = cr_.atol + cr_.rtol * std::fabs(y);
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
  } else if (crit_class_bound_ && bounds_[crit_class_][static_cast<std::size_t>(q)].saturated(angle)) {
    ++a.saturated;  // the bound accepts any output of this magnitude: not tested
    ++b.saturated;
    note_first(a.first_saturated, pos);
  }
  rank(acc, blk, score, i, c, y, gv, M);
}

// Tokens [t0, t1) into one accumulator, walked by output kind so that the inner loops stay plain.
void TensorPass::run_chunk(Acc& a, const Block& b, std::int64_t t0, std::int64_t t1) const {
  const Position* pos = b.positions - b.t0;  // indexed by token
  const auto D = static_cast<int>(geo_.D);
  switch (geo_.kind) {
    case OutputGeometry::Kind::pair_table:
      for (std::int64_t t = t0; t < t1; ++t) {
        for (int j = 0; j < geo_.P; ++j) {
          const std::int64_t p = geo_.rope->position(pos[t], j);
          eval(a, b, t * geo_.P + j, p, Quantity::table, geo_.rope->angle(p, j), 1.0);
        }
        a.end_token();
      }
      break;
    case OutputGeometry::Kind::pe:
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t p = pos[t].t;
        const double pa = static_cast<double>(p + geo_.offset);
        for (int c = 0; c < D; ++c) {
          const PairAngle angle = geo_.pe_index[static_cast<std::size_t>(c)] < 0
                                      ? PairAngle{0, 0}
                                      : accuracy::pair_angle(pa, geo_.pe_freq[static_cast<std::size_t>(c)]);
          eval(a, b, t * D + c, p, Quantity::table, angle, 1.0);
        }
        a.end_token();
      }
      break;
    case OutputGeometry::Kind::rotated:
      for (std::int64_t t = t0; t < t1; ++t) {
        for (std::int64_t h = 0; h < geo_.H; ++h) {
          const std::int64_t base = (t * geo_.H + h) * D;
          const OutputGeometry::Head x{&*b.in, base - b.first};
          for (int ch = 0; ch < D; ++ch) {
            const int j = geo_.rope->pair_of(ch);
            const std::int64_t p = j < 0 ? pos[t].t : geo_.rope->position(pos[t], j);
            eval(a, b, base + ch, p, geo_.rope->quantity(ch), j < 0 ? PairAngle{0, 0} : geo_.rope->angle(p, j),
                 geo_.rope->magnitude(x, ch));
          }
        }
        a.end_token();
      }
      break;
  }
}

ElementReport TensorPass::describe(const Ranked& w) const {
  const OutputGeometry::Element e = geo_.locate(w.index, w.position);
  ElementReport r;
  r.index = w.index;
  r.token = e.token;
  r.position = w.position;
  r.stream = e.stream;
  r.head = e.head;
  r.channel = e.channel;
  r.pair = e.pair;
  r.theta = e.angle.abs_theta;
  r.magnitude = geo_.kind == OutputGeometry::Kind::rotated ? w.magnitude : e.magnitude;
  r.candidate = w.candidate;
  r.truth = w.truth;
  r.golden = w.golden;
  const bool finite = std::isfinite(r.candidate) && std::isfinite(r.truth);
  r.abs_error = finite ? std::fabs(r.candidate - r.truth) : kInf;
  r.ulps = finite ? r.abs_error / ulp(r.truth, dt_) : kInf;
  r.pair_relative = !finite ? kInf : (r.magnitude > 0 ? r.abs_error / (r.magnitude * u_dt_) : (r.abs_error == 0 ? 0 : kInf));
  r.score = w.score;
  return r;
}

}  // namespace

struct TensorCheck::State {
  TensorStats header;
  TensorPass pass;
  std::vector<Acc> accs;
};

TensorCheck::TensorCheck(const GoldenSet& g, const std::string& golden_name, const CandidateTensor& cand,
                         const CheckOptions& opt, int workers)
    : s_(new State{{}, TensorPass(g, golden_name, cand.dtype, opt), std::vector<Acc>(static_cast<std::size_t>(std::max(1, workers)))}) {
  TensorStats& h = s_->header;
  h.golden_name = golden_name;
  h.candidate_name = cand.name;
  h.base = base_of(golden_name);
  h.dtype = cand.dtype;
  h.shape = cand.shape;
}
TensorCheck::~TensorCheck() = default;
TensorCheck::TensorCheck(TensorCheck&&) noexcept = default;

std::int64_t TensorCheck::per_token() const { return s_->pass.per_token(); }
bool TensorCheck::rotated() const { return s_->pass.rotated(); }

void TensorCheck::run(const BlockViews& v, std::int64_t ta, std::int64_t tb, int worker) {
  const DType dt = s_->pass.dtype();
  Block b{v.t0, v.t0 * s_->pass.per_token(), StoredValues(v.cand, dt), StoredValues(v.truth, DType::f64),
          StoredValues(v.same, dt), std::nullopt, v.positions};
  if (v.in != nullptr) b.in.emplace(v.in, DType::f32);
  s_->pass.run_chunk(s_->accs[static_cast<std::size_t>(worker)], b, ta, tb);
}

TensorStats TensorCheck::finish() {
  TensorStats rep = std::move(s_->header);
  std::vector<Ranked> worst;
  for (const Acc& a : s_->accs) {
    rep.merge_counts(a.s);
    worst.insert(worst.end(), a.heap.begin(), a.heap.end());
  }
  std::sort(worst.begin(), worst.end(), ranks_before);
  if (worst.size() > s_->pass.worst_count()) worst.resize(s_->pass.worst_count());
  for (const Ranked& w : worst) rep.worst.push_back(s_->pass.describe(w));
  return rep;
}

}  // namespace ropecheck::checker::check_detail
