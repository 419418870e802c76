// What the diagnosis of a failing store (diagnose/store_diagnosis.cpp) needs from its check
// (check_stores.cpp): the set, the store, the candidate's bytes and which codes and groups failed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ropecheck/checker/stores.hpp"
#include "ropecheck/core/quantized_store_spec.hpp"

namespace ropecheck::checker::store_check {

struct StoreFailures {
  const golden::GoldenSet& g;
  const StoreCandidate& cand;
  quant::StoreSpec spec;
  std::string base;                 // "q_rot"
  const std::vector<double>& y;     // the set's f64 rotated values
  std::int64_t T = 0, H = 0, D = 0;
  std::vector<std::int64_t> failed_elements, failed_groups;
};

StoreDiagnosis diagnose_store(const StoreFailures& f);

}  // namespace ropecheck::checker::store_check
