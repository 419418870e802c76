#include "ropecheck/drift/candidate.hpp"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
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

class PluginCandidate final : public Candidate {
 public:
  PluginCandidate(const std::filesystem::path& library, const EncodingSpec& spec, const ExactRope& exact, DType storage,
                  std::int64_t seq_len)
      : plugin_(golden::load_kernel_plugin(library)), spec_(spec), json_(spec_to_json(spec).dump()) {
    // The same library again (reference-counted by the loader) for the entry points' addresses;
    // load_kernel_plugin has made every check.
    handle_ = ::dlopen(std::filesystem::absolute(library).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw golden::TensorError("kernel library " + library.string() + ": cannot load it as a shared library");
    rope_ = reinterpret_cast<ropecheck_rope_apply_fn>(::dlsym(handle_, "ropecheck_rope_apply"));
    table_ = reinterpret_cast<ropecheck_rope_cos_sin_fn>(::dlsym(handle_, "ropecheck_rope_cos_sin"));
    if (!rope_)
      throw golden::TensorError("kernel '" + plugin_.name() + "' (" + library.string() +
                                ") does not export ropecheck_rope_apply, which drift needs");
    name_ = "plugin:" + plugin_.name();
    description_ = "kernel plugin " + library.string();
    storage_ = storage;
    const RopeSpec& r = spec.rope;
    for (int j = 0; j < exact.pairs(); ++j) inv_.push_back(exact.inv_freq(j));
    if (r.scaling.type == ScalingType::longrope) ext_ = exact.long_factors() ? r.scaling.long_factor : r.scaling.short_factor;
    params_ = golden::abi_rope_params(r, seq_len);
    params_.inv_freq = inv_.data();
    params_.longrope_ext = ext_.empty() ? nullptr : ext_.data();
    params_.attention_factor = exact.attention_factor_f64();
    streams_ = r.mrope == MropeMode::none ? 1 : 3;
  }
  ~PluginCandidate() override {
    if (handle_) ::dlclose(handle_);
  }
  PluginCandidate(const PluginCandidate&) = delete;
  PluginCandidate& operator=(const PluginCandidate&) = delete;

  void rotate(std::span<const std::int64_t> positions, int heads, std::span<const float> x, std::span<double> out,
              int /*threads: the ABI calls from one thread*/) override {
    const auto T = static_cast<std::int64_t>(positions.size());
    fill_positions(positions);
    fill_nan(out.size());
    char message[512] = {0};
    ropecheck_rope_problem p{};
    p.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
    p.out_dtype = golden::abi_dtype(storage_);
    p.spec_json = json_.c_str();
    p.rope = params_;
    p.input_name = "q";
    p.tokens = T;
    p.heads = heads;
    p.position_streams = streams_;
    p.positions = pos_.data();
    p.x = x.data();
    p.out = buf_.data();
    p.message = message;
    p.message_capacity = sizeof message;
    const int rc = rope_(&p);
    message[sizeof message - 1] = '\0';  // a kernel may forget the terminator
    check(rc, "ropecheck_rope_apply", message);
    decode(buf_.data(), storage_, out);
  }

  bool table(std::span<const std::int64_t> positions, std::span<double> cos_out, std::span<double> sin_out,
             int /*threads*/) override {
    if (!table_) return false;
    fill_positions(positions);
    const std::size_t n = cos_out.size(), bytes = n * element_bytes(storage_);
    fill_nan(2 * n);
    char message[512] = {0};
    ropecheck_table_problem p{};
    p.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
    p.out_dtype = golden::abi_dtype(storage_);
    p.spec_json = json_.c_str();
    p.rope = params_;
    p.tokens = static_cast<std::int64_t>(positions.size());
    p.position_streams = streams_;
    p.positions = pos_.data();
    p.cos = buf_.data();
    p.sin = buf_.data() + bytes;
    p.message = message;
    p.message_capacity = sizeof message;
    const int rc = table_(&p);
    message[sizeof message - 1] = '\0';
    check(rc, "ropecheck_rope_cos_sin", message);
    decode(buf_.data(), storage_, cos_out);
    decode(buf_.data() + bytes, storage_, sin_out);
    return true;
  }
  bool has_table() const override { return table_ != nullptr; }

 private:
  void fill_positions(std::span<const std::int64_t> positions) {
    const std::size_t T = positions.size();
    pos_.resize(T * sz(streams_));
    for (int s = 0; s < streams_; ++s) std::copy(positions.begin(), positions.end(), pos_.begin() + static_cast<std::ptrdiff_t>(sz(s) * T));
  }
  // Elements a kernel leaves unwritten read as NaN (and are reported as non-finite).
  void fill_nan(std::size_t n) {
    const std::size_t e = element_bytes(storage_);
    buf_.resize(n * e);
    unsigned char nan_bytes[8];
    const double d = std::numeric_limits<double>::quiet_NaN();
    const float f = std::numeric_limits<float>::quiet_NaN();
    const std::uint16_t h = storage_ == DType::bf16 ? 0x7FC0 : 0x7E00;
    if (storage_ == DType::f64) std::memcpy(nan_bytes, &d, 8);
    else if (storage_ == DType::f32) std::memcpy(nan_bytes, &f, 4);
    else std::memcpy(nan_bytes, &h, 2);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(buf_.data() + i * e, nan_bytes, e);
  }
  void check(int rc, const char* entry, const char* raw_message) const {
    if (rc == ROPECHECK_OK) return;
    // The kernel's reason, first line only (errors are one line).
    std::string m(raw_message);
    m = m.substr(0, m.find_first_of("\r\n"));
    const char* message = m.c_str();
    if (rc == ROPECHECK_UNSUPPORTED)
      throw golden::TensorError("kernel '" + plugin_.name() + "': " + entry + " answered UNSUPPORTED for this spec / dtype" +
                                (message[0] ? std::string(" (") + message + ")" : std::string()));
    throw golden::TensorError("kernel '" + plugin_.name() + "': " + entry + " failed with code " + std::to_string(rc) +
                              (message[0] ? std::string(" (") + message + ")" : std::string()));
  }

  golden::KernelPlugin plugin_;
  EncodingSpec spec_;
  std::string json_;
  void* handle_ = nullptr;
  ropecheck_rope_apply_fn rope_ = nullptr;
  ropecheck_rope_cos_sin_fn table_ = nullptr;
  std::vector<double> inv_, ext_;
  ropecheck_rope_params params_{};
  int streams_ = 1;
  std::vector<std::int64_t> pos_;
  std::vector<unsigned char> buf_;
};

}  // namespace

bool Candidate::angle_row(std::int64_t, std::span<double>) const { return false; }
bool Candidate::trig_row(std::int64_t, std::span<float>, std::span<float>) const { return false; }

std::string recipe_names() {
  std::string s;
  for (const kernels::RecipeInfo& r : kernels::recipes()) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

std::unique_ptr<Candidate> make_candidate(std::string_view name, const EncodingSpec& spec, const ExactRope& exact,
                                          DType storage, std::int64_t seq_len) {
  constexpr std::string_view kPlugin = "plugin:";
  if (name.starts_with(kPlugin)) {
    const std::string_view path = name.substr(kPlugin.size());
    if (path.empty()) throw SpecError("'plugin:' needs a library path (plugin:PATH.so)");
    return std::make_unique<PluginCandidate>(std::filesystem::path(path), spec, exact, storage, seq_len);
  }
  const std::optional<kernels::Recipe> r = kernels::parse_recipe(name);
  if (!r) throw SpecError("unknown recipe '" + std::string(name) + "' (known: " + recipe_names() + ", or plugin:PATH.so)");
  return std::make_unique<RecipeCandidate>(kernels::recipe_info(*r), spec, storage, seq_len);
}

}  // namespace ropecheck::drift
