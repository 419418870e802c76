#include "ropecheck/golden/plugin.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <system_error>

#include "ropecheck/kernel_abi.h"
#include "ropecheck/reference/rope_reference.hpp"
#include "ropecheck/reference/rounding.hpp"
#include "ropecheck/reference/scalar.hpp"
#include "tensor_io_detail.hpp"

namespace ropecheck::golden {

namespace {

// The ABI's fixed layouts (x86-64 / AArch64 LP64): a change here is an ABI change.
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_params) == 152, "kernel ABI v1: ropecheck_rope_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_rope_problem) == 232, "kernel ABI v1: ropecheck_rope_problem layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_table_problem) == 224, "kernel ABI v1: ropecheck_table_problem layout changed");
static_assert(sizeof(ropecheck_sinusoidal_params) == 32, "kernel ABI v1: ropecheck_sinusoidal_params layout changed");
static_assert(sizeof(void*) != 8 || sizeof(ropecheck_sinusoidal_problem) == 88, "kernel ABI v1: ropecheck_sinusoidal_problem layout changed");

constexpr std::size_t kGuardBytes = 64;
constexpr std::uint8_t kGuardByte = 0xA5;
constexpr std::uint32_t kMessageCapacity = 512;

std::string where_of(const std::filesystem::path& p) { return "kernel library " + detail::sanitize(p.string()); }

std::string dl_error() {
  const char* e = ::dlerror();
  return e ? detail::sanitize(e, 400) : std::string("unknown dlopen error");
}

}  // namespace

struct KernelPlugin::State {
  std::filesystem::path path;
  void* handle = nullptr;
  std::string name;
  std::uint32_t abi_version = 0;
  ropecheck_rope_apply_fn rope_apply = nullptr;
  ropecheck_rope_cos_sin_fn rope_cos_sin = nullptr;
  ropecheck_sinusoidal_fn sinusoidal = nullptr;

  ~State() {
    if (handle) ::dlclose(handle);
  }
};

KernelPlugin::KernelPlugin() = default;
KernelPlugin::~KernelPlugin() = default;
KernelPlugin::KernelPlugin(KernelPlugin&&) noexcept = default;
KernelPlugin& KernelPlugin::operator=(KernelPlugin&&) noexcept = default;

const std::filesystem::path& KernelPlugin::path() const { return s_->path; }
const std::string& KernelPlugin::name() const { return s_->name; }
std::uint32_t KernelPlugin::abi_version() const { return s_->abi_version; }
bool KernelPlugin::has_rope_apply() const { return s_->rope_apply != nullptr; }
bool KernelPlugin::has_rope_cos_sin() const { return s_->rope_cos_sin != nullptr; }
bool KernelPlugin::has_sinusoidal() const { return s_->sinusoidal != nullptr; }

KernelPlugin load_kernel_plugin(const std::filesystem::path& library) {
  const std::string where = where_of(library);
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(library, ec);
  if (ec || !std::filesystem::exists(st)) detail::fail(where, "no such file");
  if (!std::filesystem::is_regular_file(st)) detail::fail(where, "not a regular file");
  // An absolute path, so that dlopen never searches LD_LIBRARY_PATH or the system folders for a
  // bare name: the library checked is the file named.
  const std::filesystem::path abs = std::filesystem::absolute(library, ec);
  if (ec) detail::fail(where, "cannot resolve the path: " + ec.message());

  auto state = std::make_unique<KernelPlugin::State>();
  state->path = library;
  ::dlerror();
  state->handle = ::dlopen(abs.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!state->handle) detail::fail(where, "cannot load it as a shared library: " + dl_error());

  auto symbol = [&](const char* name) -> void* {
    ::dlerror();
    void* p = ::dlsym(state->handle, name);
    return ::dlerror() ? nullptr : p;
  };
  auto required = [&](const char* name) -> void* {
    void* p = symbol(name);
    if (!p)
      detail::fail(where, std::string("not a ropecheck kernel: it does not export ") + name +
                              " (see golden/KERNEL_ABI.md)");
    return p;
  };
  const auto version_fn = reinterpret_cast<ropecheck_kernel_abi_version_fn>(required("ropecheck_kernel_abi_version"));
  const auto name_fn = reinterpret_cast<ropecheck_kernel_name_fn>(required("ropecheck_kernel_name"));
  state->abi_version = version_fn();
  if (state->abi_version != ROPECHECK_KERNEL_ABI_VERSION)
    detail::fail(where, "kernel ABI version " + std::to_string(state->abi_version) + ", but this ropecheck speaks version " +
                            std::to_string(ROPECHECK_KERNEL_ABI_VERSION) + " only (rebuild the kernel against this kernel_abi.h)");
  const char* name = name_fn();
  if (!name) detail::fail(where, "ropecheck_kernel_name() returned NULL");
  state->name = detail::sanitize(std::string_view(name, ::strnlen(name, 256)), 128);
  if (state->name.empty()) state->name = library.filename().string();
  state->rope_apply = reinterpret_cast<ropecheck_rope_apply_fn>(symbol("ropecheck_rope_apply"));
  state->rope_cos_sin = reinterpret_cast<ropecheck_rope_cos_sin_fn>(symbol("ropecheck_rope_cos_sin"));
  state->sinusoidal = reinterpret_cast<ropecheck_sinusoidal_fn>(symbol("ropecheck_sinusoidal"));
  if (!state->rope_apply && !state->rope_cos_sin && !state->sinusoidal)
    detail::fail(where, "not a ropecheck kernel: it exports none of ropecheck_rope_apply, ropecheck_rope_cos_sin, "
                        "ropecheck_sinusoidal (see golden/KERNEL_ABI.md)");
  KernelPlugin k;
  k.s_ = std::move(state);
  return k;
}

