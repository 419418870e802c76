// What a drift sweep measures: a kernel under test (kut/kernel_under_test.hpp) on one spec, sequence
// length and storage dtype: one of ropecheck's precision recipes (kernels/recipe.hpp) on the CPU or its
// CUDA kernel, or an external kernel loaded as a plugin (abi/KERNEL_ABI.md).
//
// Kernels come by name (plugin/kernel_name.hpp: builtin:RECIPE, cuda:RECIPE, plugin:LIB.so); drift labels
// them in its tables and plots by the recipe for a CPU kernel ("hf"), "cuda:RECIPE" for a CUDA kernel (a
// GPU, or the test-only switch ROPECHECK_CUDA_EMULATION=1: host emulation), "plugin:NAME" for a plugin.
//
// Every kernel provides rotated vectors and, when the kernel has the entry point, the cos / sin
// table in the storage dtype. A built-in recipe (CPU or CUDA) also has per position the recipe's angles
// and its f32 cos / sin before the attention factor and the table cast, computed by the recipe's
// shared row code (kernels::recipe_angle_row / recipe_cos_sin_row, on the host); a plugin has none
// (the ABI does not expose them).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"
#include "ropecheck/plugin/client.hpp"
#include "ropecheck/plugin/kernel_name.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/kut/kernel_under_test.hpp"

namespace ropecheck::drift {

// The kernel declines the spec or dtype (it answered UNSUPPORTED, or lacks ropecheck_rope_apply): not a
// bad input but something not tested, which `drift --compare` reports as such (exit 3). An InputError,
// so that a sweep of recipes, which has no verdict, still stops with the kernel's reason.
class KernelDeclined : public InputError {
 public:
  using InputError::InputError;
};

class SweptKernel {
 public:
  // `kernel` must have rope_apply (KernelDeclined otherwise).
  SweptKernel(std::unique_ptr<kut::KernelUnderTest> kernel, std::string name, std::string description, bool known_bad,
            const EncodingSpec& spec, DType storage, std::int64_t seq_len);
  ~SweptKernel();

  const std::string& name() const { return name_; }                // "hf", "cuda:hf", "plugin:hf-fp32-c"
  const std::string& description() const { return description_; }  // one line
  bool known_bad() const { return known_bad_; }
  DType storage() const { return storage_; }
  // The built-in recipe, or nullopt for a plugin.
  std::optional<kernels::Recipe> recipe() const;
  // The dtype the recipe's table and rotation run in (kernels::table_dtype); nullopt for plugins.
  std::optional<DType> table_dtype() const;

  // Rotates x ([tokens][heads][head_dim] floats, bf16-exact) at the given positions (one per
  // token, the same for every multimodal stream); out receives the outputs (storage-dtype values
  // as doubles), [tokens][heads][head_dim]. UNSUPPORTED throws KernelDeclined: drift cannot measure
  // what the kernel will not compute.
  void rotate(std::span<const std::int64_t> positions, int heads, std::span<const float> x, std::span<double> out);
  // The cos / sin table [tokens][pairs] in the storage dtype, no attention factor. False when the
  // kernel has none (a plugin without ropecheck_rope_cos_sin).
  bool table(std::span<const std::int64_t> positions, std::span<double> cos_out, std::span<double> sin_out);
  bool has_table() const;
  // Per position (thread-safe): the angles handed to sin / cos, reduced to [-pi, pi], and the f32
  // cos / sin before the attention factor and the table cast. False without a recipe.
  bool angle_row(std::int64_t position, std::span<double> out) const;
  bool trig_row(std::int64_t position, std::span<float> cos_out, std::span<float> sin_out) const;
  bool has_rows() const { return plan_.has_value(); }
  // Kernel calls that failed so far (a plugin that crashed, hung, exited, overran, left outputs
  // unwritten, or, for an external kernel, returned NaN / Inf from finite inputs): their outputs
  // read as NaN.
  struct KernelFailures {
    std::int64_t failed = 0, calls = 0;
    std::string first;  // the first failure, one line
  };
  KernelFailures failures() const { return failures_; }
  // Ends the kernel's run (a plugin's host stopped: kut::KernelUnderTest::finish); an output it changed
  // after its call returned counts as a failed call. Before failures() is read for the result.
  void finish();

 private:
  void check(const kut::CallResult& c, const char* entry, const std::string& what, std::initializer_list<std::span<const double>> outs);
  std::string problem(std::span<const std::int64_t> positions, int heads) const;
  void set_positions(std::span<const std::int64_t> positions);

  std::unique_ptr<kut::KernelUnderTest> kernel_;
  std::string name_, description_;
  bool known_bad_ = false;
  DType storage_ = DType::f32;
  EncodingSpec spec_;
  std::int64_t seq_len_ = 0;
  std::optional<kernels::RopePlan> plan_;  // the recipe's, for the rows
  std::vector<Position> pos_;
  std::vector<std::byte> buf_;
  KernelFailures failures_;
};

// "N of M kernel calls lost; first: MESSAGE" (drift keeps going after a failed call).
std::string describe_failures(const SweptKernel::KernelFailures& f);

// Every recipe name, in kernels::recipes() order (for --help and error messages).
std::string recipe_names();

// The kernel a name stands for. seq_len resolves dynamic / LongRoPE frequencies (as make_rope_plan and
// the ABI take it); `threads` for the CPU kernels. InputError for a plugin that does not load or a CUDA
// kernel without a device.
std::unique_ptr<SweptKernel> make_swept_kernel(const plugin::KernelName& name, const EncodingSpec& spec, DType storage,
                                               std::int64_t seq_len, int threads, const plugin::PluginClientOptions& plugin = {});

}  // namespace ropecheck::drift
