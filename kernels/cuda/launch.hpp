// The boundary between the host API (cuda_api.cpp, C++20, knows RopePlan and the spec types) and
// the device code (*.cu, compiled by nvcc in C++17, which cannot parse the reference's C++20
// headers). Only plain structs and functions here: no CUDA types, no Boost, no spec types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ropecheck::kernels::cuda_detail {

// Storage formats, numbered as ropecheck::DType (cuda_api.cpp static_asserts the match).
enum class DT : int { f64 = 0, f32 = 1, f16 = 2, bf16 = 3 };

// The recipes, numbered as ropecheck::kernels::Recipe, plus the accurate recipe's binary64 path
// (f64 storage), which is a different computation on the device.
enum class RC : int {
  accurate = 0,
  hf,
  meta,
  ggml,
  bf16_table,
  f16_table,
  bf16_inv_freq,
  f16_inv_freq,
  bf16_positions,
  f16_positions,
  fast_sincos,
  accurate_f64,
};
inline constexpr int kRecipeCount = 12;

// A RopePlan's numbers, uploaded (CudaRopePlan owns the memory).
struct PlanArgs {
  const float* inv_f32 = nullptr;       // [pairs]
  const double* inv_f64 = nullptr;      // [pairs]
  const float* ggml_div = nullptr;      // [pairs]
  const std::uint8_t* stream = nullptr; // [pairs], 0 t, 1 h, 2 w
  float ggml_theta_scale = 1.0f;
  float att_f32 = 1.0f;
  double att_f64 = 1.0;
  int pairs = 0;
  int head_dim = 0;
  int rotary_offset = 0;  // first channel of the rotary block (MLA's q_pe at 128); the rest pass through
  bool interleaved = false;
  bool multistream = false;  // some pair is driven by the h or w stream
};

struct PosArgs {
  const void* data = nullptr;
  bool is_int64 = true;
  int streams = 1;
  std::int64_t token_stride = 1, stream_stride = 0;
};

struct TensorArgs {
  const void* in = nullptr;
  void* out = nullptr;
  DT in_dt = DT::f32, out_dt = DT::f32;
  std::int64_t heads = 0;
  std::int64_t in_tok = 0, in_head = 0, in_dim = 1;
  std::int64_t out_tok = 0, out_head = 0, out_dim = 1;
};

struct ApplyArgs {
  PlanArgs plan;
  PosArgs pos;
  std::int64_t tokens = 0;
  TensorArgs t[2];
  int ntensors = 1;
  RC recipe = RC::accurate;
  // The dtype cos / sin are rounded to and the rotation runs in: table_dtype(recipe, out dtype),
  // the same for every tensor of one launch (the host launches q and k apart when they differ).
  DT table_dt = DT::f32;
  void* stream = nullptr;
  bool emulate = false;  // run the kernels' code on the host (emulation.hpp): every pointer is host memory
};
void launch_rope_apply(const ApplyArgs& a);

struct TableArgs {
  PlanArgs plan;
  PosArgs pos;
  std::int64_t tokens = 0;
  void* cos_out = nullptr;
  void* sin_out = nullptr;
  DT out_dt = DT::f32;
  DT table_dt = DT::f32;
  RC recipe = RC::accurate;
  void* stream = nullptr;
  bool emulate = false;
};
void launch_rope_table(const TableArgs& a);

// Sinusoidal rows. Columns are described per column by the host (sinusoidal_column): kind 0 zero,
// 1 sine, 2 cosine, and the frequency index.
struct SinusoidalArgs {
  const float* w_f32 = nullptr;          // [frequencies] as the recipe holds them
  const double* w_f64 = nullptr;         // [frequencies] (accurate)
  const std::int32_t* columns = nullptr; // [d_model]: kind << 24 | frequency
  int d_model = 0;
  std::int64_t position_offset = 0;
  PosArgs pos;
  std::int64_t tokens = 0;
  void* out = nullptr;
  DT out_dt = DT::f32;
  DT table_dt = DT::f32;
  RC recipe = RC::accurate;
  void* stream = nullptr;
  bool emulate = false;
};
void launch_sinusoidal(const SinusoidalArgs& a);

// ---- the fused recipes' stages (fused.cu, fused.cuh); contiguous row-major buffers ---------------------

// Q/K RMSNorm: in [rows][head_dim] (dtype in_dt) to out [rows][head_dim] binary32.
struct NormArgs {
  const void* in = nullptr;
  DT in_dt = DT::f32;
  float* out = nullptr;
  const float* weight = nullptr;  // [head_dim]: w, each a bf16 value held in binary32
  bool one_plus = false;          // the factor is 1 + w
  float eps = 0.0f;
  std::int64_t rows = 0;
  int head_dim = 0;
  void* stream = nullptr;
  bool emulate = false;
};
void launch_rms_norm(const NormArgs& a);

// FP8 store of x [groups][group] binary32: one data-derived scale per group (one block per group).
struct Fp8StoreArgs {
  const float* x = nullptr;
  std::uint8_t* codes = nullptr;  // [groups][group]
  float* scales = nullptr;        // [groups]
  std::int64_t groups = 0;
  int group = 0;
  bool e5m2 = false, saturate = true;
  void* stream = nullptr;
  bool emulate = false;
};
void launch_fp8_store(const Fp8StoreArgs& a);

// GGML q8_0 / q4_0 blocks of x [blocks][32] binary32: 34 / 18 bytes each.
struct GgmlStoreArgs {
  const float* x = nullptr;
  std::uint8_t* out = nullptr;
  std::int64_t blocks = 0;
  bool q4_0 = false;
  void* stream = nullptr;
  bool emulate = false;
};
void launch_ggml_store(const GgmlStoreArgs& a);

// Rotated k [tokens][heads][head_dim] (dtype dt) and v (binary32, optional) written to their slots of a
// paged (NHD / HND) or slot-mapped cache of dtype dt; slot < 0: not written.
struct CacheAppendArgs {
  const void* k_rot = nullptr;
  const float* v = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  DT dt = DT::f32;
  const std::int64_t* slots = nullptr;  // [tokens]
  std::int64_t tokens = 0, heads = 0, page_size = 1;
  int head_dim = 0;
  bool hnd = false;
  void* stream = nullptr;
  bool emulate = false;
};
void launch_cache_append(const CacheAppendArgs& a);

// ---- runtime (runtime.cu): every call checked, std::runtime_error naming the call -------------
bool device_available(std::string* reason) noexcept;
std::string device_description();
void synchronize(void* stream);
void* device_malloc(std::size_t bytes);
void device_free(void* p) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
// Stream-ordered: the memory stays valid for every launch queued on `stream` before the free.
void* device_malloc_async(std::size_t bytes, void* stream);
void device_free_async(void* p, void* stream);
void copy_to_device_async(void* dst, const void* src, std::size_t bytes, void* stream);
// True when the device can dereference p (device, managed or mapped host memory).
bool device_accessible(const void* p);

}  // namespace ropecheck::kernels::cuda_detail
