// RapidCheck reads its configuration (RC_PARAMS) once and prints it to stderr. Front ends (the CLI,
// the Python module) set the seed there and swallow that line, so that a run's only output is its
// report; run_suite takes the seed explicitly as well (SuiteOptions::seed).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include <rapidcheck/detail/Configuration.h>

namespace ropecheck::props {

inline void set_rapidcheck_seed(std::uint64_t seed) {
  ::setenv("RC_PARAMS", ("seed=" + std::to_string(seed)).c_str(), 1);
  std::ostringstream sink;
  std::streambuf* const old = std::cerr.rdbuf(sink.rdbuf());
  (void)rc::detail::configuration();
  std::cerr.rdbuf(old);
}

}  // namespace ropecheck::props
