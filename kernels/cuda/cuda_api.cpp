// The host side of cuda_kernels.hpp (compiled by the C++ compiler, C++20): argument checks with the
// CPU kernels' rules and messages, the upload of a RopePlan, the choice of table dtype and device
// recipe, then the launchers in the .cu files (launch.hpp). The emulation entry points
// (emulation.hpp) share all of it, with host memory and the kernels' code run on the host.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "emulation.hpp"
#include "launch.hpp"
#include "ropecheck/kernels/cuda_kernels.hpp"
#include "ropecheck/kernels/scalar_recipes.hpp"
#include "ropecheck/formulas/sinusoidal.hpp"

namespace ropecheck::kernels {

namespace cd = cuda_detail;

// The device code numbers dtypes and recipes as the host enums do.
static_assert(static_cast<int>(DType::f64) == static_cast<int>(cd::DT::f64) &&
              static_cast<int>(DType::f32) == static_cast<int>(cd::DT::f32) &&
              static_cast<int>(DType::f16) == static_cast<int>(cd::DT::f16) &&
              static_cast<int>(DType::bf16) == static_cast<int>(cd::DT::bf16));
static_assert(static_cast<int>(Recipe::accurate) == static_cast<int>(cd::RC::accurate) &&
              static_cast<int>(Recipe::hf) == static_cast<int>(cd::RC::hf) &&
              static_cast<int>(Recipe::meta) == static_cast<int>(cd::RC::meta) &&
              static_cast<int>(Recipe::ggml) == static_cast<int>(cd::RC::ggml) &&
              static_cast<int>(Recipe::bf16_table) == static_cast<int>(cd::RC::bf16_table) &&
              static_cast<int>(Recipe::f16_table) == static_cast<int>(cd::RC::f16_table) &&
              static_cast<int>(Recipe::bf16_inv_freq) == static_cast<int>(cd::RC::bf16_inv_freq) &&
              static_cast<int>(Recipe::f16_inv_freq) == static_cast<int>(cd::RC::f16_inv_freq) &&
              static_cast<int>(Recipe::bf16_positions) == static_cast<int>(cd::RC::bf16_positions) &&
              static_cast<int>(Recipe::f16_positions) == static_cast<int>(cd::RC::f16_positions) &&
              static_cast<int>(Recipe::fast_sincos) == static_cast<int>(cd::RC::fast_sincos));

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("ropecheck::kernels (CUDA): " + what); }

void require_device() {
  std::string reason;
  if (!cd::device_available(&reason)) throw std::runtime_error("ropecheck::kernels (CUDA): no CUDA device: " + reason);
}

// Where a call runs: on the device (on `stream`), or emulated on the host (host memory throughout).
struct Exec {
  void* stream = nullptr;
  bool emulate = false;
};

cd::DT dt(DType t) { return static_cast<cd::DT>(static_cast<int>(t)); }

std::int64_t dtype_size(DType t) { return t == DType::f64 ? 8 : (t == DType::f32 ? 4 : 2); }

// The device computation of a recipe for a table dtype: accurate with binary64 tables is its own path.
cd::RC device_recipe(Recipe r, DType table) {
  if (r == Recipe::accurate && table == DType::f64) return cd::RC::accurate_f64;
  return static_cast<cd::RC>(static_cast<int>(r));
}

void require_device_memory(const Exec& x, const void* p, const std::string& name) {
  if (!x.emulate && !cd::device_accessible(p))
    fail(name + " is not device memory (pass cudaMalloc'd, managed or mapped pinned memory)");
}

void check_positions(const Exec& x, const PositionsView& p, std::int64_t tokens) {
  if (p.streams != 1 && p.streams != 3) fail("positions.streams must be 1 or 3, got " + std::to_string(p.streams));
  if (p.tokens != tokens)
    fail("positions.tokens (" + std::to_string(p.tokens) + ") != tensor tokens (" + std::to_string(tokens) + ")");
  if (p.tokens < 0) fail("positions.tokens is negative");
  if (p.token_stride < 0 || (p.streams == 3 && p.stream_stride < 0)) fail("positions strides must be >= 0");
  if (p.tokens > 0) {
    if (p.data == nullptr) fail("positions.data is null");
    require_device_memory(x, p.data, "positions.data");
  }
}

