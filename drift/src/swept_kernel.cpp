#include "ropecheck/drift/swept_kernel.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "ropecheck/plugin/plugin_kernel.hpp"
#include "ropecheck/io/tensor.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"  // the kernels' exact f16 / bf16 bit conversions
#include "ropecheck/kut/builtin_sources.hpp"
#include "ropecheck/kut/cuda_source.hpp"
#include "ropecheck/reference/angle_reduction.hpp"

namespace ropecheck::drift {

namespace {

std::size_t element_bytes(DType d) { return static_cast<std::size_t>(format_info(d).storage_bits / 8); }

}  // namespace

SweptKernel::SweptKernel(std::unique_ptr<kut::KernelUnderTest> kernel, std::string name, std::string description, bool known_bad,
                     const EncodingSpec& spec, DType storage, std::int64_t seq_len)
    : kernel_(std::move(kernel)), name_(std::move(name)), description_(std::move(description)), known_bad_(known_bad),
      storage_(storage), spec_(spec), seq_len_(seq_len) {
  if (!kernel_->info().capabilities.rope_apply)
    throw KernelDeclined(kernel_->info().name + " does not export ropecheck_rope_apply, which drift needs");
  if (const kut::RecipeRows* rows = kernel_->recipe_rows()) plan_ = kernels::make_rope_plan(spec.rope, rows->recipe, seq_len);
}

SweptKernel::~SweptKernel() = default;

std::optional<kernels::Recipe> SweptKernel::recipe() const {
  const kut::RecipeRows* rows = kernel_->recipe_rows();
  return rows ? std::optional<kernels::Recipe>(rows->recipe) : std::nullopt;
}

std::optional<DType> SweptKernel::table_dtype() const {
  const std::optional<kernels::Recipe> r = recipe();
  return r ? std::optional<DType>(kernels::table_dtype(*r, storage_)) : std::nullopt;
}

bool SweptKernel::has_table() const { return kernel_->info().capabilities.rope_cos_sin; }

std::string SweptKernel::problem(std::span<const std::int64_t> positions, int heads) const {
  return std::to_string(positions.size()) + " tokens" + (heads > 0 ? " x " + std::to_string(heads) + " heads" : "") + ", " +
         std::string(to_string(storage_)) + " output, spec " + (spec_.name.empty() ? std::string("(unnamed)") : spec_.name) +
         ", positions " +
         (positions.empty() ? std::string("-") : std::to_string(positions.front()) + " .. " + std::to_string(positions.back()));
}

void SweptKernel::set_positions(std::span<const std::int64_t> positions) {
  pos_.resize(positions.size());
  for (std::size_t i = 0; i < positions.size(); ++i) pos_[i] = Position::uniform(positions[i]);
}

// A failed call (plugin_client.hpp) does not throw: its outputs read as NaN and it is counted in
// failures(), which run_drift / run_compare report (and `ropecheck drift` exits 1 for). Outputs of an
// external kernel that come back NaN or infinite from a call that returned ok count as failed too:
// drift's inputs are small and finite, so every true output is finite (a built-in known-bad recipe
// that overflows is a measured result, not a lost call).
void SweptKernel::check(const kut::CallResult& c, const char* entry, const std::string& what,
                      std::initializer_list<std::span<const double>> outs) {
  ++failures_.calls;
  if (c.status == kut::CallResult::Status::unsupported)
    throw KernelDeclined("kernel '" + name_ + "': " + entry + " answered UNSUPPORTED for this spec / dtype" +
                              (c.message.empty() ? std::string() : " (" + c.message + ")") + " (" + what + ")");
  if (c.status == kut::CallResult::Status::failed) {
    ++failures_.failed;
    if (failures_.first.empty()) failures_.first = c.message;
    return;
  }
  if (!kernel_->info().external) return;
  std::int64_t n = 0, total = 0;
  for (std::span<const double> v : outs) {
    for (double d : v) n += !std::isfinite(d);
    total += static_cast<std::int64_t>(v.size());
  }
  if (n == 0) return;
  ++failures_.failed;
  if (failures_.first.empty())
    failures_.first = kernel_->info().name + ": " + entry + " returned " + std::to_string(n) + " non-finite values (NaN / Inf) of " +
                      std::to_string(total) + " (" + what + ")";
}

void SweptKernel::finish() {
  for (const kut::RunEnd::Late& l : kernel_->finish().failures) {
    ++failures_.failed;
    if (failures_.first.empty()) failures_.first = l.message;
  }
}

void SweptKernel::rotate(std::span<const std::int64_t> positions, int heads, std::span<const float> x, std::span<double> out) {
  set_positions(positions);
  const std::string what = problem(positions, heads);
  buf_.assign(out.size() * element_bytes(storage_), std::byte{0});
  kut::RopeApplyCall call;
  call.problem = {&spec_, seq_len_, pos_, what};
  call.heads = heads;
  call.x = {DType::f32, std::as_bytes(x)};
  call.out = {storage_, buf_};
  const kut::CallResult c = kernel_->rope_apply(call);
  if (c.status != kut::CallResult::Status::unsupported) decode(buf_.data(), storage_, out);
  check(c, "ropecheck_rope_apply", what, {out});
}

bool SweptKernel::table(std::span<const std::int64_t> positions, std::span<double> cos_out, std::span<double> sin_out) {
  if (!has_table()) return false;
  set_positions(positions);
  const std::string what = problem(positions, 0);
  const std::size_t bytes = cos_out.size() * element_bytes(storage_);
  buf_.assign(2 * bytes, std::byte{0});
  kut::RopeTableCall call;
  call.problem = {&spec_, seq_len_, pos_, what};
  call.cos = {storage_, std::span(buf_).first(bytes)};
  call.sin = {storage_, std::span(buf_).subspan(bytes)};
  const kut::CallResult c = kernel_->rope_cos_sin(call);
  if (c.status != kut::CallResult::Status::unsupported) {
    decode(buf_.data(), storage_, cos_out);
    decode(buf_.data() + bytes, storage_, sin_out);
  }
  check(c, "ropecheck_rope_cos_sin", what, {cos_out, sin_out});
  return true;
}

bool SweptKernel::angle_row(std::int64_t position, std::span<double> out) const {
  if (!plan_) return false;
  kernels::recipe_angle_row(*plan_, Position::uniform(position), out.data());
  for (double& a : out) a = reduce_two_pi(a);  // the kernels hand angles out unreduced
  return true;
}

bool SweptKernel::trig_row(std::int64_t position, std::span<float> cos_out, std::span<float> sin_out) const {
  if (!plan_) return false;
  kernels::recipe_cos_sin_row(*plan_, Position::uniform(position), cos_out.data(), sin_out.data());
  return true;
}

std::string describe_failures(const SweptKernel::KernelFailures& f) {
  return std::to_string(f.failed) + " of " + std::to_string(f.calls) + " kernel calls lost; first: " + f.first;
}

std::string recipe_names() {
  std::string s;
  for (const kernels::RecipeInfo& r : kernels::recipes()) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

std::unique_ptr<SweptKernel> make_swept_kernel(const plugin::KernelName& name, const EncodingSpec& spec, DType storage,
                                               std::int64_t seq_len, int threads, const plugin::PluginClientOptions& isolation) {
  plugin::OpenOptions ko;
  ko.cpu.threads = threads;
  ko.plugin = isolation;
  plugin::OpenedKernel k = plugin::open_kernel(name, ko, "--recipes");
  if (name.kind == plugin::KernelName::Kind::plugin) {
    return std::make_unique<SweptKernel>(std::move(k.kernel), k.label, "kernel plugin " + name.library, false, spec, storage,
                                         seq_len);
  }
  const kernels::RecipeInfo& info = kernels::recipe_info(name.recipe);
  const bool cpu = name.kind == plugin::KernelName::Kind::builtin;
  const std::string description = cpu ? std::string(info.description) : k.kernel->info().description;
  return std::make_unique<SweptKernel>(std::move(k.kernel), cpu ? std::string(info.name) : name.canonical(), description,
                                       info.known_bad, spec, storage, seq_len);
}

}  // namespace ropecheck::drift
