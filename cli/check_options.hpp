// `ropecheck check`'s options (cmd_check.cpp) and the paths of a set written with golden --kv-cache
// (check_kv_cache.cpp): a candidate cache file, or a kernel's fused append.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ropecheck/checker/run_check.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/plugin/client.hpp"

namespace ropecheck::cli {

struct CheckCliOptions {
  std::string golden_dir, candidate, kernel, kv_cache, only, accuracy_class, report, junit, baseline, shard, max_memory;
  std::string layout = "thd";
  std::vector<std::string> maps;
  double max_ulp = 0, atol = 0, rtol = 0, max_growth = 2;
  int worst = 10, threads = 0;
  bool diagnose = false, no_diagnose = false;
  plugin::PluginClientOptions plugin;
  CLI::Option *class_opt = nullptr, *max_ulp_opt = nullptr, *atol_opt = nullptr;
};

// The request from the options, validated before anything is loaded.
checker::CheckRequest request_of(const CheckCliOptions& o);

// --kv-cache FILE: a candidate cache of a set written with --kv-cache (checker/kv_cache.hpp).
int run_kv_cache_check(const CheckCliOptions& o);
// --kernel on a set written with --kv-cache: the kernel's fused append judged as a cache.
int run_kernel_kv_check(const CheckCliOptions& o, const plugin::KernelName& name, const golden::GoldenSet& g,
                        const checker::CheckRequest& request);

}  // namespace ropecheck::cli