cd::PosArgs pos_args(const PositionsView& p) {
  cd::PosArgs a;
  a.data = p.data;
  a.is_int64 = p.is_int64;
  a.streams = p.streams;
  a.token_stride = p.token_stride;
  a.stream_stride = p.stream_stride;
  return a;
}

// Byte range [lo, hi) a view touches (empty when any extent is 0).
std::pair<const unsigned char*, const unsigned char*> extent(const TensorView& v) {
  const auto* base = static_cast<const unsigned char*>(v.data);
  if (v.tokens == 0 || v.heads == 0 || v.head_dim == 0) return {base, base};
  const std::int64_t last =
      (v.tokens - 1) * v.stride_token + (v.heads - 1) * v.stride_head + (v.head_dim - 1) * v.stride_dim;
  return {base, base + (last + 1) * dtype_size(v.dtype)};
}

// The CPU's rules (kernels/src/rope_kernels.cpp check_pair), plus device memory.
void check_pair(const Exec& x, const char* name, const RopePlan& plan, const TensorView& in, const TensorView& out) {
  const std::string n(name);
  if (in.data == nullptr) fail(n + "_in.data is null");
  if (out.data == nullptr) fail(n + "_out.data is null");
  if (in.head_dim != plan.head_dim)
    fail(n + "_in.head_dim (" + std::to_string(in.head_dim) + ") != spec head_dim (" + std::to_string(plan.head_dim) +
         ")");
  if (in.tokens < 0 || in.heads < 0) fail(n + "_in has a negative extent");
  if (out.tokens != in.tokens || out.heads != in.heads || out.head_dim != in.head_dim)
    fail(n + "_out shape differs from " + n + "_in shape");
  for (const TensorView* v : {&in, &out})
    if (v->stride_token < 0 || v->stride_head < 0 || v->stride_dim < 0) fail(n + " strides must be >= 0");
  const bool same = in.data == out.data && in.dtype == out.dtype && in.stride_token == out.stride_token &&
                    in.stride_head == out.stride_head && in.stride_dim == out.stride_dim;
  if (!same) {
    const auto [a0, a1] = extent(in);
    const auto [b0, b1] = extent(out);
    if (a0 < b1 && b0 < a1) fail(n + "_out partially overlaps " + n + "_in (in place needs the same view)");
  }
  require_device_memory(x, in.data, n + "_in.data");
  if (out.data != in.data) require_device_memory(x, out.data, n + "_out.data");
}

cd::TensorArgs tensor_args(const TensorView& in, const TensorView& out) {
  cd::TensorArgs t;
  t.in = in.data;
  t.out = out.data;
  t.in_dt = dt(in.dtype);
  t.out_dt = dt(out.dtype);
  t.heads = in.heads;
  t.in_tok = in.stride_token;
  t.in_head = in.stride_head;
  t.in_dim = in.stride_dim;
  t.out_tok = out.stride_token;
  t.out_head = out.stride_head;
  t.out_dim = out.stride_dim;
  return t;
}

std::size_t align_up(std::size_t n, std::size_t align) { return (n + align - 1) / align * align; }

// The plan's checks (CudaRopePlan's constructor documents them).
void check_plan(const RopePlan& plan) {
  const int P = plan.pairs;
  const auto sz = static_cast<std::size_t>(P);
  if (P <= 0) fail("the plan has no pairs (make it with make_rope_plan)");
  if (plan.spec.rotary_offset < 0 || plan.head_dim < 2 * P + plan.spec.rotary_offset)
    fail("the plan's head_dim is smaller than rotary_offset + 2 * pairs");
  // Shared memory holds two binary64 values per pair and token (48 KiB per block).
  if (plan.head_dim > 6144) fail("head_dim " + std::to_string(plan.head_dim) + " is above the CUDA kernels' 6144");
  auto need = [&](std::size_t n, const char* what) {
    if (n != sz)
      fail(std::string("the plan is not made by make_rope_plan (") + what + " has " + std::to_string(n) +
           " values for " + std::to_string(P) + " pairs)");
  };
  need(plan.inv_freq_f32.size(), "inv_freq_f32");
  need(plan.inv_freq_f64.size(), "inv_freq_f64");
  need(plan.ggml_divisor.size(), "ggml_divisor");
  need(plan.stream.size(), "stream");
  for (std::uint8_t s : plan.stream)
    if (s > 2) fail("the plan's stream values must be 0, 1 or 2, got " + std::to_string(s));
}