namespace {


TensorDType tensor_dtype(DType d) {
  switch (d) {
    case DType::f64: return TensorDType::f64;
    case DType::f32: return TensorDType::f32;
    case DType::f16: return TensorDType::f16;
    case DType::bf16: return TensorDType::bf16;
  }
  return TensorDType::f64;
}



// An output buffer: `bytes` of NaN (0xFF is a NaN in all four formats) followed by guard bytes.
struct OutputBuffer {
  std::vector<std::uint8_t> bytes;
  std::size_t size = 0;

  explicit OutputBuffer(std::size_t n) : size(n) {
    bytes.assign(n + kGuardBytes, 0xFF);
    std::fill(bytes.begin() + static_cast<std::ptrdiff_t>(n), bytes.end(), kGuardByte);
  }
  void* data() { return bytes.data(); }
  bool guard_intact() const {
    return std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(size), bytes.end(),
                       [](std::uint8_t b) { return b == kGuardByte; });
  }
  Tensor take(std::string name, TensorDType dt, std::vector<std::int64_t> shape) {
    bytes.resize(size);
    Tensor t{std::move(name), dt, std::move(shape), std::move(bytes)};
    validate(t);
    return t;
  }
};

// The kernel's message: NUL-terminated within the buffer, one line, control bytes escaped.
std::string message_of(const std::array<char, kMessageCapacity>& m) {
  const std::size_t n = ::strnlen(m.data(), m.size());
  std::string_view s(m.data(), n);
  s = s.substr(0, std::min(s.find('\n'), s.size()));
  return detail::sanitize(s, 300);
}

std::string with_reason(const std::string& reason) { return reason.empty() ? "" : " (" + reason + ")"; }

// What every call shares: the spec resolved once, and the inputs.
struct Inputs {
  std::string spec_json;
  std::vector<std::int64_t> positions;  // [streams][tokens]
  std::int32_t streams = 1;
  std::int64_t tokens = 0;
  std::vector<double> inv_freq, longrope_ext;
  ropecheck_rope_params rope{};
  ropecheck_sinusoidal_params sinusoidal{};
};

