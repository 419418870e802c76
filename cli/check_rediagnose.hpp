// `merge --diagnose` (check_rediagnose.cpp): the diagnosis one
// run of `check` adds to a failing report, from the golden set and the candidate the merged parts
// name, read again (the paths must be readable where merge runs and hold the same data, or
// InputError); nullopt where one run would not diagnose (a pass, a kernel failure).
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "ropecheck/checker/checker.hpp"
#include "ropecheck/checker/diagnose.hpp"

namespace ropecheck::cli {

std::optional<checker::Diagnosis> rediagnose_check(const checker::CheckReport& rep, const nlohmann::json& run,
                                                  const nlohmann::json& source, int threads);

}  // namespace ropecheck::cli
