// A golden output's elements as the checker and its diagnosis walk them: which kind of output it is,
// where each element sits (token, head, channel, pair) and what the error model needs (the spec's
// element geometry, accuracy/element_geometry.hpp; the sinusoidal columns' frequencies).
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ropecheck/accuracy/element_geometry.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/golden/golden_set.hpp"

namespace ropecheck::checker::check_detail {

// The golden input a rotated output is computed from: q_rot's q, k_rot's k, k_pe_rot's k_pe (MLA).
inline bool is_rotated_base(const std::string& base) { return base == "q_rot" || base == "k_rot" || base == "k_pe_rot"; }
inline std::string input_of(const std::string& base) {
  return base == "q_rot" ? "q" : (base == "k_pe_rot" ? "k_pe" : "k");
}

// The spec's norm stage of a rotated output's input (q_rot: q_norm, k_rot: k_norm), nullptr when none.
const RmsNormStage* norm_of(const golden::GoldenSet& g, const std::string& base);
// The values a rotated output rotates, in double: the golden q / k, each head normalized first where the
// spec has a norm stage for it (rms_norm_head in binary64: within the norm's term of ERROR_MODEL.md
// section 17, which the bounds of such an output carry).
std::vector<double> rotation_input(const golden::GoldenSet& g, const std::string& base);

struct OutputGeometry {
  enum class Kind { pair_table, pe, rotated } kind = Kind::pair_table;
  const std::vector<Position>* positions = nullptr;
  std::optional<accuracy::RopeGeometry> rope;  // RoPE sets
  std::vector<double> pe_freq;                 // sinusoidal: per column, 0 for a zero column
  std::vector<int> pe_index;                   // sinusoidal: per column, its frequency's index, -1 for a zero column
  std::optional<StoredValues> in;              // rotated outputs: q or k (f32), normalized (f64) under a norm stage
  std::shared_ptr<const std::vector<double>> normalized;  // what `in` views under a norm stage
  double norm_term = 0;  // under a norm stage: its relative term (ERROR_MODEL.md section 17), added to k_const
  std::int64_t P = 0, D = 0, H = 1, offset = 0;
  // MLA sets: the rotated output's pass-through channels must equal the input bit for bit.
  bool exact_passthrough = false;

  // `load_data`: read the positions and the input (q / k) whole, for element(); the streaming check reads
  // them a block at a time instead and uses locate().
  OutputGeometry(const golden::GoldenSet& g, const std::string& base, bool load_data = true);

  std::int64_t per_token() const { return kind == Kind::pair_table ? P : (kind == Kind::pe ? D : H * D); }

  // Element i (flat, row-major) of the output, as the error model sees it.
  struct Element {
    std::int64_t token = 0, position = 0;  // the position of the driving stream
    int head = -1, channel = -1, pair = -1, stream = 0;
    accuracy::Quantity quantity = accuracy::Quantity::table;
    accuracy::PairAngle angle{0, 0};
    double magnitude = 1;
  };
  Element element(std::int64_t i) const;
  // Element i of a token at `pos`, its magnitude left at 1 (element() reads a rotated one's from the input).
  Element locate(std::int64_t i, const Position& pos) const;

  // One head of the input (rotated outputs) starting at flat index `base`, indexable by channel.
  struct Head {
    const StoredValues* in;
    std::int64_t base;
    double operator[](int c) const { return (*in)[base + c]; }
  };
  Head head(std::int64_t base) const { return {&*in, base}; }
};

}  // namespace ropecheck::checker::check_detail