Inputs resolve(const GoldenSet& g) {
  Inputs in;
  in.spec_json = g.manifest().at("spec").dump();
  in.tokens = g.tokens();
  const Tensor& pos = g.tensor("positions");
  in.streams = pos.shape.size() == 2 ? static_cast<std::int32_t>(pos.shape[0]) : 1;
  in.positions.resize(static_cast<std::size_t>(pos.numel()));
  for (std::int64_t i = 0; i < pos.numel(); ++i) in.positions[static_cast<std::size_t>(i)] = pos.int_value(i);

  const EncodingSpec& spec = g.spec();
  if (g.is_rope()) {
    const RopeSpec& r = spec.rope;
    const RopeScaling& s = r.scaling;
    {
      // Inverse frequencies: exact (MPFR, 128 bits) rounded to binary64.
      ScopedPrecision prec(kMinWorkingBits);
      const RopeFrequencies<Real> f = rope_frequencies<Real>(r, g.seq_len());
      for (const Real& w : f.inv_freq) in.inv_freq.push_back(to_f64(w));
      if (s.type == ScalingType::longrope) in.longrope_ext = f.long_factors ? s.long_factor : s.short_factor;
    }
    ropecheck_rope_params& p = in.rope;
    p = abi_rope_params(r, g.seq_len().value_or(0));
    p.longrope_ext = nullptr;  // pointers are set per call (the vectors may move)
    p.inv_freq = nullptr;
    p.attention_factor = g.attention_factor();
  } else {
    const SinusoidalSpec& s = spec.sinusoidal;
    ropecheck_sinusoidal_params& p = in.sinusoidal;
    p.d_model = s.d_model;
    p.layout = s.layout == SinusoidalLayout::concatenated ? ROPECHECK_SINUSOIDAL_CONCATENATED : ROPECHECK_SINUSOIDAL_INTERLEAVED;
    p.frequencies = s.frequencies == SinusoidalFrequencies::half_dim_minus_one ? ROPECHECK_SINUSOIDAL_HALF_DIM_MINUS_ONE
                                                                               : ROPECHECK_SINUSOIDAL_VASWANI;
    p.frequency_count = sinusoidal_frequency_count(s);
    p.base = s.base;
    p.position_offset = s.position_offset;
  }
  return in;
}

std::vector<float> f32_values(const Tensor& t) {
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(t.value(i));
  return v;
}

}  // namespace

std::int32_t abi_dtype(DType d) {
  switch (d) {
    case DType::f64: return ROPECHECK_DTYPE_F64;
    case DType::f32: return ROPECHECK_DTYPE_F32;
    case DType::f16: return ROPECHECK_DTYPE_F16;
    case DType::bf16: return ROPECHECK_DTYPE_BF16;
  }
  return -1;
}

std::int32_t abi_scaling(ScalingType t) {
  switch (t) {
    case ScalingType::none: return ROPECHECK_SCALING_NONE;
    case ScalingType::linear: return ROPECHECK_SCALING_LINEAR;
    case ScalingType::dynamic: return ROPECHECK_SCALING_DYNAMIC;
    case ScalingType::yarn: return ROPECHECK_SCALING_YARN;
    case ScalingType::llama3: return ROPECHECK_SCALING_LLAMA3;
    case ScalingType::longrope: return ROPECHECK_SCALING_LONGROPE;
    case ScalingType::proportional: return ROPECHECK_SCALING_PROPORTIONAL;
  }
  return -1;
}

std::int32_t abi_mrope(MropeMode m) {
  switch (m) {
    case MropeMode::none: return ROPECHECK_MROPE_NONE;
    case MropeMode::chunked: return ROPECHECK_MROPE_CHUNKED;
    case MropeMode::interleaved: return ROPECHECK_MROPE_INTERLEAVED;
  }
  return -1;
}

ropecheck_rope_params abi_rope_params(const RopeSpec& r, std::int64_t seq_len) {
  const RopeScaling& s = r.scaling;
  const int P = rope_pairs(r);
  ropecheck_rope_params p{};
  p.head_dim = r.head_dim;
  p.rotary_dim = r.rotary_dim;
  p.pairs = P;
  p.layout = r.layout == RopeLayout::interleaved ? ROPECHECK_LAYOUT_INTERLEAVED : ROPECHECK_LAYOUT_HALF_SPLIT;
  p.base = r.base;
  p.scaling_type = abi_scaling(s.type);
  p.mrope_mode = abi_mrope(r.mrope);
  for (std::size_t i = 0; i < 3; ++i) p.mrope_section[i] = r.mrope == MropeMode::none ? 0 : r.mrope_section[i];
  p.yarn_truncate = s.type == ScalingType::yarn ? (s.truncate ? 1 : 0) : 0;
  p.factor = s.type == ScalingType::none ? 1.0 : effective_factor(r);
  p.max_position_embeddings = r.max_position_embeddings;
  const bool has_orig = s.type == ScalingType::yarn || s.type == ScalingType::longrope || s.type == ScalingType::llama3;
  p.original_max_position_embeddings = has_orig ? effective_original_max_positions(r) : 0;
  p.seq_len = seq_len;
  const bool llama3 = s.type == ScalingType::llama3, yarn = s.type == ScalingType::yarn;
  p.low_freq_factor = llama3 ? s.low_freq_factor : 0.0;
  p.high_freq_factor = llama3 ? s.high_freq_factor : 0.0;
  p.beta_fast = yarn ? s.beta_fast : 0.0;
  p.beta_slow = yarn ? s.beta_slow : 0.0;
  p.mscale = yarn ? s.mscale.value_or(0.0) : 0.0;
  p.mscale_all_dim = yarn ? s.mscale_all_dim.value_or(0.0) : 0.0;
  p.longrope_ext = nullptr;  // pointers and the attention factor are the caller's
  p.inv_freq = nullptr;
  return p;
}

