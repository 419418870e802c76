// Where an element of a RoPE output sits and what the error model needs to know about it, in double:
// the pair a channel belongs to and its partner, the position stream driving the pair, the pair's
// angle and the element's magnitude M. Computed once here for the checker, its diagnosis, the property
// suite and drift (ERROR_MODEL.md section 2 defines M and the angle terms).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ropecheck/accuracy/error_model.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::accuracy {

class RopeGeometry {
 public:
  // `inv_freq`: the spec's inverse frequencies per pair (binary64 nearest of the exact values);
  // `attention_factor`: the factor folded into the rotated outputs.
  RopeGeometry(const RopeSpec& rope, std::vector<double> inv_freq, double attention_factor);

  int pairs() const { return pairs_; }
  int head_dim() const { return head_dim_; }
  double attention_factor() const { return att_; }
  double frequency(int pair) const { return freq_[static_cast<std::size_t>(pair)]; }
  // The pair channel c belongs to, -1 for a channel that passes through; its partner in that pair.
  int pair_of(int channel) const { return pair_of_[static_cast<std::size_t>(channel)]; }
  int partner(int channel) const { return partner_[static_cast<std::size_t>(channel)]; }
  // The position stream driving `pair` (0 = t, 1 = h, 2 = w) and its position for a token at `p`.
  int stream(int pair) const { return stream_[static_cast<std::size_t>(pair)]; }
  std::int64_t position(const Position& p, int pair) const {
    const int s = stream_[static_cast<std::size_t>(pair)];
    return s == 0 ? p.t : (s == 1 ? p.h : p.w);
  }
  // |position w_j| and |ln w_j| of `pair` at a stream position.
  PairAngle angle(std::int64_t position, int pair) const {
    return {std::fabs(static_cast<double>(position) * freq_[static_cast<std::size_t>(pair)]),
            log_freq_[static_cast<std::size_t>(pair)]};
  }
  // What channel `channel` of a head vector is, and its M (ERROR_MODEL.md section 2): att (|x_a| + |x_b|)
  // for a rotated channel of the pair (a, b), |x_c| for a pass-through channel. head[c] is the head's
  // input in channel c (a pointer, a span, anything indexable).
  Quantity quantity(int channel) const { return pair_of(channel) < 0 ? Quantity::passthrough : Quantity::rotated; }
  template <class Head>
  double magnitude(const Head& head, int channel) const {
    const double x = std::fabs(static_cast<double>(head[channel]));
    if (pair_of(channel) < 0) return x;
    return att_ * (x + std::fabs(static_cast<double>(head[partner(channel)])));
  }

 private:
  int pairs_ = 0, head_dim_ = 0;
  double att_ = 1;
  std::vector<double> freq_, log_freq_;  // per pair
  std::vector<int> stream_;              // per pair
  std::vector<int> pair_of_, partner_;   // per channel
};

}  // namespace ropecheck::accuracy
