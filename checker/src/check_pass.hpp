// The per-tensor pass's parts (check_accumulate.cpp: the pass over any output, element by element;
// check_rows.cpp: rotated outputs a head row at a time, the row's arithmetic in vectorisable loops and
// its counting in element order). Private to checker/.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "check_internal.hpp"
#include "output_geometry.hpp"
#include "ropecheck/core/dtype.hpp"

namespace ropecheck::checker::check_detail {

using accuracy::AccuracyClass;
using accuracy::ClassBound;
using accuracy::PairAngle;
using accuracy::Quantity;

inline int bin_of(std::int64_t position) {
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

inline constexpr std::size_t kClasses = accuracy::kAccuracyClasses.size();
inline constexpr std::size_t kBins = kPositionBins;

// One token's sums, in double in element order, added exactly to the statistics when the token ends.
struct TokenSums {
  double sum_ulps = 0, sum_pair = 0, sum_sq_err = 0, sum_sq_truth = 0;
  ErrorStatsAcc err;
  int bins = 0;  // the bins the token's elements fall in (one per stream position; the rare fifth flushes)
  std::array<int, 4> bin{};
  std::array<ErrorStatsAcc, 4> bin_err{};
};

inline void add_exact(ErrorSums& into, const ErrorStatsAcc& a) {
  into.n += a.n;
  into.max_b = std::max(into.max_b, a.max_b);
  into.max_u = std::max(into.max_u, a.max_u);
  into.sum_b.add(a.sum_b);
  into.sq_b.add(a.sq_b);
  into.sum_u.add(a.sum_u);
  into.sq_u.add(a.sq_u);
}

// A head row's values and what derive() gives for them, one array per quantity (check_rows.cpp).
struct RowScratch {
  std::vector<double> c, y, gv, x, M, e, ulps, pair_rel, rel, score;  // x: the head's input
  std::vector<double> flags;      // 1 identical, 2 finite, 4 mismatch, 8 fails
  std::vector<double> position;   // per channel: its stream's position (exact in double)
  std::vector<double> saturable;  // per channel: 1 when the criterion's bound is saturated there
  std::vector<double> margin, rel_bound, floor;  // [class][channel]
  std::vector<int> bin;           // per channel: its position bin
  std::vector<double> norm_in;    // the head's raw input when the norm stage normalizes it
};

// The statistics of a row that do not depend on the order of its elements (check_rows.cpp).
struct RowStats {
  std::int64_t identical = 0, nan = 0, inf = 0, finite = 0, mismatches = 0, fails = 0, saturated = 0;
  double max_abs = 0, max_rel = 0, max_ulps = 0, max_pair = 0, max_score = 0;
  double first = 0, first_saturated = 0;  // the smallest position, +inf when none
  std::array<std::int64_t, kClasses> class_violations{}, class_saturated{};  // saturated: where not violated
  std::array<double, kClasses> worst{}, first_class{}, first_class_saturated{};
};

// What one worker accumulates.
struct Acc {
  TensorStats s;
  std::vector<Ranked> heap;  // the worker's worst, a heap whose front ranks last
  TokenSums tok;
  RowScratch row;

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
  const void *cand_bytes = nullptr, *truth_bytes = nullptr, *same_bytes = nullptr, *in_bytes = nullptr;  // the same, raw
};

// What the error model's arithmetic gives for one element (TensorPass::derive), before it is counted.
struct Derived {
  double c = 0, y = 0, gv = 0, M = 0;  // candidate, truth, golden of its dtype; magnitude
  double e = 0, ulps = 0, pair_rel = 0;
  double rel = 0;  // e / |y|, counted when finite and y != 0
  std::array<double, kClasses> margin{};
  std::array<bool, kClasses> saturated{};  // the class's bound is saturated here (relative >= 1; exact never)
  double score = 0;
  bool identical = false, finite = false, mismatch = false, fails = false;
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
  // One element: its values derived (derive: the error model's arithmetic), then counted (account).
  void eval(Acc& acc, const Block& b, std::int64_t i, std::int64_t pos, Quantity q, const PairAngle& angle, double M) const;
  void derive(Derived& d, Quantity q, const PairAngle& angle) const;
  void score(Derived& d) const { score_of(d); }
  void score_of(Derived& d) const;  // from y, e, ulps, mismatch and (a class criterion) margin
  void account(Acc& acc, const Block& b, std::int64_t i, std::int64_t pos, const Derived& d, bool saturated) const;
  // account()'s counting that does not depend on the order of the elements (all but the sums per token,
  // the elements count and the ranking).
  void count_element(TensorStats& a, const Derived& d, std::int64_t pos, int bin, bool saturated) const;
  void rank(Acc& acc, const Block& b, double score, std::int64_t i, double c, double y, double gv, double M) const;
  // Tokens [t0, t1) of a rotated output a head row at a time, or of a cos / sin table a token row at a
  // time (check_rows.cpp): the same derived values and the same counting, in the same order.
  void run_rows(Acc& a, const Block& b, std::int64_t t0, std::int64_t t1) const;
  struct RowValues {  // a row's candidate, truth and golden values (in the block or the row scratch)
    const double *c, *y, *gv;
    std::size_t n;
  };
  void account_row(Acc& acc, const Block& blk, std::int64_t base, const RowValues& v, bool one_bin) const;
  void count_row(Acc& acc, const RowStats& st, int bin) const;
  // MLA sets: a pass-through element counted, and whether the candidate's bits differ from the golden value
  // of its dtype (the input itself: exact in every dtype).
  void note_passthrough(TensorStats& s, double c, double gv, std::int64_t pos) const {
    ++s.passthrough;
    if (std::bit_cast<std::uint64_t>(c) == std::bit_cast<std::uint64_t>(gv)) return;
    ++s.passthrough_differing;
    note_first(s.first_passthrough_differing, pos);
  }
  bool saturated(Quantity q, const PairAngle& angle) const {
    return crit_class_bound_ && bounds_[crit_class_][static_cast<std::size_t>(q)].saturated(angle);
  }

  DType dt_;
  const FormatInfo& fi_;
  double u_dt_;
  OutputGeometry geo_;
  std::array<std::array<ClassBound, 3>, kClasses> bounds_{};
  // q_rot / k_rot of a spec that normalizes that input first: M is taken of the normalized input and the
  // norm's term is in bounds_ (ERROR_MODEL.md section 17); nullptr otherwise.
  const RmsNormStage* norm_ = nullptr;
  const Criterion& cr_;
  std::size_t crit_class_;
  bool crit_exact_, crit_class_bound_;
  std::size_t K_;
  // ROPECHECK_CHECK_BY_ELEMENT set: rotated outputs and tables element by element too (eval), as the
  // tests that compare the two paths run them.
  bool by_element_;
};


}  // namespace ropecheck::checker::check_detail
