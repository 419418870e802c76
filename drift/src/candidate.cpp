#include "ropecheck/drift/candidate.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <string>

#include "ropecheck/golden/plugin.hpp"
#include "ropecheck/reference/angle_reduction.hpp"
#include "ropecheck/golden/tensor.hpp"
#include "ropecheck/kernel_abi.h"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/core/spec_json.hpp"

namespace ropecheck::drift {

namespace {

std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }

std::size_t element_bytes(DType d) { return static_cast<std::size_t>(format_info(d).storage_bits / 8); }

// Storage-dtype bytes -> doubles (exact: every f16 / bf16 / f32 value is a double).
void decode(const unsigned char* in, DType d, std::span<double> out) {
  const std::size_t n = out.size();
  switch (d) {
    case DType::f64: std::memcpy(out.data(), in, n * 8); return;
    case DType::f32:
      for (std::size_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, in + 4 * i, 4);
        out[i] = v;
      }
      return;
    case DType::f16:  // the kernels' exact bit conversions (fast; no libm)
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t b;
        std::memcpy(&b, in + 2 * i, 2);
        out[i] = kernels::f16_bits_to_f32(b);
      }
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t b;
        std::memcpy(&b, in + 2 * i, 2);
        out[i] = kernels::bf16_bits_to_f32(b);
      }
      return;
  }
}

// ---- recipes -------------------------------------------------------------------------------------

class RecipeCandidate final : public Candidate {
 public:
  RecipeCandidate(const kernels::RecipeInfo& info, const EncodingSpec& spec, DType storage, std::int64_t seq_len)
      : recipe_(info.recipe), plan_(kernels::make_rope_plan(spec.rope, info.recipe, seq_len)) {
    name_ = std::string(info.name);
    description_ = std::string(info.description);
    known_bad_ = info.known_bad;
    storage_ = storage;
  }

  std::optional<kernels::Recipe> recipe() const override { return recipe_; }
  std::optional<DType> table_dtype() const override { return kernels::table_dtype(recipe_, storage_); }

  void rotate(std::span<const std::int64_t> positions, int heads, std::span<const float> x, std::span<double> out,
              int threads) override {
    const auto T = static_cast<std::int64_t>(positions.size());
    buf_.resize(out.size() * element_bytes(storage_));
    const kernels::TensorView in =
        kernels::TensorView::contiguous(const_cast<float*>(x.data()), DType::f32, T, heads, plan_.head_dim);
    const kernels::TensorView o = kernels::TensorView::contiguous(buf_.data(), storage_, T, heads, plan_.head_dim);
    kernels::KernelOptions opt;
    opt.threads = threads;
    kernels::rope_apply(plan_, kernels::PositionsView::of(positions), in, o, {}, {}, opt);
    decode(buf_.data(), storage_, out);
  }

  bool table(std::span<const std::int64_t> positions, std::span<double> cos_out, std::span<double> sin_out,
             int threads) override {
    const std::size_t n = cos_out.size(), bytes = n * element_bytes(storage_);
    buf_.resize(2 * bytes);
    kernels::KernelOptions opt;
    opt.threads = threads;
    kernels::rope_cos_sin_table(plan_, kernels::PositionsView::of(positions), buf_.data(), buf_.data() + bytes, storage_,
                                opt);
    decode(buf_.data(), storage_, cos_out);
    decode(buf_.data() + bytes, storage_, sin_out);
    return true;
  }
  bool has_table() const override { return true; }

  bool angle_row(std::int64_t position, std::span<double> out) const override {
    kernels::recipe_angle_row(plan_, Position::uniform(position), out.data());
    for (double& a : out) a = reduce_two_pi(a);  // the kernels hand angles out unreduced
    return true;
  }
  bool trig_row(std::int64_t position, std::span<float> cos_out, std::span<float> sin_out) const override {
    kernels::recipe_cos_sin_row(plan_, Position::uniform(position), cos_out.data(), sin_out.data());
    return true;
  }

 private:
  kernels::Recipe recipe_;
  kernels::RopePlan plan_;
  std::vector<unsigned char> buf_;
};

// ---- plugins -------------------------------------------------------------------------------------

// A failed call (plugin_client.hpp) does not throw: its outputs read as NaN and it is counted in
// failures(), which run_drift / run_compare report (and `ropecheck drift` exits 1 for). Outputs that
// come back NaN or infinite from a call that returned OK count as failed too: drift's inputs are
// small and finite, so every true output is finite.
class PluginCandidate final : public Candidate {
 public:
  PluginCandidate(const std::filesystem::path& library, const EncodingSpec& spec, const ExactRope& exact, DType storage,
                  std::int64_t seq_len, const golden::PluginClientOptions& options)
      : plugin_(golden::load_kernel_plugin(library, options)), json_(spec_to_json(spec).dump()) {
    if (!plugin_.has_rope_apply())
      throw golden::TensorError(plugin_.who() + " does not export ropecheck_rope_apply, which drift needs");
    name_ = "plugin:" + plugin_.name();
    description_ = "kernel plugin " + library.string();
    storage_ = storage;
    spec_name_ = spec.name.empty() ? std::string("(unnamed)") : spec.name;
    const RopeSpec& r = spec.rope;
    for (int j = 0; j < exact.pairs(); ++j) inv_.push_back(exact.inv_freq(j));
    if (r.scaling.type == ScalingType::longrope) ext_ = exact.long_factors() ? r.scaling.long_factor : r.scaling.short_factor;
    in_.spec_json = json_;
    in_.rope = golden::abi_rope_params(r, seq_len);
    in_.rope.attention_factor = exact.attention_factor_f64();
    in_.inv_freq = inv_;
    in_.longrope_ext = ext_;
    in_.position_streams = r.mrope == MropeMode::none ? 1 : 3;
  }

