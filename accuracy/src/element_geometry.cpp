#include "ropecheck/accuracy/element_geometry.hpp"

#include <cmath>

namespace ropecheck::accuracy {

RopeGeometry::RopeGeometry(const RopeSpec& r, std::vector<double> inv_freq, double attention_factor)
    : pairs_(rope_pairs(r)), head_dim_(r.head_dim), att_(attention_factor), freq_(std::move(inv_freq)) {
  for (double w : freq_) log_freq_.push_back(w == 0 ? 0.0 : std::fabs(std::log(std::fabs(w))));
  for (int j = 0; j < pairs_; ++j) stream_.push_back(r.mrope == MropeMode::none ? 0 : mrope_stream(r, j));
  pair_of_.assign(static_cast<std::size_t>(head_dim_), -1);
  partner_.assign(static_cast<std::size_t>(head_dim_), -1);
  for (int j = 0; j < pairs_; ++j) {
    const auto [a, b] = pair_channels(r, j);
    if (!is_rotary_channel(r, a) || !is_rotary_channel(r, b)) continue;
    pair_of_[static_cast<std::size_t>(a)] = pair_of_[static_cast<std::size_t>(b)] = j;
    partner_[static_cast<std::size_t>(a)] = b;
    partner_[static_cast<std::size_t>(b)] = a;
  }
}

}  // namespace ropecheck::accuracy