// The scalars of PlanArgs; the array pointers are the caller's (device copies or the host vectors).
cd::PlanArgs plan_scalars(const RopePlan& plan) {
  cd::PlanArgs a;
  a.ggml_theta_scale = plan.ggml_theta_scale;
  a.att_f32 = plan.attention_factor_f32;
  a.att_f64 = plan.attention_factor_f64;
  a.pairs = plan.pairs;
  a.head_dim = plan.head_dim;
  a.rotary_offset = plan.spec.rotary_offset;
  a.interleaved = plan.interleaved;
  a.multistream = std::any_of(plan.stream.begin(), plan.stream.end(), [](std::uint8_t s) { return s != 0; });
  return a;
}

cd::PlanArgs host_plan_args(const RopePlan& plan) {
  cd::PlanArgs a = plan_scalars(plan);
  a.inv_f32 = plan.inv_freq_f32.data();
  a.inv_f64 = plan.inv_freq_f64.data();
  a.ggml_div = plan.ggml_divisor.data();
  a.stream = plan.stream.data();
  return a;
}

// ---- the three calls, on the device or emulated -------------------------------------------------------

void apply(const RopePlan& hp, const cd::PlanArgs& pa, const Exec& x, const PositionsView& positions,
           const TensorView& q_in, const TensorView& q_out, const TensorView& k_in, const TensorView& k_out) {
  check_pair(x, "q", hp, q_in, q_out);
  const bool has_k = k_in.data != nullptr || k_out.data != nullptr;
  if (has_k) {
    check_pair(x, "k", hp, k_in, k_out);
    if (k_in.tokens != q_in.tokens) fail("k tokens differ from q tokens");
  }
  check_positions(x, positions, q_in.tokens);
  if (q_in.tokens == 0) return;

  cd::ApplyArgs a;
  a.plan = pa;
  a.pos = pos_args(positions);
  a.tokens = q_in.tokens;
  a.stream = x.stream;
  a.emulate = x.emulate;
  const DType tq = table_dtype(hp.recipe, q_out.dtype);
  a.recipe = device_recipe(hp.recipe, tq);
  a.table_dt = dt(tq);
  a.t[0] = tensor_args(q_in, q_out);
  a.ntensors = 1;
  if (!has_k) return cd::launch_rope_apply(a);

  const DType tk = table_dtype(hp.recipe, k_out.dtype);
  const cd::TensorArgs kt = tensor_args(k_in, k_out);
  if (tk == tq) {  // one launch: cos / sin computed once for q and k
    a.t[1] = kt;
    a.ntensors = 2;
    return cd::launch_rope_apply(a);
  }
  cd::launch_rope_apply(a);  // q and k round their tables differently: one launch each
  a.recipe = device_recipe(hp.recipe, tk);
  a.table_dt = dt(tk);
  a.t[0] = kt;
  cd::launch_rope_apply(a);
}

void cos_sin_table(const RopePlan& hp, const cd::PlanArgs& pa, const Exec& x, const PositionsView& positions,
                   void* cos_out, void* sin_out, DType dtype) {
  check_positions(x, positions, positions.tokens);
  if (positions.tokens == 0) return;
  if (cos_out == nullptr || sin_out == nullptr) fail("cos_out / sin_out is null");
  require_device_memory(x, cos_out, "cos_out");
  require_device_memory(x, sin_out, "sin_out");
  cd::TableArgs a;
  a.plan = pa;
  a.pos = pos_args(positions);
  a.tokens = positions.tokens;
  a.cos_out = cos_out;
  a.sin_out = sin_out;
  a.out_dt = dt(dtype);
  const DType table = table_dtype(hp.recipe, dtype);
  a.table_dt = dt(table);
  a.recipe = device_recipe(hp.recipe, table);
  a.stream = x.stream;
  a.emulate = x.emulate;
  cd::launch_rope_table(a);
}

