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
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "check_pass.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/formulas/qk_norm.hpp"
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
      K_(static_cast<std::size_t>(std::max(0, opt.worst_count))),
      by_element_(std::getenv("ROPECHECK_CHECK_BY_ELEMENT") != nullptr) {
  for (std::size_t c = 0; c < kClasses; ++c)
    for (Quantity q : {Quantity::table, Quantity::rotated, Quantity::passthrough})
      bounds_[c][static_cast<std::size_t>(q)] = accuracy::class_bound(accuracy::kAccuracyClasses[c], dt_, q);
  const std::string base = base_of(golden_name);
  if (g.is_rope() && (base == "q_rot" || base == "k_rot")) norm_ = norm_stage(g.spec().rope, base.substr(0, 1));
  if (norm_ != nullptr)
    for (std::size_t c = 1; c < kClasses; ++c)
      for (Quantity q : {Quantity::rotated, Quantity::passthrough})
        bounds_[c][static_cast<std::size_t>(q)].k_const += accuracy::qk_norm_relative_term(g.spec().rope.head_dim);
}

// The worker's worst list: a bounded heap under a total order (the result does not depend on threads).
void TensorPass::rank(Acc& acc, const Block& b, double score, std::int64_t i, double c, double y, double gv, double M) const {
  if (K_ == 0 || score <= 0) return;
  auto& heap = acc.heap;
  if (heap.size() >= K_ && !ranks_before(Ranked{score, i, 0, 0, 0, 0, {}}, heap.front())) return;
  const Ranked r{score, i, c, y, gv, M, b.positions[i / geo_.per_token() - b.t0]};
  if (heap.size() < K_) {
    heap.push_back(r);
    std::push_heap(heap.begin(), heap.end(), ranks_before);
  } else if (ranks_before(r, heap.front())) {
    std::pop_heap(heap.begin(), heap.end(), ranks_before);
    heap.back() = r;
    std::push_heap(heap.begin(), heap.end(), ranks_before);
  }
}

// The error model's arithmetic on one element whose c, y, gv and M are set: its error in every unit,
// every class's margin (exact: distance to the golden value of its dtype in ulps; the others: error /
// allowed) and the criterion's score. check_rows.cpp computes the same a row at a time: a change here
// goes there too (the pinned reports and CheckStream's tests compare the two paths).
void TensorPass::derive(Derived& d, Quantity q, const PairAngle& angle) const {
  const double c = d.c, y = d.y, gv = d.gv, M = d.M;
  d.identical = c == gv || (std::isnan(c) && std::isnan(gv));
  d.finite = std::isfinite(c) && std::isfinite(y);
  d.e = d.ulps = d.pair_rel = d.rel = 0;
  d.mismatch = false;
  if (d.finite) {
    d.e = std::fabs(c - y);
    d.ulps = d.e / fast_ulp(y, fi_.precision, fi_.min_normal_exp);
    d.pair_rel = M > 0 ? d.e / (M * u_dt_) : (d.e == 0 ? 0 : kInf);
    if (y != 0) d.rel = d.e / std::fabs(y);
  } else {
    d.mismatch = !((std::isnan(c) && std::isnan(y)) || (std::isinf(c) && c == y));
    if (d.mismatch) d.e = d.ulps = d.pair_rel = kInf;
  }
  d.margin[0] = d.identical ? 0.0
                            : (std::isfinite(c) && std::isfinite(gv) ? std::fabs(c - gv) / fast_ulp(gv, fi_.precision, fi_.min_normal_exp)
                                                                     : kInf);
  for (std::size_t k = 1; k < kClasses; ++k) {
    const ClassBound& b = bounds_[k][static_cast<std::size_t>(q)];
    const double rel = b.relative(angle);  // b.allowed(angle, M) = rel M + floor; saturated: rel >= 1
    d.margin[k] = d.mismatch ? kInf : d.e / (rel * M + b.floor);
    d.saturated[k] = rel >= 1;
  }
  score(d);
}

// The criterion's score of a derived element, and whether it fails.
void TensorPass::score_of(Derived& d) const {
  switch (cr_.kind) {
    case Criterion::Kind::accuracy_class:
      d.score = d.margin[crit_class_];
      d.fails = crit_exact_ ? !d.identical : d.score > 1;
      break;
    case Criterion::Kind::max_ulp:
      d.score = cr_.max_ulp > 0 ? d.ulps / cr_.max_ulp : (d.ulps == 0 ? 0 : kInf);
      d.fails = d.mismatch || d.score > 1;
      break;
    case Criterion::Kind::tolerance:
    default: {
      const double allowed = cr_.atol + cr_.rtol * std::fabs(d.y);
      d.score = d.mismatch ? kInf : (allowed > 0 ? d.e / allowed : (d.e == 0 ? 0 : kInf));
      d.fails = d.mismatch || d.score > 1;
    }
  }
}

