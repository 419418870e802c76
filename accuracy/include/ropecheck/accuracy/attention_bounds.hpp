// The error model of attention scores and outputs: each rotation class's per-element bound on rotated
// q and k propagated through the dot product (with the exact condition numbers), the soft-cap, the
// softmax and the weighted sum of V, plus the attention arithmetic the class stands for. The derivation
// is ERROR_MODEL.md section 16; the numbers below are its results. Pure double arithmetic on facts
// the checker has (the exact rotated vectors, logits, probabilities and outputs of a golden set).
//
// A score class allows, for the score t(i, j) = cap tanh(scale <Q_i, K_j> / cap) (or scale <Q_i, K_j>),
//   |candidate - t| <= stored bound,  internal bound = the same before the score's own store,
// and an output class, for o_ic = sum_j p_ij V_jc,
//   |candidate - o_ic| <= output bound.
// A bound that reaches the quantity's magnitude (scale sum |Q_c||K_c|, capped at cap, for a score;
// sum_j p_ij |V_jc| for an output) is saturated: it accepts a zero output, so the element counts as
// not tested (core/verdict.hpp), never as passed.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "ropecheck/accuracy/element_geometry.hpp"
#include "ropecheck/accuracy/error_model.hpp"

namespace ropecheck::accuracy {

// The attention arithmetic a class stands for (ERROR_MODEL.md 16.2): the accumulation format (dot
// products, the softmax's sum, the weighted sum: binary64 for exact and fp64-angle, f32 otherwise), the
// format scores and probabilities are held in between steps (binary64, f32, f32, f32, f16, bf16), and
// the underflow floor's unit (the largest smallest subnormal involved; f16 for both table classes, so
// that they nest).
struct AttentionArithmetic {
  double u_acc = 0, u_mid = 0, s_min = 0;
};
AttentionArithmetic attention_arithmetic(AccuracyClass c);

// The class's per-channel bound on a rotated head held in dtype dt: E_c = class_bound(...).allowed(angle, M)
// for the channel's quantity (rotated or pass-through), at the token's position; x is the head's input.
std::vector<double> rotated_errors(const RopeGeometry& g, AccuracyClass c, DType dt, const Position& p,
                                   std::span<const double> x);

struct ScoreBound {
  double propagated = 0;  // scale * sum (Eq |K| + |Q| Ek + Eq Ek): what the rotations' errors alone allow
  double internal = 0;    // the logit the softmax receives (everything but the score's store)
  double stored = 0;      // the score as stored in its dtype
  double magnitude = 0;   // scale sum |Q_c| |K_c| (capped at cap)
  bool saturated = false;  // stored >= magnitude
};
// Q, K: the exact rotated query and key (the nearest doubles, e.g. a golden set's f64 values); Eq, Ek
// their class bounds (rotated_errors); logit: the exact soft-capped logit. For `exact` the score is
// checked by identity: stored is the necessary condition u_dt |t| (+ half a subnormal), internal 0.
ScoreBound score_bound(AccuracyClass c, DType score_dtype, std::span<const double> Q, std::span<const double> Eq,
                       std::span<const double> K, std::span<const double> Ek, double scale, std::optional<double> cap,
                       double logit);

// One softmax row's exact facts.
struct SoftmaxRow {
  std::span<const double> p;    // the probabilities of the row's keys
  double p_sink = 0;            // the sink's (0: no sink)
  std::span<const double> eps;  // each key's internal score bound (ScoreBound::internal)
  double spread = 0;            // largest minus smallest exact logit over the keys and the sink
};
// Channel c of V over the row's keys: v[j * stride].
struct Column {
  const double* v = nullptr;
  std::size_t stride = 1;
  double operator[](std::size_t j) const { return v[j * stride]; }
};
struct OutputBound {
  double propagated = 0;  // the logits' errors through the softmax and the weighted sum (B of 16.4)
  double bound = 0;       // with the class's softmax and weighted-sum arithmetic and the store
  double magnitude = 0;   // sum_j p_j |V_jc|
  bool saturated = false;
};
// o: the exact output. For `exact`: the necessary condition u_dt |o|, checked by identity.
OutputBound output_bound(AccuracyClass c, DType out_dtype, const SoftmaxRow& row, Column v, double o);

}  // namespace ropecheck::accuracy
