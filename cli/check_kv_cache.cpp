// The check of a set written with golden --kv-cache (check_options.hpp): a candidate cache file judged by
// checker/kv_cache.hpp, or a kernel's fused append (kernel_abi.h revision 3) judged the same way.
#include <fmt/core.h>

#include "check_options.hpp"
#include "commands.hpp"
#include "ropecheck/checker/kv_cache.hpp"
#include "ropecheck/io/atomic_output.hpp"

namespace ropecheck::cli {

int run_kv_cache_check(const CheckCliOptions& o) {
  for (const auto& [is_given, name] : {std::pair{!o.candidate.empty() || !o.kernel.empty(), "--candidate / --kernel"},
                                       std::pair{!o.shard.empty(), "--shard"}, std::pair{!o.baseline.empty(), "--baseline"},
                                       std::pair{!o.only.empty() || !o.maps.empty(), "--only / --map"}})
    if (is_given) throw InputError(std::string("--kv-cache: not with ") + name + " (the cache is the candidate; its k is k_rot)");
  if (!o.report.empty()) io::check_file_destination(o.report, "--report");
  if (!o.junit.empty()) throw InputError("--kv-cache: not with --junit");
  const checker::CheckRequest request = request_of(o);
  const golden::GoldenSet g = golden::load_golden_set(o.golden_dir, {.hash_files = false});
  checker::check_request(g, request);
  const checker::KvCacheCandidate c = checker::read_kv_cache_candidate(o.kv_cache, g);
  const checker::KvCacheReport r = checker::check_kv_cache(g, c, request);
  if (!o.report.empty())
    io::write_file_atomically(o.report, r.to_json().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                              "--report");
  fmt::print("{}", r.summary());
  std::fflush(stdout);
  return exit_code(r.verdict);
}

// --kernel on a set written with --kv-cache: the kernel's fused append (kernel_abi.h revision 3) judged as
// a cache (checker/kv_cache.hpp), its failures KERNEL FAILURE lines. A kernel without it gets the ordinary
// check, with the cache not tested (listed in not_tested, never passed).
int run_kernel_kv_check(const CheckCliOptions& o, const plugin::KernelName& name, const golden::GoldenSet& g,
                        const checker::CheckRequest& request) {
  if (!o.baseline.empty() || !o.junit.empty()) throw InputError("--kernel on a KV-cache set: not with --baseline or --junit");
  plugin::OpenOptions ko;
  ko.cpu.threads = o.threads;
  ko.plugin = o.plugin;
  plugin::OpenedKernel k = plugin::open_kernel(name, ko);
  std::shared_ptr<kut::KernelUnderTest> kernel = std::move(k.kernel);
  checker::KernelKvCache kv = checker::kernel_kv_cache(*kernel, g);
  nlohmann::json j;
  std::string text;
  Verdict verdict = Verdict::fail;
  if (kv.candidate) {
    const checker::KvCacheReport r = checker::check_kv_cache(g, *kv.candidate, request);
    for (const kut::RunEnd::Late& l : kernel->finish().failures) kv.failures.push_back({{}, l.message});
    j = r.to_json();
    j["candidate_source"] = k.source;
    text = k.title + ": the KV cache it appended to\n";
    for (const checker::KernelFailure& f : kv.failures) text += "KERNEL FAILURE: " + f.message + "\n";
    text += r.summary();
    verdict = kv.failures.empty() ? r.verdict : Verdict::fail;
    if (!kv.failures.empty()) j["verdict"] = "fail", j["pass"] = false;
  } else {
    checker::CheckOutcome out = checker::run_check(g, checker::kernel_candidate(kernel, k.title, k.source), request);
    out.report.not_tested.push_back("kv_cache");
    if (out.report.verdict == Verdict::pass) out.report.verdict = Verdict::not_tested;
    if (out.verdict == Verdict::pass) out.verdict = Verdict::not_tested;
    j = out.to_json();
    j["verdict"] = to_string(out.verdict);
    j["pass"] = out.verdict == Verdict::pass;
    text = out.summary() + "kv_cache not tested: " + kv.not_tested + "\n";
    verdict = out.verdict;
  }
  if (!o.report.empty())
    io::write_file_atomically(o.report, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", "--report");
  fmt::print("{}", text);
  std::fflush(stdout);
  return exit_code(verdict);
}

}  // namespace ropecheck::cli