void sinusoidal(const SinusoidalSpec& spec, Recipe recipe, const Exec& x, const PositionsView& positions, void* out,
                DType dtype) {
  EncodingSpec e;
  e.family = Family::sinusoidal;
  e.sinusoidal = spec;
  validate(e);  // throws SpecError naming the key
  if (positions.streams != 1) fail("sinusoidal positions have one stream, got " + std::to_string(positions.streams));
  check_positions(x, positions, positions.tokens);
  if (positions.tokens == 0) return;
  if (out == nullptr) fail("out is null");
  require_device_memory(x, out, "out");
  if (spec.d_model >= (1 << 24)) fail("d_model must be below 2^24 for the CUDA kernels");

  // Frequencies and columns as the CPU's sinusoidal_table forms them (kernels/src/rope_kernels.cpp).
  const std::vector<double> w64 = sinusoidal_frequencies<double>(spec);
  std::vector<float> w32 = hf_sinusoidal_frequencies_f32(spec);
  if (recipe == Recipe::bf16_inv_freq)
    for (float& w : w32) w = round_to_dtype(w, DType::bf16);
  if (recipe == Recipe::f16_inv_freq)
    for (float& w : w32) w = round_to_dtype(w, DType::f16);
  std::vector<std::int32_t> cols(static_cast<std::size_t>(spec.d_model));
  for (int c = 0; c < spec.d_model; ++c) {
    const SinusoidalColumn col = sinusoidal_column(spec, c);
    const int kind = col.kind == SinusoidalKind::zero ? 0 : (col.kind == SinusoidalKind::sine ? 1 : 2);
    cols[static_cast<std::size_t>(c)] = (kind << 24) | col.frequency;
  }
  const std::size_t n = w64.size(), o_f32 = align_up(8 * n, 16), o_cols = o_f32 + align_up(4 * n, 16),
                    total = o_cols + 4 * cols.size();
  std::vector<unsigned char> staging(total + 16, 0);
  std::memcpy(staging.data(), w64.data(), 8 * n);
  std::memcpy(staging.data() + o_f32, w32.data(), 4 * n);
  std::memcpy(staging.data() + o_cols, cols.data(), 4 * cols.size());

  cd::SinusoidalArgs a;
  a.d_model = spec.d_model;
  a.position_offset = spec.position_offset;
  a.pos = pos_args(positions);
  a.tokens = positions.tokens;
  a.out = out;
  a.out_dt = dt(dtype);
  const DType table = table_dtype(recipe, dtype);
  a.table_dt = dt(table);
  a.recipe = device_recipe(recipe, table);
  a.stream = x.stream;
  a.emulate = x.emulate;
  auto point = [&](unsigned char* mem) {
    a.w_f64 = reinterpret_cast<const double*>(mem);
    a.w_f32 = reinterpret_cast<const float*>(mem + o_f32);
    a.columns = reinterpret_cast<const std::int32_t*>(mem + o_cols);
  };
  if (x.emulate) {  // std::vector's storage is aligned for double
    std::vector<double> host(staging.size() / sizeof(double) + 1);
    std::memcpy(host.data(), staging.data(), total);
    point(reinterpret_cast<unsigned char*>(host.data()));
    return cd::launch_sinusoidal(a);
  }
  // Stream-ordered scratch: freed after the kernel without blocking the host.
  auto* mem = static_cast<unsigned char*>(cd::device_malloc_async(total, x.stream));
  try {
    cd::copy_to_device_async(mem, staging.data(), total, x.stream);
    point(mem);
    cd::launch_sinusoidal(a);
  } catch (...) {
    cd::device_free_async(mem, x.stream);
    throw;
  }
  cd::device_free_async(mem, x.stream);
}

}  // namespace

// ---- runtime ---------------------------------------------------------------------------------------

bool cuda_device_available(std::string* reason) { return cd::device_available(reason); }

std::string cuda_device_description() {
  require_device();
  return cd::device_description();
}

void cuda_synchronize(void* stream) { cd::synchronize(stream); }

