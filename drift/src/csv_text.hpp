// Text of the drift CSV files and the gnuplot data (report_tables.cpp, plots.cpp).
#pragma once

#include <string>

#include <fmt/core.h>

namespace ropecheck::drift::detail {

// Shortest round-trip decimal.
inline std::string num(double v) { return fmt::format("{}", v); }

// A CSV field, quoted when it holds a comma, quote or newline (RFC 4180).
inline std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace ropecheck::drift::detail
