#include "ropecheck/io/exact_sum.hpp"

#include <bit>
#include <cmath>
#include <limits>

namespace ropecheck::io {

void ExactSum::add_bits(std::uint64_t m, int offset) {
  std::size_t i = static_cast<std::size_t>(offset / 64);
  const int sh = offset % 64;
  const std::uint64_t lo = m << sh, hi = sh ? m >> (64 - sh) : 0;
  std::uint64_t before = limb_[i];
  limb_[i] += lo;
  std::uint64_t carry = (limb_[i] < before) + hi;
  for (++i; carry != 0 && i < limb_.size(); ++i) {
    before = limb_[i];
    limb_[i] += carry;
    carry = limb_[i] < before;
  }
}

void ExactSum::add(double v) {
  if (std::isnan(v) || v < 0) {
    nan_ = true;
    return;
  }
  if (std::isinf(v)) {
    inf_ = true;
    return;
  }
  const std::uint64_t b = std::bit_cast<std::uint64_t>(v);
  const int e = static_cast<int>(b >> 52);
  const std::uint64_t frac = b & ((std::uint64_t{1} << 52) - 1);
  // A subnormal is frac * 2^-1074; a normal number (1.frac) * 2^(e-1075) = (2^52 + frac) * 2^((e-1) - 1074).
  if (e == 0) {
    if (frac != 0) add_bits(frac, 0);
  } else {
    add_bits(frac | (std::uint64_t{1} << 52), e - 1);
  }
}

void ExactSum::merge(const ExactSum& o) {
  inf_ = inf_ || o.inf_;
  nan_ = nan_ || o.nan_;
  for (std::size_t i = 0; i < limb_.size(); ++i)
    if (o.limb_[i] != 0) add_bits(o.limb_[i], static_cast<int>(64 * i));
}

std::uint64_t ExactSum::bits(int lo, int count) const {
  std::uint64_t r = 0;
  for (int k = 0; k < count;) {  // at most two limbs
    const int at = lo + k;
    if (at < 0) {
      ++k;
      continue;
    }
    const std::size_t i = static_cast<std::size_t>(at / 64);
    if (i >= limb_.size()) break;
    const int sh = at % 64, take = std::min(64 - sh, count - k);
    const std::uint64_t mask = take == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << take) - 1;
    r |= ((limb_[i] >> sh) & mask) << k;
    k += take;
  }
  return r;
}

double ExactSum::value() const {
  if (nan_) return std::numeric_limits<double>::quiet_NaN();
  if (inf_) return std::numeric_limits<double>::infinity();
  int top = kLimbs - 1;
  while (top >= 0 && limb_[static_cast<std::size_t>(top)] == 0) --top;
  if (top < 0) return 0.0;
  const int msb = 64 * top + 63 - std::countl_zero(limb_[static_cast<std::size_t>(top)]);
  if (msb < 53) return std::ldexp(static_cast<double>(limb_[0]), -1074);  // < 2^53 units of 2^-1074: exact
  const int lsb = msb - 52;
  std::uint64_t m = bits(lsb, 53);
  const bool round = bits(lsb - 1, 1) != 0;
  bool sticky = false;
  for (int k = 0; k < lsb - 1 && !sticky; k += 64) sticky = bits(k, std::min(64, lsb - 1 - k)) != 0;
  int exp = lsb;
  if (round && (sticky || (m & 1))) {
    if (++m == (std::uint64_t{1} << 53)) {
      m >>= 1;
      ++exp;
    }
  }
  return std::ldexp(static_cast<double>(m), exp - 1074);  // +inf past the range
}

std::string ExactSum::to_text() const {
  if (nan_) return "nan";
  if (inf_) return "inf";
  int top = kLimbs - 1, low = 0;
  while (top >= 0 && limb_[static_cast<std::size_t>(top)] == 0) --top;
  if (top < 0) return "0";
  while (limb_[static_cast<std::size_t>(low)] == 0) ++low;
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (int i = top; i >= low; --i)
    for (int d = 15; d >= 0; --d) hex += digits[(limb_[static_cast<std::size_t>(i)] >> (4 * d)) & 15];
  hex.erase(0, hex.find_first_not_of('0'));
  const int e = 64 * low - 1074;
  return "0x" + hex + "p" + (e < 0 ? "-" : "+") + std::to_string(e < 0 ? -e : e);
}

std::optional<ExactSum> ExactSum::from_text(std::string_view text) {
  ExactSum s;
  if (text == "0") return s;
  if (text == "inf" || text == "nan") {
    (text == "inf" ? s.inf_ : s.nan_) = true;
    return s;
  }
  const std::size_t p = text.find('p');
  if (text.substr(0, 2) != "0x" || p == std::string_view::npos || p <= 2 || p + 2 >= text.size() || p + 6 < text.size() ||
      (text[p + 1] != '-' && text[p + 1] != '+'))
    return std::nullopt;
  int e = 0;
  for (char c : text.substr(p + 2)) {
    if (c < '0' || c > '9') return std::nullopt;
    e = 10 * e + (c - '0');
  }
  const int base = (text[p + 1] == '-' ? -e : e) + 1074;  // bit offset of the hex integer's lowest bit
  const std::string_view hex = text.substr(2, p - 2);
  if (base < 0 || base + 4 * static_cast<int>(hex.size()) > 64 * kLimbs) return std::nullopt;
  for (std::size_t k = 0; k < hex.size(); ++k) {
    const char c = hex[hex.size() - 1 - k];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return std::nullopt;
    if (d) s.add_bits(static_cast<std::uint64_t>(d), base + 4 * static_cast<int>(k));
  }
  return s;
}

}  // namespace ropecheck::io
