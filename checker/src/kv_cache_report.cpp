// The KV-cache check's verdict and reports (CHECK_REPORT.md, "KV-cache writes").
#include <fmt/format.h>

#include "kv_cache_internal.hpp"

namespace ropecheck::checker {

namespace kv_detail {

void set_verdict(KvCacheReport& r) {
  std::vector<std::string> why;
  if (r.out_of_slot_writes > 0) why.push_back(fmt::format("{} out-of-slot writes (sentinel changed)", r.out_of_slot_writes));
  if (r.missing_writes > 0) why.push_back(fmt::format("{} of {} tokens not written (sentinel left)", r.missing_writes, r.tokens));
  if (r.v_mismatches > 0) why.push_back(fmt::format("{} v values not stored bit-exactly", r.v_mismatches));
  if (r.k.verdict == Verdict::fail) why.push_back("k_rot." + r.dtype + " fails: " + r.k.report.reason);
  if (!why.empty()) {
    r.verdict = Verdict::fail;
    r.reason.clear();
    for (const std::string& w : why) r.reason += (r.reason.empty() ? "" : "; ") + w;
    return;
  }
  r.verdict = r.k.verdict;
  r.reason = r.k.report.reason;
}

}  // namespace kv_detail

nlohmann::json KvCacheReport::to_json() const {
  nlohmann::json problems_j = nlohmann::json::array();
  for (const SlotProblem& p : problems)
    problems_j.push_back({{"kind", p.kind}, {"slot", p.slot}, {"page", p.page}, {"offset", p.offset}, {"token", p.token}});
  nlohmann::json diag = nlohmann::json::array();
  for (const KvHypothesis& h : diagnosis) diag.push_back({{"id", h.id}, {"title", h.title}, {"tokens_moved", h.tokens_moved}});
  nlohmann::json cache_j = {{"dtype", dtype},         {"cache", cache},
                            {"layout", layout},       {"pages", pages},
                            {"page_size", page_size}, {"heads", heads},
                            {"head_dim", head_dim},   {"tokens", tokens},
                            {"own_metadata", own_metadata}, {"sentinel", sentinel_declared ? "declared" : "default"},
                            {"v_checked", v_given},   {"untouched_slots", untouched_slots},
                            {"out_of_slot_writes", out_of_slot_writes}, {"missing_writes", missing_writes},
                            {"v_mismatches", v_mismatches}, {"problems", problems_j},
                            {"verdict", to_string(verdict)}, {"reason", reason}};
  if (diagnosed) cache_j["diagnosis"] = diag;
  nlohmann::json j = k.to_json();
  j["kv_cache"] = cache_j;
  // The run's verdict is the cache's: the k check's keys say the same.
  j["verdict"] = to_string(verdict);
  j["pass"] = verdict == Verdict::pass;
  j["reason"] = reason;
  return j;
}

std::string KvCacheReport::summary() const {
  std::string s = fmt::format("KV cache: {} {} {}, {} pages x page_size {}, {} heads x {}; {} tokens{}{}\n", cache, layout,
                              dtype, pages, page_size, heads, head_dim, tokens, own_metadata ? ", the kernel's own metadata" : "",
                              v_given ? ", v checked" : "");
  s += fmt::format("  slots: {} untouched, {} out-of-slot writes, {} missing writes; v: {} mismatches (sentinel: {})\n",
                   untouched_slots, out_of_slot_writes, missing_writes, v_mismatches,
                   sentinel_declared ? "declared" : "default 0xFF bytes");
  for (const SlotProblem& p : problems)
    s += fmt::format("    {} at slot {} (page {}, offset {}){}\n", p.kind, p.slot, p.page, p.offset,
                     p.token >= 0 ? fmt::format(", token {}", p.token) : std::string());
  s += k.summary();
  if (diagnosed) {
    if (diagnosis.empty()) s += "KV-cache diagnosis: no known cache mistake explains the cache\n";
    for (const KvHypothesis& h : diagnosis)
      s += fmt::format("KV-cache diagnosis: {} ({}; {} tokens moved)\n", h.id, h.title, h.tokens_moved);
  }
  s += fmt::format("KV-cache verdict: {}{}\n", to_string(verdict), reason.empty() ? "" : " (" + reason + ")");
  return s;
}

}  // namespace ropecheck::checker