// One element's derived values counted into the worker's statistics, in element order (the sums per
// token are taken in double in that order). `saturated`: the criterion's bound is saturated here.
void TensorPass::account(Acc& acc, const Block& blk, std::int64_t i, std::int64_t pos, const Derived& d, bool saturated) const {
  TokenSums& tk = acc.tok;
  ++acc.s.elements;
  const int bin = bin_of(pos);
  count_element(acc.s, d, pos, bin, saturated);
  if (d.finite) {  // error statistics: finite elements only (error_stats.hpp)
    tk.sum_ulps += d.ulps;
    tk.sum_pair += d.pair_rel;
    tk.sum_sq_err += d.e * d.e;
    tk.sum_sq_truth += d.y * d.y;
    tk.err.add(d.score, d.pair_rel);
    acc.token_bin(bin).add(d.score, d.pair_rel);
  }
  rank(acc, blk, d.score, i, d.c, d.y, d.gv, d.M);
}

void TensorPass::count_element(TensorStats& a, const Derived& d, std::int64_t pos, int bin, bool saturated) const {
  a.identical += d.identical;
  a.nan += std::isnan(d.c);
  a.inf += std::isinf(d.c);
  if (d.finite) {
    ++a.finite;
    a.max_abs = std::max(a.max_abs, d.e);
    if (d.y != 0) a.max_rel = std::max(a.max_rel, d.rel);
  } else if (d.mismatch) {
    ++a.mismatches;
    a.max_abs = kInf;
  }
  a.max_ulps = std::max(a.max_ulps, d.ulps);
  a.max_pair = std::max(a.max_pair, d.pair_rel);
  for (std::size_t k = 0; k < kClasses; ++k) {  // every class's margin
    ClassStats& ca = a.classes[k];
    if (d.margin[k] > ca.worst) ca.worst = d.margin[k];
    if (k == 0 ? !d.identical : d.margin[k] > 1) {
      ++ca.violations;
      note_first(ca.first, pos);
    } else if (d.saturated[k]) {  // holds, but so would any output of this magnitude: not tested
      ++ca.saturated;
      note_first(ca.first_saturated, pos);
    }
  }
  if (d.score > a.worst_score) a.worst_score = d.score;
  BinStats& b = a.bins[static_cast<std::size_t>(bin)];
  ++b.elements;
  if (d.pair_rel > b.max_pair) b.max_pair = d.pair_rel;
  if (d.ulps > b.max_ulps) b.max_ulps = d.ulps;
  if (d.fails) {
    ++a.violations;
    ++b.violations;
    note_first(a.first, pos);
  } else if (saturated) {
    ++a.saturated;  // the bound accepts any output of this magnitude: not tested
    ++b.saturated;
    note_first(a.first_saturated, pos);
  }
}

// One element: index, position of its driving stream, quantity, angle, magnitude M.
void TensorPass::eval(Acc& acc, const Block& blk, std::int64_t i, std::int64_t pos, Quantity q, const PairAngle& angle,
                      double M) const {
  Derived d;
  d.c = blk.cand[i - blk.first];
  d.y = blk.truth[i - blk.first];
  d.gv = blk.same[i - blk.first];
  d.M = M;
  derive(d, q, angle);
  account(acc, blk, i, pos, d, !d.fails && saturated(q, angle));
}

// Tokens [t0, t1) into one accumulator, walked by output kind so that the inner loops stay plain.
void TensorPass::run_chunk(Acc& a, const Block& b, std::int64_t t0, std::int64_t t1) const {
  const Position* pos = b.positions - b.t0;  // indexed by token
  const auto D = static_cast<int>(geo_.D);
  switch (geo_.kind) {
    case OutputGeometry::Kind::pair_table:
      if (!by_element_) {
        run_rows(a, b, t0, t1);
        break;
      }
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
      if (!by_element_) {
        run_rows(a, b, t0, t1);
        break;
      }
      for (std::int64_t t = t0; t < t1; ++t) {
        for (std::int64_t h = 0; h < geo_.H; ++h) {
          const std::int64_t base = (t * geo_.H + h) * D;
          std::vector<double> x(static_cast<std::size_t>(D));  // the head the rotation takes: normalized under a norm stage
          for (int ch = 0; ch < D; ++ch) x[static_cast<std::size_t>(ch)] = (*b.in)[base - b.first + ch];
          if (norm_ != nullptr) {
            const std::vector<double> raw = x;
            rms_norm_head<double>(raw, *norm_, std::span(x));
          }
          for (int ch = 0; ch < D; ++ch) {
            const int j = geo_.rope->pair_of(ch);
            const std::int64_t p = j < 0 ? pos[t].t : geo_.rope->position(pos[t], j);
            eval(a, b, base + ch, p, geo_.rope->quantity(ch), j < 0 ? PairAngle{0, 0} : geo_.rope->angle(p, j),
                 geo_.rope->magnitude(x, ch));
            if (j < 0 && geo_.exact_passthrough) note_passthrough(a.s, b.cand[base + ch - b.first], b.same[base + ch - b.first], p);
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
  r.saturated = saturated(e.quantity, e.angle);
  return r;
}

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
          StoredValues(v.same, dt), std::nullopt, v.positions, v.cand, v.truth, v.same, v.in};
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
