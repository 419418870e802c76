// Validators for numeric options whose C++ conversion would wrap or saturate silently: CLI11 turns
// "--seed -1" into 2^64-1 and "--seed 99999999999999999999" into 2^64-1 (reliability-2 defect 13).
// They run on the text before conversion, so the message quotes what the user typed.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

namespace ropecheck::cli {

// Decimal digits only, and within [0, 2^64-1].
inline CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || end != s.data() + s.size())
          return "'" + s + "' is not a non-negative integer";
        if (ec != std::errc()) return "'" + s + "' is above 2^64-1 = 18446744073709551615";
        return {};
      },
      "UINT64");
}

}  // namespace ropecheck::cli
