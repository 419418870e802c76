// What a drift sweep measures: one of ropecheck's precision recipes (kernels/recipe.hpp) or an
// external kernel loaded as a plugin (golden/KERNEL_ABI.md), behind one interface.
//
// Names: a recipe's command-line spelling ("hf", "bf16-positions", ...) or "plugin:PATH" for a
// shared library implementing the kernel ABI.
//
// What each kind provides:
//   recipe   rotated vectors (rope_apply), the cos / sin table in the storage dtype
//            (rope_cos_sin_table), and per position the recipe's angles (recipe_angle_row) and its
//            f32 cos / sin before the attention factor and the table cast (recipe_cos_sin_row);
//   plugin   rotated vectors (ropecheck_rope_apply), and the table when the plugin exports
//            ropecheck_rope_cos_sin; no angles or f32 rows (the ABI does not expose them).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/drift/exact.hpp"
#include "ropecheck/golden/plugin_client.hpp"
#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::drift {

class Candidate {
 public:
  virtual ~Candidate() = default;

  const std::string& name() const { return name_; }                // "hf", "plugin:hf-fp32-c"
  const std::string& description() const { return description_; }  // one line
  bool known_bad() const { return known_bad_; }
  DType storage() const { return storage_; }
  // The recipe, or nullopt for a plugin.
  virtual std::optional<kernels::Recipe> recipe() const { return std::nullopt; }
  // The dtype the recipe's table and rotation run in (kernels::table_dtype); nullopt for plugins.
  virtual std::optional<DType> table_dtype() const { return std::nullopt; }

  // Rotates x ([tokens][heads][head_dim] floats, bf16-exact) at the given positions (one per
  // token, the same for every multimodal stream); out receives the outputs (storage-dtype values
  // as doubles), [tokens][heads][head_dim]. `threads` for the kernel's own threading.
  virtual void rotate(std::span<const std::int64_t> positions, int heads, std::span<const float> x,
                      std::span<double> out, int threads) = 0;
  // The cos / sin table [tokens][pairs] in the storage dtype, no attention factor. False when the
  // candidate has none (a plugin without ropecheck_rope_cos_sin).
  virtual bool table(std::span<const std::int64_t> positions, std::span<double> cos_out, std::span<double> sin_out,
                     int threads) = 0;
  virtual bool has_table() const = 0;
  // Per position (thread-safe): the angles handed to sin / cos, reduced to [-pi, pi], and the f32
  // cos / sin before the attention factor and the table cast. False for plugins.
  virtual bool angle_row(std::int64_t position, std::span<double> out) const;
  virtual bool trig_row(std::int64_t position, std::span<float> cos_out, std::span<float> sin_out) const;
  bool has_rows() const { return recipe().has_value(); }
  // Kernel calls that failed so far (a plugin that crashed, hung, exited, overran, left outputs
  // unwritten or returned NaN / Inf; golden/plugin_client.hpp): their outputs read as NaN.
  struct KernelFailures {
    std::int64_t failed = 0, calls = 0;
    std::string first;  // the first failure, one line
  };
  virtual KernelFailures failures() const { return {}; }

 protected:
  std::string name_, description_;
  bool known_bad_ = false;
  DType storage_ = DType::f32;
};

// "N of M kernel calls lost; first: MESSAGE" (drift keeps going after a failed call).
std::string describe_failures(const Candidate::KernelFailures& f);

// Every recipe name, in kernels::recipes() order (for --help and error messages).
std::string recipe_names();

// A candidate from its name (a recipe or "plugin:PATH"). The exact reference supplies plugins
// with the binary64 frequencies and attention factor the ABI passes. seq_len resolves dynamic /
// LongRoPE frequencies (as make_rope_plan and the ABI take it). Throws SpecError naming an unknown
// recipe, golden::TensorError for a plugin that does not load.
std::unique_ptr<Candidate> make_candidate(std::string_view name, const EncodingSpec& spec, const ExactRope& exact,
                                          DType storage, std::int64_t seq_len,
                                          const golden::PluginClientOptions& plugin = {});

}  // namespace ropecheck::drift