KernelRun run_kernel_plugin(const KernelPlugin& plugin, const GoldenSet& golden) {
  const KernelPlugin::State& k = *plugin.s_;
  const std::string who = "kernel '" + k.name + "' (" + detail::sanitize(k.path.string()) + ")";
  KernelRun run;
  const Inputs in = resolve(golden);
  std::vector<std::string> reasons;  // distinct UNSUPPORTED reasons, for the "no output" error
  auto unsupported = [&](const std::string& note, const std::string& reason) {
    run.notes.push_back(note + " (UNSUPPORTED" + (reason.empty() ? "" : ": " + reason) + ")");
    const std::string r = reason.empty() ? "UNSUPPORTED without a reason" : reason;
    if (std::find(reasons.begin(), reasons.end(), r) == reasons.end()) reasons.push_back(r);
  };

  std::vector<DType> dtypes;
  for (const std::string& d : golden.dtypes())
    if (const std::optional<DType> t = parse_dtype(d)) dtypes.push_back(*t);

  auto shape_of = [&](const std::string& name) {
    const ManifestTensor* m = golden.find(name);
    if (!m) throw TensorError("golden set " + detail::sanitize(golden.dir().string()) + ": no tensor " + detail::quote_name(name));
    return m->shape;
  };
  auto bytes_of = [](const std::vector<std::int64_t>& shape, DType d) {
    std::size_t n = dtype_size(tensor_dtype(d));
    for (std::int64_t e : shape) n *= static_cast<std::size_t>(e);
    return n;
  };
  auto failed = [&](const std::string& output, int code, const std::string& reason) -> TensorError {
    return TensorError(who + " failed on " + output + ": return code " + std::to_string(code) + with_reason(reason));
  };
  auto overran = [&](const std::string& output) -> TensorError {
    return TensorError(who + " wrote past the end of the " + output + " output buffer");
  };

  if (golden.is_rope()) {
    if (!k.rope_apply && !k.rope_cos_sin)
      throw TensorError(who + ": the golden set is RoPE but the kernel exports neither ropecheck_rope_apply nor "
                              "ropecheck_rope_cos_sin");
    if (!k.rope_apply) run.notes.push_back("q_rot / k_rot not checked: the kernel exports no ropecheck_rope_apply");
    if (!k.rope_cos_sin) run.notes.push_back("cos / sin not checked: the kernel exports no ropecheck_rope_cos_sin");
    const std::int32_t heads = golden.heads();
    for (DType d : dtypes) {
      const std::string dt(to_string(d));
      if (k.rope_apply) {
        bool supported = true;
        std::vector<Tensor> got;
        for (const char* input : {"q", "k"}) {
          const std::string out_name = std::string(input) + "_rot." + dt;
          const std::vector<std::int64_t> shape = shape_of(out_name);
          std::vector<float> x = f32_values(golden.tensor(input));
          std::vector<std::int64_t> positions = in.positions;
          std::vector<double> inv = in.inv_freq, ext = in.longrope_ext;
          OutputBuffer out(bytes_of(shape, d));
          std::array<char, kMessageCapacity> message{};
          ropecheck_rope_problem p{};
          p.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
          p.out_dtype = abi_dtype(d);
          p.spec_json = in.spec_json.c_str();
          p.rope = in.rope;
          p.rope.inv_freq = inv.data();
          p.rope.longrope_ext = ext.empty() ? nullptr : ext.data();
          p.input_name = input;
          p.tokens = in.tokens;
          p.heads = heads;
          p.position_streams = in.streams;
          p.positions = positions.data();
          p.x = x.data();
          p.out = out.data();
          p.message = message.data();
          p.message_capacity = kMessageCapacity;
          const int rc = k.rope_apply(&p);
          message.back() = '\0';
          if (!out.guard_intact()) throw overran(out_name);
          if (rc == ROPECHECK_UNSUPPORTED) {
            if (!got.empty())
              throw TensorError(who + " answered UNSUPPORTED for " + out_name + " after computing " + got.front().name);
            unsupported("q_rot." + dt + ", k_rot." + dt + " skipped: the kernel does not support " + dt + " output for this spec",
                        message_of(message));
            supported = false;
            break;
          }
          if (rc != ROPECHECK_OK) throw failed(out_name, rc, message_of(message));
          got.push_back(out.take(out_name, tensor_dtype(d), shape));
        }
        if (supported)
          for (Tensor& t : got) run.tensors.push_back(std::move(t));
      }
      if (k.rope_cos_sin) {
        const std::vector<std::int64_t> shape = shape_of("cos." + dt);
        std::vector<std::int64_t> positions = in.positions;
        std::vector<double> inv = in.inv_freq, ext = in.longrope_ext;
        OutputBuffer cos_out(bytes_of(shape, d)), sin_out(bytes_of(shape, d));
        std::array<char, kMessageCapacity> message{};
        ropecheck_table_problem p{};
        p.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
        p.out_dtype = abi_dtype(d);
        p.spec_json = in.spec_json.c_str();
        p.rope = in.rope;
        p.rope.inv_freq = inv.data();
        p.rope.longrope_ext = ext.empty() ? nullptr : ext.data();
        p.tokens = in.tokens;
        p.position_streams = in.streams;
        p.reserved0 = 0;
        p.positions = positions.data();
        p.cos = cos_out.data();
        p.sin = sin_out.data();
        p.message = message.data();
        p.message_capacity = kMessageCapacity;
        const int rc = k.rope_cos_sin(&p);
        message.back() = '\0';
        if (!cos_out.guard_intact()) throw overran("cos." + dt);
        if (!sin_out.guard_intact()) throw overran("sin." + dt);
        if (rc == ROPECHECK_UNSUPPORTED) {
          unsupported("cos." + dt + ", sin." + dt + " skipped: the kernel does not support " + dt + " tables for this spec",
                      message_of(message));
        } else if (rc != ROPECHECK_OK) {
          throw failed("cos." + dt + " / sin." + dt, rc, message_of(message));
        } else {
          run.tensors.push_back(cos_out.take("cos." + dt, tensor_dtype(d), shape));
          run.tensors.push_back(sin_out.take("sin." + dt, tensor_dtype(d), shape));
        }
      }
    }
  } else {
    if (!k.sinusoidal)
      throw TensorError(who + ": the golden set is sinusoidal but the kernel does not export ropecheck_sinusoidal");
    for (DType d : dtypes) {
      const std::string dt(to_string(d));
      const std::string out_name = "pe." + dt;
      const std::vector<std::int64_t> shape = shape_of(out_name);
      std::vector<std::int64_t> positions = in.positions;
      OutputBuffer out(bytes_of(shape, d));
      std::array<char, kMessageCapacity> message{};
      ropecheck_sinusoidal_problem p{};
      p.abi_version = ROPECHECK_KERNEL_ABI_VERSION;
      p.out_dtype = abi_dtype(d);
      p.spec_json = in.spec_json.c_str();
      p.sinusoidal = in.sinusoidal;
      p.tokens = in.tokens;
      p.positions = positions.data();
      p.out = out.data();
      p.message = message.data();
      p.message_capacity = kMessageCapacity;
      const int rc = k.sinusoidal(&p);
      message.back() = '\0';
      if (!out.guard_intact()) throw overran(out_name);
      if (rc == ROPECHECK_UNSUPPORTED) {
        unsupported(out_name + " skipped: the kernel does not support " + dt + " output for this spec", message_of(message));
      } else if (rc != ROPECHECK_OK) {
        throw failed(out_name, rc, message_of(message));
      } else {
        run.tensors.push_back(out.take(out_name, tensor_dtype(d), shape));
      }
    }
  }

  if (run.tensors.empty()) {
    std::string dts, why;
    for (DType d : dtypes) dts += (dts.empty() ? "" : ", ") + std::string(to_string(d));
    for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
    throw TensorError(who + " produced no output to check: it answered UNSUPPORTED for every output dtype of the golden set (" +
                      dts + "): " + why);
  }
  return run;
}

}  // namespace ropecheck::golden
