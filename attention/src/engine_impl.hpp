// What the attention engine's units share (private to attention/): the resolved problem, the rotated
// tokens in double-double, the dot-product kernels and their bounds, the fast logit and output row,
// and the MPFR fallback. Overview: engine.hpp and attention/ATTENTION.md.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ropecheck/attention/dd_math.hpp"
#include "ropecheck/attention/engine.hpp"
#include "ropecheck/reference/double_double.hpp"
#include "ropecheck/reference/mpfr_value.hpp"

namespace ropecheck::attention {

struct AttentionEngine::Impl {
  RopeSpec rope;
  AttentionSpec attn;
  AttentionEngineOptions options;
  int P = 0, D = 0, Dv = 0, G = 1;
  long start_bits = 160;                     // the fallback's first precision
  std::vector<std::array<int, 2>> channels;  // per pair: (a, b)
  std::vector<int> stream;                   // per pair: 0 = t, 1 = h, 2 = w
  std::vector<int> passthrough;              // channels past the rotary block
  std::vector<std::array<double, 3>> inv3;   // per pair: the inverse frequency as a triple-double
  std::vector<std::unique_ptr<MpfrValue>> inv_mp;  // per pair, kStoredBits
  std::vector<char> inv_exact;                     // the stored value is the exact one (a double)
  std::unique_ptr<MpfrValue> att_mp;
  bool att_exact = false, att_one = false;
  DD att;                   // |att - exact| <= att_rel |att|
  double att_rel = 0;
  std::unique_ptr<MpfrValue> scale_mp;
  bool scale_exact = false;
  DD scale;                 // |scale - exact| <= scale_rel |scale|
  double scale_rel = 0;
  std::optional<double> cap;
  std::vector<double> sinks;

  std::int64_t stream_position(const Position& p, int pair) const {
    const int s = stream[static_cast<std::size_t>(pair)];
    return s == 0 ? p.t : (s == 1 ? p.h : p.w);
  }
};

namespace detail {

using Impl = AttentionEngine::Impl;

constexpr long kStoredBits = AttentionEngine::kZivMaxBits + 128;
constexpr long kStoredGuardBits = kStoredBits - 64;  // stored values: relative error <= 2^-kStoredGuardBits
constexpr double kInvRelErr = 0x1p-150;              // the triple-double inverse frequencies (as reference)
constexpr int kDotBlock = 32;                        // terms per compensated block (dot.cpp)
constexpr int kLanes = 8;                            // keys per dot-product panel (dot.cpp)

// ---- rotated tokens (rotate.cpp) ---------------------------------------------------------------
// hi / lo [tokens][heads][D]: each rotated channel is hi + lo within its error; per (token, head) the
// Euclidean norms (upper bounds) of hi and of the channels' error bounds (inf: the fast path gave up).
struct RotatedSet {
  int heads = 0, D = 0;
  std::vector<double> hi, lo, norm_hi, norm_err;
  std::size_t at(std::int64_t token, int head) const {
    return (static_cast<std::size_t>(token) * static_cast<std::size_t>(heads) + static_cast<std::size_t>(head));
  }
  const double* h(std::int64_t token, int head) const { return hi.data() + at(token, head) * static_cast<std::size_t>(D); }
  const double* l(std::int64_t token, int head) const { return lo.data() + at(token, head) * static_cast<std::size_t>(D); }
};
RotatedSet rotate_tokens(const Impl& m, std::span<const Position> positions, std::span<const double> x, int heads);

// ---- compensated dot products (dot.cpp) --------------------------------------------------------
// |computed - sum_c (ah_c + al_c)(bh_c + bl_c)| <= dot_bound(n, A) for any A >= sum_c |ah_c bh_c|.
double dot_bound(std::int64_t n, double A);
DD dot_one(const double* ah, const double* al, const double* bh, const double* bl, int n);
// Keys transposed for kLanes-lane products: [key / kLanes][channel][key % kLanes], zero-padded.
struct KeyPanel {
  std::int64_t keys = 0;
  int D = 0;
  std::vector<double> hi, lo;
};
KeyPanel make_panel(const RotatedSet& k);
// out[j - first] = dot(query, key j) for j in [first, first + count) (each as dot_one's bound).
void dots(const double* qh, const double* ql, const KeyPanel& panel, std::int64_t first, std::int64_t count, DD* out);
// acc[c] = sum_j e[j] v[j * stride + c] over j < count, c < dv (the bound: dot_bound(count, A_c),
// A_c >= sum_j |e[j].hi v[j][c]|).
void weighted_sums(const DD* e, const double* v, std::int64_t stride, std::int64_t count, int dv, DD* acc,
                   double* s_tmp, double* c_tmp);

// ---- the fast logit and output row (fast.cpp) -------------------------------------------------
struct Logit {
  DD v;
  double err = 0;  // absolute; inf when the fast path has no value
};
// The soft-capped, scaled logit from a dot product of rotated vectors with its bound.
Logit finish_logit(const Impl& m, DD dot, double dot_err);
// The bound of a dot product of two rotated heads (the product's own error and the vectors' errors).
double rotated_dot_error(int D, double nq_hi, double nq_err, double nk_hi, double nk_err);

// One output row: o[c] for c < Dv within err[c] (inf: no fast value), from the row's logits.
struct RowScratch {
  std::vector<DD> e, acc;
  std::vector<double> abs_e, s_tmp, c_tmp;
};
void output_row(const Impl& m, std::span<const Logit> logits, const double* sink, const double* v,
                const double* v_max, std::int64_t first_key, RowScratch& scratch, DD* o, double* err);

// ---- the MPFR fallback (ziv.cpp) ----------------------------------------------------------------
// Resolves results[d] for every d with need[d], for the logit of query head q (at qp) and key k (at kp).
void ziv_logit(const Impl& m, const Position& qp, const double* q, const Position& kp, const double* k,
               std::span<const DType> dtypes, double* results, unsigned char* need);
// Resolves results[c * nd + d] where need[c * nd + d], for the outputs of one row: query head q at qp,
// keys key_pos[j], k + j * D, v + j * Dv for j < count, the sink logit (or null).
void ziv_row(const Impl& m, const Position& qp, const double* q, std::span<const Position> key_pos, const double* k,
             const double* v, const double* sink, std::span<const DType> dtypes, double* results, unsigned char* need);

}  // namespace detail
}  // namespace ropecheck::attention