  void rotate(std::span<const std::int64_t> positions, int heads, std::span<const float> x, std::span<double> out,
              int /*threads: the ABI calls from one thread*/) override {
    fill_positions(positions);
    const std::string what = problem(positions, heads);
    const golden::KernelCall c =
        plugin_.rope_apply(in_, "q", heads, x, golden::abi_dtype(storage_), out.size() * element_bytes(storage_), what);
    check(c, "ropecheck_rope_apply", what);
    decode(plugin_.output(0).data(), storage_, out);
    if (c.ok()) count_nonfinite({out}, "ropecheck_rope_apply", what);
  }

  bool table(std::span<const std::int64_t> positions, std::span<double> cos_out, std::span<double> sin_out,
             int /*threads*/) override {
    if (!plugin_.has_rope_cos_sin()) return false;
    fill_positions(positions);
    const std::string what = problem(positions, 0);
    const golden::KernelCall c =
        plugin_.rope_cos_sin(in_, golden::abi_dtype(storage_), cos_out.size() * element_bytes(storage_), what);
    check(c, "ropecheck_rope_cos_sin", what);
    decode(plugin_.output(0).data(), storage_, cos_out);
    decode(plugin_.output(1).data(), storage_, sin_out);
    if (c.ok()) count_nonfinite({cos_out, sin_out}, "ropecheck_rope_cos_sin", what);
    return true;
  }
  bool has_table() const override { return plugin_.has_rope_cos_sin(); }

  KernelFailures failures() const override {
    return {plugin_.failed_calls() + nonfinite_calls_, plugin_.calls(),
            plugin_.first_failure().empty() ? first_nonfinite_ : plugin_.first_failure()};
  }

 private:
  std::string problem(std::span<const std::int64_t> positions, int heads) const {
    return std::to_string(positions.size()) + " tokens" + (heads > 0 ? " x " + std::to_string(heads) + " heads" : "") + ", " +
           std::string(to_string(storage_)) + " output, spec " + spec_name_ + ", positions " +
           (positions.empty() ? std::string("-")
                              : std::to_string(positions.front()) + " .. " + std::to_string(positions.back()));
  }
  void fill_positions(std::span<const std::int64_t> positions) {
    const std::size_t T = positions.size(), S = sz(in_.position_streams);
    pos_.resize(T * S);
    for (std::size_t s = 0; s < S; ++s) std::copy(positions.begin(), positions.end(), pos_.begin() + static_cast<std::ptrdiff_t>(s * T));
    in_.tokens = static_cast<std::int64_t>(T);
    in_.positions = pos_;
  }
  void check(const golden::KernelCall& c, const char* entry, const std::string& what) const {
    // UNSUPPORTED is unusable input for drift (it cannot measure what the kernel will not compute).
    if (c.status == golden::KernelCall::Status::unsupported)
      throw golden::TensorError("kernel '" + plugin_.name() + "': " + entry + " answered UNSUPPORTED for this spec / dtype" +
                                (c.message.empty() ? std::string() : " (" + c.message + ")") + " (" + what + ")");
  }
  // A call that returned OK with NaN / Inf outputs counts as failed (drift's true outputs are finite).
  void count_nonfinite(std::initializer_list<std::span<const double>> outputs, const char* entry, const std::string& what) {
    std::int64_t n = 0, total = 0;
    for (std::span<const double> v : outputs) {
      for (double d : v) n += !std::isfinite(d);
      total += static_cast<std::int64_t>(v.size());
    }
    if (n == 0) return;
    ++nonfinite_calls_;
    if (first_nonfinite_.empty())
      first_nonfinite_ = plugin_.who() + ": " + entry + " returned " + std::to_string(n) + " non-finite values (NaN / Inf) of " +
                         std::to_string(total) + " (" + what + ")";
  }

  golden::KernelPlugin plugin_;
  std::string json_, spec_name_;
  std::vector<double> inv_, ext_;
  golden::RopeInputs in_;
  std::vector<std::int64_t> pos_;
  std::int64_t nonfinite_calls_ = 0;
  std::string first_nonfinite_;
};

}  // namespace

bool Candidate::angle_row(std::int64_t, std::span<double>) const { return false; }
bool Candidate::trig_row(std::int64_t, std::span<float>, std::span<float>) const { return false; }

std::string describe_failures(const Candidate::KernelFailures& f) {
  return std::to_string(f.failed) + " of " + std::to_string(f.calls) + " kernel calls lost; first: " + f.first;
}

std::string recipe_names() {
  std::string s;
  for (const kernels::RecipeInfo& r : kernels::recipes()) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

std::unique_ptr<Candidate> make_candidate(std::string_view name, const EncodingSpec& spec, const ExactRope& exact,
                                          DType storage, std::int64_t seq_len, const golden::PluginClientOptions& plugin) {
  constexpr std::string_view kPlugin = "plugin:";
  if (name.starts_with(kPlugin)) {
    const std::string_view path = name.substr(kPlugin.size());
    if (path.empty()) throw SpecError("'plugin:' needs a library path (plugin:PATH.so)");
    return std::make_unique<PluginCandidate>(std::filesystem::path(path), spec, exact, storage, seq_len, plugin);
  }
  const std::optional<kernels::Recipe> r = kernels::parse_recipe(name);
  if (!r) throw SpecError("unknown recipe '" + std::string(name) + "' (known: " + recipe_names() + ", or plugin:PATH.so)");
  return std::make_unique<RecipeCandidate>(kernels::recipe_info(*r), spec, storage, seq_len);
}

}  // namespace ropecheck::drift
