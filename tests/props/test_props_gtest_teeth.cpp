// The suite's teeth through the GoogleTest adapter (register_property_tests): kernels with one bug each — the k
// path reading its neighbour head, the attention factor dropped or applied twice, a truncating bf16
// store — are caught on llama-3.1-8b, gpt-j-6b and deepseek-v3, and the correct kernel is not.
//
// The registered tests are *expected* to fail for the buggy kernels, so this binary has its own main:
// it registers them, runs them, then checks every Teeth_* suite failed and every Correct_* suite
// passed, and exits 0 only then (a table of what failed is printed). Kernels: the C ABI plugins of
// tests/plugins/teeth_plugin.cpp (paths from test_paths.hpp), run with their default output dtypes
// (every one the plugin implements: the truncating store shows only in bf16), and the built-in
// mutants (function targets, mutants.hpp). Seed fixed (options.seed; RC_PARAMS / ROPECHECK_SEED override).
#include <gtest/gtest.h>

#include "test_paths.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/props/gtest.hpp"
#include "ropecheck/props/kut_target.hpp"
#include "ropecheck/props/mutants.hpp"
#include "ropecheck/props/registry.hpp"
#include "ropecheck/reference/presets.hpp"

namespace rp = ropecheck::props;

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  rp::register_builtin_targets();
  const std::string dir = ropecheck::test::teeth_plugin_dir();
  struct Bug {
    const char* plugin_mode;  // teeth_plugin_<mode>.so
    const char* mutant;       // mutant:<name>
    const char* property;     // the property that states what the bug breaks
  };
  const std::vector<Bug> bugs = {{"k_head_offset", "k-head-offset", "head_independence"},
                                 {"att_dropped", "attention-factor-dropped", "attention_factor"},
                                 {"att_twice", "attention-factor-twice", "attention_factor"},
                                 {"bf16_truncate", "bf16-truncating-store", "store_rounding"}};
  rp::SuiteOptions options;
  options.cases = 10;
  options.max_position = 1000000;  // below where fp32-angle saturates (~1.16M): a pass there is a real pass
  std::vector<ropecheck::EncodingSpec> specs;
  for (const char* p : {"llama-3.1-8b", "gpt-j-6b", "deepseek-v3"}) specs.push_back(ropecheck::load_preset(p));
  auto plugin = [dir](std::string mode) {
    return [dir, mode] {
      std::shared_ptr<ropecheck::plugin::PluginKernel> k =
          ropecheck::plugin::load_plugin_kernel(dir + "/teeth_plugin_" + mode + ".so");
      rp::TargetInfo info;
      info.name = "plugin:" + k->plugin().name();
      info.description = "kernel plugin teeth_plugin_" + mode + ".so";
      info.accuracy = ropecheck::accuracy::AccuracyClass::fp32_angle;
      info.dtype = ropecheck::DType::f32;
      return rp::make_kut_target(std::move(k), std::move(info), true);
    };
  };
  for (const Bug& b : bugs) {
    rp::SuiteOptions o = options;
    o.only = {b.property};
    rp::register_property_tests(std::string("Teeth_plugin_") + b.plugin_mode, plugin(b.plugin_mode), o, specs);
    const std::string mutant = std::string("mutant:") + b.mutant;
    rp::register_property_tests("Teeth_mutant_" + rp::gtest_safe_name(b.mutant), [mutant] { return rp::make_target(mutant); },
                                o, specs);
  }
  rp::SuiteOptions o = options;
  o.only = {"head_independence", "attention_factor", "store_rounding", "norm", "relative_shift"};
  rp::register_property_tests("Correct_plugin", plugin("correct"), o, specs);
  rp::register_property_tests("Correct_hf_fp32_bf16out", [] { return rp::make_target("hf-fp32-bf16out"); }, o, specs);

  const int rc = RUN_ALL_TESTS();
  (void)rc;  // failures are expected: judged below
  const testing::UnitTest& ut = *testing::UnitTest::GetInstance();
  int wrong = 0;
  std::printf("\nthe suite's teeth through the GoogleTest adapter:\n");
  for (int i = 0; i < ut.total_test_suite_count(); ++i) {
    const testing::TestSuite& s = *ut.GetTestSuite(i);
    const std::string name = s.name();
    const bool teeth = name.rfind("Teeth_", 0) == 0;
    for (int j = 0; j < s.total_test_count(); ++j) {
      const testing::TestInfo& t = *s.GetTestInfo(j);
      if (!t.should_run()) continue;
      const bool failed = t.result()->Failed(), skipped = t.result()->Skipped();
      const bool ok = teeth ? failed : (!failed && !skipped);
      wrong += ok ? 0 : 1;
      std::printf("  %-44s %-40s %-8s %s\n", name.c_str(), t.name(), failed ? "failed" : (skipped ? "skipped" : "passed"),
                  ok ? "as expected" : (teeth ? "NOT CAUGHT" : "FALSE FAILURE"));
    }
  }
  std::printf("%s\n", wrong == 0 ? "every bug caught on every preset, the correct kernels never failed"
                                 : "teeth test FAILED");
  return wrong == 0 ? 0 : 1;
}
