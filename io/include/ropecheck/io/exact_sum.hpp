// An exact sum of non-negative doubles: every addend is added into a fixed-point integer that spans the
// whole double range (2^-1074 to 2^1024), so the sum does not depend on the order of the additions or on
// how they are grouped, and value() rounds it once to the nearest double. The checker keeps its sums
// (mean and RMS errors, NMSE) in these, so that a run split over threads, chunks or `--shard I/N`
// processes adds up to the same bits as one run, and a part's sums survive a trip through JSON exactly.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ropecheck::io {

class ExactSum {
 public:
  // v >= 0; +inf makes the sum +inf, NaN (or a negative v) makes it NaN.
  void add(double v);
  void merge(const ExactSum& o);
  double value() const;  // correctly rounded (ties to even); +inf past the double range
  bool operator==(const ExactSum&) const = default;

  // "0", "inf", "nan", or "0xHEXp-E" / "0xHEXp+E": the integer HEX times 2^-E / 2^E, exactly.
  std::string to_text() const;
  static std::optional<ExactSum> from_text(std::string_view text);

 private:
  static constexpr int kLimbs = 35;  // 2240 bits: 2098 for the double range, the rest for carries
  std::array<std::uint64_t, kLimbs> limb_{};  // bit k of the integer weighs 2^(k - 1074)
  bool inf_ = false, nan_ = false;
  void add_bits(std::uint64_t m, int offset);
  std::uint64_t bits(int lo, int count) const;  // bits [lo, lo + count) of the integer, count <= 64
};

}  // namespace ropecheck::io