CudaBuffer::CudaBuffer(std::size_t bytes) : data_(cd::device_malloc(bytes)), bytes_(bytes) {}
CudaBuffer::~CudaBuffer() { cd::device_free(data_); }
CudaBuffer::CudaBuffer(CudaBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
CudaBuffer& CudaBuffer::operator=(CudaBuffer&& o) noexcept {
  if (this != &o) {
    cd::device_free(data_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void CudaBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_)
    fail("upload of " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  cd::copy_to_device(data_, host, bytes);
}

void CudaBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_)
    fail("download of " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  cd::copy_to_host(host, data_, bytes);
}

// ---- the plan --------------------------------------------------------------------------------------

struct CudaRopePlan::Device {
  RopePlan host;
  CudaBuffer memory;  // inv_f64 | inv_f32 | ggml_div | stream, each 16-byte aligned
  cd::PlanArgs args;
};

CudaRopePlan::CudaRopePlan(const RopePlan& plan) : device_(std::make_unique<Device>()) {
  check_plan(plan);
  require_device();
  const auto sz = static_cast<std::size_t>(plan.pairs);
  const std::size_t o_f32 = align_up(8 * sz, 16), o_div = o_f32 + align_up(4 * sz, 16),
                    o_stream = o_div + align_up(4 * sz, 16), total = o_stream + align_up(sz, 16);
  std::vector<unsigned char> staging(total, 0);
  std::memcpy(staging.data(), plan.inv_freq_f64.data(), 8 * sz);
  std::memcpy(staging.data() + o_f32, plan.inv_freq_f32.data(), 4 * sz);
  std::memcpy(staging.data() + o_div, plan.ggml_divisor.data(), 4 * sz);
  std::memcpy(staging.data() + o_stream, plan.stream.data(), sz);

  Device& d = *device_;
  d.host = plan;
  d.memory = CudaBuffer(total);
  d.memory.upload(staging.data(), total);
  auto* base = static_cast<unsigned char*>(d.memory.data());
  d.args = plan_scalars(plan);
  d.args.inv_f64 = reinterpret_cast<const double*>(base);
  d.args.inv_f32 = reinterpret_cast<const float*>(base + o_f32);
  d.args.ggml_div = reinterpret_cast<const float*>(base + o_div);
  d.args.stream = base + o_stream;
}

CudaRopePlan::~CudaRopePlan() = default;
CudaRopePlan::CudaRopePlan(CudaRopePlan&&) noexcept = default;
CudaRopePlan& CudaRopePlan::operator=(CudaRopePlan&&) noexcept = default;

const RopePlan& CudaRopePlan::host_plan() const { return device_->host; }

// ---- kernels ---------------------------------------------------------------------------------------

void cuda_rope_apply(const CudaRopePlan& plan, const PositionsView& positions, const TensorView& q_in,
                     const TensorView& q_out, const TensorView& k_in, const TensorView& k_out,
                     const CudaOptions& opts) {
  apply(plan.host_plan(), plan.device().args, Exec{opts.stream, false}, positions, q_in, q_out, k_in, k_out);
}

void cuda_rope_cos_sin_table(const CudaRopePlan& plan, const PositionsView& positions, void* cos_out, void* sin_out,
                             DType dtype, const CudaOptions& opts) {
  cos_sin_table(plan.host_plan(), plan.device().args, Exec{opts.stream, false}, positions, cos_out, sin_out, dtype);
}

void cuda_sinusoidal_table(const SinusoidalSpec& spec, Recipe recipe, const PositionsView& positions, void* out,
                           DType dtype, const CudaOptions& opts) {
  sinusoidal(spec, recipe, Exec{opts.stream, false}, positions, out, dtype);
}

// ---- emulation (emulation.hpp) ---------------------------------------------------------------------------

namespace cuda_detail {

void emulate_rope_apply(const RopePlan& plan, const PositionsView& positions, const TensorView& q_in,
                        const TensorView& q_out, const TensorView& k_in, const TensorView& k_out) {
  check_plan(plan);
  apply(plan, host_plan_args(plan), Exec{nullptr, true}, positions, q_in, q_out, k_in, k_out);
}

void emulate_rope_cos_sin_table(const RopePlan& plan, const PositionsView& positions, void* cos_out, void* sin_out,
                                DType dtype) {
  check_plan(plan);
  cos_sin_table(plan, host_plan_args(plan), Exec{nullptr, true}, positions, cos_out, sin_out, dtype);
}

void emulate_sinusoidal_table(const SinusoidalSpec& spec, Recipe recipe, const PositionsView& positions, void* out,
                              DType dtype) {
  sinusoidal(spec, recipe, Exec{nullptr, true}, positions, out, dtype);
}

}  // namespace cuda_detail

}  // namespace ropecheck::kernels
