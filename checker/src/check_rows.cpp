// Rotated outputs (q_rot, k_rot: heads x head_dim values a token, nearly every element of a set) a head
// row at a time, with the statistics of the element-by-element pass (TensorPass::derive, then account),
// bit for bit: derive()'s arithmetic for the whole row in vector code, with the statistics that do not
// depend on the order of the elements (counts, maxima, first positions) reduced there too; then the sums
// per token, which are taken in double in element order, in a plain loop; then the ranking. The class
// bounds depend on the position and the pair, not on the head: computed once a token and pair.
#include <bit>
#include <cstring>
#include <limits>

#include "check_pass.hpp"
#include "ropecheck/formulas/qk_norm.hpp"

namespace ropecheck::checker::check_detail {

namespace {

// The helpers below take and return 32-byte vectors; GCC notes that their ABI differs with and without
// AVX. They are inlined into derive_row and never called across that boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

using v4d = double __attribute__((vector_size(32)));
using v4i = std::int64_t __attribute__((vector_size(32)));

struct RowIn {
  std::size_t n = 0, n_real = 0;  // n: a multiple of 4 (padded); n_real: the row's elements
  const double *c, *y, *gv, *M, *rel_bound, *floor;  // rel_bound, floor: [class][channel]
  const double *position, *saturable;                // per channel: its stream's position; 1 when the bound saturates
  double u_dt, ulp_min, ulp_scale;                   // ulp_min = 2^min_normal_exp, ulp_scale = 2^(1 - precision)
  bool exact_reciprocal = false;                     // 1 / ulp is a double for every ulp of the dtype (not f64)
  int criterion = 0;                                 // 0 a class (crit), 1 max-ulp, 2 tolerance
  std::size_t crit = 0;
  bool crit_exact = false;
  double max_ulp = 0, atol = 0, rtol = 0;
};
// Per element; flags: 1 identical, 2 finite, 4 mismatch, 8 fails.
struct RowOut {
  double *e, *ulps, *pair_rel, *rel, *margin, *score, *flags;  // margin: [class][channel]
};

// 2^floor(log2 |x|) for normal x, 0 for zero and subnormals: with the dtype's smallest normal exponent as
// a floor and times 2^(1 - precision), fast_ulp(x) exactly (products of powers of two).
inline v4d exponent_of(v4d x) { return reinterpret_cast<v4d>(reinterpret_cast<v4i>(x) & 0x7FF0000000000000LL); }
inline v4d abs_of(v4d x) { return reinterpret_cast<v4d>(reinterpret_cast<v4i>(x) & 0x7FFFFFFFFFFFFFFFLL); }
// 1 / p for a normal power of two p, from its exponent bits (garbage for anything else).
inline v4d reciprocal_of_power(v4d p) { return reinterpret_cast<v4d>(0x7FE0000000000000LL - reinterpret_cast<v4i>(p)); }

// derive() and the order-free part of account() for a row, 4 elements at a time (AVX2 where the CPU has
// it, two SSE2 halves otherwise): the same expressions, each division taken for every element and
// selected after, comparisons as masks (NaN compares as in scalar code), maxima as `x > m ? x : m`
// (a NaN never wins, as in account()). No FMA: products and sums round as derive()'s do.
__attribute__((target_clones("avx2", "default"))) void derive_row(const RowIn& in, const RowOut& out, RowStats& st) {
  const double inf = std::numeric_limits<double>::infinity(), big = std::numeric_limits<double>::max();
  auto splat = [](double x) { return v4d{x, x, x, x}; };
  auto ld = [](const double* p) {
    v4d v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  auto put = [](double* p, v4d v) { std::memcpy(p, &v, sizeof v); };
  auto vmax = [](v4d m, v4d x) { return x > m ? x : m; };
  auto vmin = [](v4d m, v4d x) { return x < m ? x : m; };
  const v4d vinf = splat(inf), vbig = splat(big), zero = splat(0), one = splat(1);
  const v4d ulp_min = splat(in.ulp_min), ulp_scale = splat(in.ulp_scale), u_dt = splat(in.u_dt);
  const v4d inv_ulp_min = splat(1 / in.ulp_min), inv_ulp_scale = splat(1 / in.ulp_scale);
  const std::size_t n = in.n;
  v4i count_identical{}, count_nan{}, count_inf{}, count_finite{}, count_mismatch{}, count_fails{}, count_saturated{};
  std::array<v4i, kClasses> count_class{}, count_class_saturated{};
  v4d max_abs = zero, max_rel = zero, max_ulps = zero, max_pair = zero, max_score = zero;
  v4d first = vinf, first_saturated = vinf;
  std::array<v4d, kClasses> worst{}, first_class{}, first_class_saturated{};
  for (std::size_t k = 0; k < kClasses; ++k) first_class[k] = first_class_saturated[k] = vinf;
  for (std::size_t i = 0; i < n; i += 4) {
    const auto lane = static_cast<std::int64_t>(i);
    const v4i valid = v4i{lane, lane + 1, lane + 2, lane + 3} < static_cast<std::int64_t>(in.n_real);
    const v4d c = ld(in.c + i), y = ld(in.y + i), gv = ld(in.gv + i), M = ld(in.M + i), pos = ld(in.position + i);
    const v4i cf = abs_of(c) <= vbig, yf = abs_of(y) <= vbig, gf = abs_of(gv) <= vbig;  // finite
    const v4i cn = c != c, yn = y != y, gn = gv != gv;                                   // NaN
    const v4i finite = cf & yf, identical = (c == gv) | (cn & gn);
    // Not finite: a mismatch unless both are NaN or both the same infinity.
    const v4i mismatch = ~finite & ~((cn & yn) | (c == y));
    const v4d d = abs_of(c - y), ey = exponent_of(y), eg = exponent_of(gv);
    v4d over_ulp_y, over_ulp_g;  // d / ulp: a power of two, so (when its reciprocal is a double) d times that
    if (in.exact_reciprocal) {
      over_ulp_y = d * ((ey < ulp_min ? inv_ulp_min : reciprocal_of_power(ey)) * inv_ulp_scale);
      over_ulp_g = abs_of(c - gv) * ((eg < ulp_min ? inv_ulp_min : reciprocal_of_power(eg)) * inv_ulp_scale);
    } else {
      over_ulp_y = d / ((ey < ulp_min ? ulp_min : ey) * ulp_scale);
      over_ulp_g = abs_of(c - gv) / ((eg < ulp_min ? ulp_min : eg) * ulp_scale);
    }
    const v4d not_finite = mismatch ? vinf : zero;
    const v4d e = finite ? d : not_finite, ulps = finite ? over_ulp_y : not_finite;
    const v4d pair_rel = finite ? (M > zero ? d / (M * u_dt) : (d == zero ? zero : vinf)) : not_finite;
    const v4d rel = d / abs_of(y);
    std::array<v4d, kClasses> margin;
    margin[0] = identical ? zero : ((cf & gf) ? over_ulp_g : vinf);
    for (std::size_t k = 1; k < kClasses; ++k)
      margin[k] = mismatch ? vinf : e / (ld(in.rel_bound + k * n + i) * M + ld(in.floor + k * n + i));
    v4d score;
    v4i fails;
    if (in.criterion == 0) {
      score = margin[in.crit];
      fails = in.crit_exact ? ~identical : (score > one);
    } else if (in.criterion == 1) {
      score = in.max_ulp > 0 ? ulps / splat(in.max_ulp) : (ulps == zero ? zero : vinf);
      fails = mismatch | (score > one);
    } else {
      const v4d allowed = splat(in.atol) + splat(in.rtol) * abs_of(y);
      score = mismatch ? vinf : (allowed > zero ? e / allowed : (e == zero ? zero : vinf));
      fails = mismatch | (score > one);
    }
    const v4i saturated = ~fails & (ld(in.saturable + i) != zero);
    put(out.e + i, e);
    put(out.ulps + i, ulps);
    put(out.pair_rel + i, pair_rel);
    put(out.rel + i, rel);
    put(out.score + i, score);
    for (std::size_t k = 0; k < kClasses; ++k) put(out.margin + k * n + i, margin[k]);
    put(out.flags + i, (identical ? one : zero) + (finite ? 2 * one : zero) + (mismatch ? 4 * one : zero) + (fails ? 8 * one : zero));
    // The order-free statistics of the row's real elements (masks are -1: subtracting counts them).
    count_identical -= identical & valid;
    count_nan -= cn & valid;
    count_inf -= ~cf & ~cn & valid;
    count_finite -= finite & valid;
    count_mismatch -= mismatch & valid;
    count_fails -= fails & valid;
    count_saturated -= saturated & valid;
    max_abs = vmax(max_abs, valid ? e : zero);
    max_rel = vmax(max_rel, (valid & finite & (y != zero)) ? rel : zero);
    max_ulps = vmax(max_ulps, valid ? ulps : zero);
    max_pair = vmax(max_pair, valid ? pair_rel : zero);
    max_score = vmax(max_score, valid ? score : zero);
    first = vmin(first, (valid & fails) ? pos : vinf);
    first_saturated = vmin(first_saturated, (valid & saturated) ? pos : vinf);
    for (std::size_t k = 0; k < kClasses; ++k) {
      const v4i violated = valid & (k == 0 ? ~identical : (margin[k] > one));
      count_class[k] -= violated;
      worst[k] = vmax(worst[k], valid ? margin[k] : zero);
      first_class[k] = vmin(first_class[k], violated ? pos : vinf);
      if (k == 0) continue;  // exact never saturates
      const v4i class_saturated = valid & ~violated & (ld(in.rel_bound + k * n + i) >= one);
      count_class_saturated[k] -= class_saturated;
      first_class_saturated[k] = vmin(first_class_saturated[k], class_saturated ? pos : vinf);
    }
  }
  auto sum = [](v4i v) { return v[0] + v[1] + v[2] + v[3]; };
  auto max_of = [](v4d v) {
    double m = v[0];
    for (int l = 1; l < 4; ++l) m = v[l] > m ? v[l] : m;
    return m;
  };
  auto min_of = [](v4d v) { return std::min(std::min(v[0], v[1]), std::min(v[2], v[3])); };
  st = {sum(count_identical), sum(count_nan), sum(count_inf), sum(count_finite), sum(count_mismatch), sum(count_fails),
        sum(count_saturated), max_of(max_abs), max_of(max_rel), max_of(max_ulps), max_of(max_pair), max_of(max_score),
        min_of(first), min_of(first_saturated), {}, {}, {}, {}, {}};
  for (std::size_t k = 0; k < kClasses; ++k) {
    st.class_violations[k] = sum(count_class[k]);
    st.worst[k] = max_of(worst[k]);
    st.first_class[k] = min_of(first_class[k]);
    st.class_saturated[k] = sum(count_class_saturated[k]);
    st.first_class_saturated[k] = min_of(first_class_saturated[k]);
  }
}

template <class T>
void size_to(std::vector<T>& v, std::size_t n, T fill) {
  if (v.size() != n) v.assign(n, fill);
}

void note_first_of(std::optional<std::int64_t>& first, double p) {
  if (p != std::numeric_limits<double>::infinity()) note_first(first, static_cast<std::int64_t>(p));
}

}  // namespace

void TensorPass::run_rows(Acc& a, const Block& b, std::int64_t t0, std::int64_t t1) const {
  const accuracy::RopeGeometry& rope = *geo_.rope;
  // A row: one head of a token (q_rot / k_rot: head_dim channels), or a token (cos / sin: one value a pair).
  const bool rotated = geo_.kind == OutputGeometry::Kind::rotated;
  const int D = static_cast<int>(rotated ? geo_.D : geo_.P), P = static_cast<int>(geo_.P);
  const std::int64_t H = rotated ? geo_.H : 1;
  auto pair_of = [&](int ch) { return rotated ? rope.pair_of(ch) : ch; };
  auto quantity_of = [&](int ch) { return rotated ? rope.quantity(ch) : Quantity::table; };
  // Rows padded to a multiple of 4 with harmless values (1s: no division by zero), masked out of the stats;
  // rows of a multiple of 4 read f64 values where they lie.
  const auto Dz = (static_cast<std::size_t>(D) + 3) / 4 * 4, Pz = static_cast<std::size_t>(P), Dr = static_cast<std::size_t>(D);
  const bool in_place = Dz == Dr;
  RowScratch& r = a.row;
  for (auto* v : {&r.c, &r.y, &r.gv, &r.x, &r.M, &r.e, &r.ulps, &r.pair_rel, &r.rel, &r.score, &r.flags, &r.position, &r.saturable})
    size_to(*v, Dz, 1.0);
  for (auto* v : {&r.margin, &r.rel_bound, &r.floor}) size_to(*v, kClasses * Dz, 1.0);
  size_to(r.bin, Dz, 0);
  for (int ch = 0; ch < D; ++ch)
    for (std::size_t k = 0; k < kClasses; ++k)
      r.floor[k * Dz + static_cast<std::size_t>(ch)] = bounds_[k][static_cast<std::size_t>(quantity_of(ch))].floor;
  RowIn in{Dz, Dr, r.c.data(), r.y.data(), r.gv.data(), r.M.data(), r.rel_bound.data(), r.floor.data(),
           r.position.data(), r.saturable.data(), u_dt_, std::ldexp(1.0, fi_.min_normal_exp), std::ldexp(1.0, 1 - fi_.precision)};
  in.criterion = cr_.kind == Criterion::Kind::accuracy_class ? 0 : (cr_.kind == Criterion::Kind::max_ulp ? 1 : 2);
  in.crit = crit_class_;
  in.crit_exact = crit_exact_;
  in.max_ulp = cr_.max_ulp;
  in.atol = cr_.atol;
  in.rtol = cr_.rtol;
  // f32 / f16 / bf16: every ulp lies in [2^-149, 2^104], so its reciprocal is a double and a product
  // rounds as the quotient does; f64's can be 2^-1074.
  in.exact_reciprocal = dt_ != DType::f64;
  const RowOut out{r.e.data(), r.ulps.data(), r.pair_rel.data(), r.rel.data(), r.margin.data(), r.score.data(), r.flags.data()};
  const auto q_pair = static_cast<std::size_t>(rotated ? Quantity::rotated : Quantity::table);
  const auto pass = static_cast<std::size_t>(Quantity::passthrough);
  std::vector<double> pair_bound(kClasses * Pz), pair_saturable(Pz);
  const std::size_t es = dtype_size(io::tensor_dtype(dt_));
  for (std::int64_t t = t0; t < t1; ++t) {
    // Per pair and token: the bound of every class and whether the criterion's is saturated.
    const Position& pt = b.positions[t - b.t0];
    for (int j = 0; j < P; ++j) {
      const PairAngle angle = rope.angle(rope.position(pt, j), j);
      for (std::size_t k = 1; k < kClasses; ++k) pair_bound[k * Pz + static_cast<std::size_t>(j)] = bounds_[k][q_pair].relative(angle);
      pair_saturable[static_cast<std::size_t>(j)] = saturated(static_cast<Quantity>(q_pair), angle);
    }
    for (int ch = 0; ch < D; ++ch) {
      const int j = pair_of(ch);
      const auto c = static_cast<std::size_t>(ch);
      const std::int64_t p = j < 0 ? pt.t : rope.position(pt, j);
      r.position[c] = static_cast<double>(p);  // exact: |p| <= 2^53
      r.bin[c] = bin_of(p);
      r.saturable[c] = j < 0 ? saturated(Quantity::passthrough, PairAngle{0, 0}) : pair_saturable[static_cast<std::size_t>(j)];
      for (std::size_t k = 1; k < kClasses; ++k)
        r.rel_bound[k * Dz + c] = j < 0 ? bounds_[k][pass].relative(PairAngle{0, 0}) : pair_bound[k * Pz + static_cast<std::size_t>(j)];
    }
    // A token whose elements all fall in one position bin (every token of a non-multimodal set): its
    // bin's error sums are its own, taken once; its rows' statistics go to that bin whole.
    const bool one_bin = std::all_of(r.bin.begin(), r.bin.begin() + D, [&](int x) { return x == r.bin[0]; });
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t base = (t * H + h) * D, lo = base - b.first;
      const auto at = [lo](const void* p, std::size_t size) { return static_cast<const char*>(p) + static_cast<std::size_t>(lo) * size; };
      if (in_place) {
        in.y = reinterpret_cast<const double*>(at(b.truth_bytes, 8));
      } else {
        decode(at(b.truth_bytes, 8), DType::f64, std::span(r.y.data(), Dr));
      }
      if (in_place && dt_ == DType::f64) {
        in.c = reinterpret_cast<const double*>(at(b.cand_bytes, 8));
        in.gv = reinterpret_cast<const double*>(at(b.same_bytes, 8));
      } else {
        decode(at(b.cand_bytes, es), dt_, std::span(r.c.data(), Dr));
        decode(at(b.same_bytes, es), dt_, std::span(r.gv.data(), Dr));
      }
      if (rotated) {
        decode(at(b.in_bytes, 4), DType::f32, std::span(r.x.data(), Dr));
        if (norm_ != nullptr) {  // M of the rotation's input: the normalized head (in double, within g)
          std::vector<double>& raw = r.norm_in;
          raw.assign(r.x.begin(), r.x.begin() + D);
          rms_norm_head<double>(raw, *norm_, std::span(r.x.data(), Dr));
        }
        for (int ch = 0; ch < D; ++ch) r.M[static_cast<std::size_t>(ch)] = rope.magnitude(r.x.data(), ch);
      }
      RowStats st;
      derive_row(in, out, st);
      if (geo_.exact_passthrough)
        for (int ch = 0; ch < D; ++ch)
          if (rope.pair_of(ch) < 0) note_passthrough(a.s, in.c[ch], in.gv[ch], pt.t);
      if (one_bin) count_row(a, st, r.bin[0]);
      account_row(a, b, base, {in.c, in.y, in.gv, Dr}, one_bin);
    }
    if (one_bin && a.tok.err.n > 0) a.token_bin(r.bin[0]) = a.tok.err;  // the same adds, in the same order
    a.end_token();
  }
}

// A row's order-free statistics, all of one position bin, into the worker's (account()'s counting).
void TensorPass::count_row(Acc& acc, const RowStats& st, int bin) const {
  TensorStats& a = acc.s;
  a.identical += st.identical;
  a.nan += st.nan;
  a.inf += st.inf;
  a.finite += st.finite;
  a.mismatches += st.mismatches;
  a.max_abs = std::max(a.max_abs, st.max_abs);
  a.max_rel = std::max(a.max_rel, st.max_rel);
  a.max_ulps = std::max(a.max_ulps, st.max_ulps);
  a.max_pair = std::max(a.max_pair, st.max_pair);
  for (std::size_t k = 0; k < kClasses; ++k) {
    ClassStats& ca = a.classes[k];
    if (st.worst[k] > ca.worst) ca.worst = st.worst[k];
    ca.violations += st.class_violations[k];
    note_first_of(ca.first, st.first_class[k]);
    ca.saturated += st.class_saturated[k];
    note_first_of(ca.first_saturated, st.first_class_saturated[k]);
  }
  if (st.max_score > a.worst_score) a.worst_score = st.max_score;
  BinStats& bs = a.bins[static_cast<std::size_t>(bin)];
  if (st.max_pair > bs.max_pair) bs.max_pair = st.max_pair;
  if (st.max_ulps > bs.max_ulps) bs.max_ulps = st.max_ulps;
  a.violations += st.fails;
  bs.violations += st.fails;
  note_first_of(a.first, st.first);
  a.saturated += st.saturated;
  bs.saturated += st.saturated;
  note_first_of(a.first_saturated, st.first_saturated);
}

// What count_row leaves of account() (all of it when the row's elements fall in several position bins),
// in element order: the sums per token, the bins' error sums, the ranking.
void TensorPass::account_row(Acc& acc, const Block& blk, std::int64_t base, const RowValues& v, bool one_bin) const {
  TensorStats& a = acc.s;
  TokenSums& tk = acc.tok;
  const RowScratch& r = acc.row;
  const std::size_t Dz = r.e.size(), n = v.n;
  a.elements += static_cast<std::int64_t>(n);
  a.bins[static_cast<std::size_t>(r.bin[0])].elements += one_bin ? static_cast<std::int64_t>(n) : 0;
  const bool ranks = K_ > 0;
  for (std::size_t c = 0; c < n; ++c) {
    const auto flags = static_cast<int>(r.flags[c]);
    const bool finite = (flags & 2) != 0;
    const double score = r.score[c], pair_rel = r.pair_rel[c];
    if (finite) {
      const double e = r.e[c], y = v.y[c];
      tk.sum_ulps += r.ulps[c];
      tk.sum_pair += pair_rel;
      tk.sum_sq_err += e * e;
      tk.sum_sq_truth += y * y;
      tk.err.add(score, pair_rel);
      if (!one_bin) acc.token_bin(r.bin[c]).add(score, pair_rel);
    }
    if (!one_bin) {  // account()'s counting, element by element
      Derived d;
      d.c = v.c[c];
      d.y = v.y[c];
      d.e = r.e[c];
      d.ulps = r.ulps[c];
      d.pair_rel = pair_rel;
      d.rel = r.rel[c];
      for (std::size_t k = 0; k < kClasses; ++k) d.margin[k] = r.margin[k * Dz + c];
      for (std::size_t k = 1; k < kClasses; ++k) d.saturated[k] = r.rel_bound[k * Dz + c] >= 1;
      d.score = score;
      d.identical = (flags & 1) != 0;
      d.finite = finite;
      d.mismatch = (flags & 4) != 0;
      d.fails = (flags & 8) != 0;
      count_element(a, d, static_cast<std::int64_t>(r.position[c]), r.bin[c], !d.fails && r.saturable[c] != 0);
    }
    if (ranks && score > 0 && (acc.heap.size() < K_ || score >= acc.heap.front().score))
      rank(acc, blk, score, base + static_cast<std::int64_t>(c), v.c[c], v.y[c], v.gv[c], r.M[c]);
  }
}

}  // namespace ropecheck::checker::check_detail
