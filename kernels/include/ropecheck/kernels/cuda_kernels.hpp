// The CUDA RoPE and sinusoidal kernels: the contract of rope_kernels.hpp on device pointers, every
// recipe of recipe.hpp with the CPU's formulas (kernels/cuda/README.md says which results are
// bit-identical to the CPU kernels and which only share an accuracy class).
//
// No CUDA type appears here, so C++ code compiled without nvcc can include this header; it links
// against ropecheck::cuda_kernels (built when CMake finds nvcc). Streams are passed as void*
// (a cudaStream_t; nullptr = the legacy default stream).
//
// Every function checks every CUDA call and throws std::runtime_error naming the call and the CUDA
// error (no device, out of memory, a failed launch), or std::invalid_argument naming the mismatch
// (shapes, dtypes, a host pointer where device memory is needed). Launches are asynchronous on the
// given stream: an error that happens while a kernel runs surfaces at the next synchronising call
// (CudaBuffer::download, cuda_synchronize).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ropecheck/kernels/recipe.hpp"
#include "ropecheck/kernels/rope_kernels.hpp"
#include "ropecheck/core/dtype.hpp"
#include "ropecheck/core/spec.hpp"

namespace ropecheck::kernels {

// True when a CUDA device can be used: the runtime finds a driver and at least one device. When it
// returns false and `reason` is not null, *reason says why ("no CUDA driver: ...", "0 devices").
// Never throws.
bool cuda_device_available(std::string* reason = nullptr);

// The current device's name and compute capability, e.g. "NVIDIA H100 80GB HBM3 (sm_90)".
// Throws std::runtime_error when no device is available.
std::string cuda_device_description();

// Waits for every launch on `stream` and throws std::runtime_error if one of them failed.
void cuda_synchronize(void* stream = nullptr);

// Device memory, RAII. Non-copyable, movable. upload / download are synchronous (cudaMemcpy).
class CudaBuffer {
 public:
  CudaBuffer() = default;
  explicit CudaBuffer(std::size_t bytes);  // throws std::runtime_error (cudaMalloc)
  ~CudaBuffer();
  CudaBuffer(CudaBuffer&& other) noexcept;
  CudaBuffer& operator=(CudaBuffer&& other) noexcept;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return bytes_; }
  // Copies `bytes` (at most size()) from host to device / device to host, at byte offset 0.
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

struct CudaOptions {
  void* stream = nullptr;  // a cudaStream_t; nullptr: the default stream
};

// A RopePlan's numbers on the device: inverse frequencies (f32 and binary64), ggml's divisors,
// the stream of every pair, the attention factor. Built once per plan (a few small uploads),
// reused for every call. Non-copyable, movable; frees its device memory when destroyed.
class CudaRopePlan {
 public:
  // Copies `plan` and uploads its arrays. Throws std::invalid_argument for a plan whose arrays do
  // not match its pair count or whose head_dim the kernels cannot hold in shared memory (above
  // 6144), std::runtime_error when no device is available.
  explicit CudaRopePlan(const RopePlan& plan);
  ~CudaRopePlan();
  CudaRopePlan(CudaRopePlan&&) noexcept;
  CudaRopePlan& operator=(CudaRopePlan&&) noexcept;
  CudaRopePlan(const CudaRopePlan&) = delete;
  CudaRopePlan& operator=(const CudaRopePlan&) = delete;

  const RopePlan& host_plan() const;

  struct Device;  // the device buffers and pointers (kernels/cuda/, not part of the interface)
  const Device& device() const { return *device_; }

 private:
  std::unique_ptr<Device> device_;
};

// rope_apply on the device. Same shapes and rules as rope_apply (rope_kernels.hpp): q and k
// [tokens, heads, head_dim] with element strides, k optional (k_in.data null), k's head count may
// differ from q's, in place (out.data == in.data with the same strides) or out of place (no partial
// overlap), dtypes f32 / f16 / bf16 / f64, in and out dtypes may differ. `positions.data` points
// to device memory (int32 or int64, 1 or 3 streams). Every data pointer must be device-accessible
// (cudaMalloc, managed or mapped pinned memory).
void cuda_rope_apply(const CudaRopePlan& plan, const PositionsView& positions, const TensorView& q_in,
                     const TensorView& q_out, const TensorView& k_in = {}, const TensorView& k_out = {},
                     const CudaOptions& opts = {});

// rope_cos_sin_table on the device: [tokens][pairs] cos / sin (no attention factor), rounded to the
// recipe's table dtype and then to `dtype`. cos_out / sin_out: device memory, tokens * pairs
// elements of dtype each.
void cuda_rope_cos_sin_table(const CudaRopePlan& plan, const PositionsView& positions, void* cos_out, void* sin_out,
                             DType dtype, const CudaOptions& opts = {});

// sinusoidal_table on the device: rows [tokens][d_model] (formulas/sinusoidal.hpp's column
// layout), the angle at position + position_offset, computed the recipe's way, rounded to dtype.
// positions: one stream, int32 or int64, device memory; out: device memory,
// positions.tokens * d_model elements of dtype.
void cuda_sinusoidal_table(const SinusoidalSpec& spec, Recipe recipe, const PositionsView& positions, void* out,
                           DType dtype, const CudaOptions& opts = {});

}  // namespace ropecheck::kernels
