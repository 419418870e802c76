// What the KV-cache check's units share (kv_cache_check.cpp, kv_cache_report.cpp,
// diagnose/kv_cache_diagnosis.cpp).
#pragma once

#include <vector>

#include "ropecheck/checker/kv_cache.hpp"

namespace ropecheck::checker::kv_detail {

// Failed by any out-of-slot write, missing write or changed v, else the k check's verdict.
void set_verdict(KvCacheReport& r);

// The cache mistakes (kv_mistake_catalogue) that explain the candidate: each puts some tokens
// elsewhere (another slot, the other layout, or an un-offset position), and every such token's values
// at its place under the mistake lie within the criterion's class bound (the default class for a
// max-ulp / atol criterion) of the exact value the mistake computes.
std::vector<KvHypothesis> diagnose_kv_cache(const golden::GoldenSet& g, const KvCacheCandidate& c, const Criterion& cr);

}  // namespace ropecheck::checker::kv_detail
