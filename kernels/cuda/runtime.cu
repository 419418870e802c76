// CUDA runtime calls behind launch.hpp: every call is checked and a failure throws
// std::runtime_error naming the call and CUDA's own message.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "check.cuh"
#include "launch.hpp"

namespace ropecheck::kernels::cuda_detail {

bool device_available(std::string* reason) noexcept {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) {
      try {
        *reason = std::string("no usable CUDA driver or device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
      } catch (...) {
      }
    }
    cudaGetLastError();  // reset the error state so that a later call does not report this failure
    return false;
  }
  if (count == 0) {
    if (reason) {
      try {
        *reason = "the CUDA driver reports 0 devices";
      } catch (...) {
      }
    }
    return false;
  }
  return true;
}

std::string device_description() {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
}

void synchronize(void* stream) {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  check(cudaGetLastError(), "a kernel queued before cudaStreamSynchronize");
}

void* device_malloc(std::size_t bytes) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void device_free(void* p) noexcept {
  if (p) cudaFree(p);  // a destructor: nothing useful to do with an error here
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (host to device)");
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes) check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (device to host)");
}

void* device_malloc_async(std::size_t bytes, void* stream) {
  void* p = nullptr;
  if (bytes == 0) return nullptr;
  check(cudaMallocAsync(&p, bytes, static_cast<cudaStream_t>(stream)), "cudaMallocAsync");
  return p;
}

void device_free_async(void* p, void* stream) {
  if (p) check(cudaFreeAsync(p, static_cast<cudaStream_t>(stream)), "cudaFreeAsync");
}

void copy_to_device_async(void* dst, const void* src, std::size_t bytes, void* stream) {
  // From pageable memory the call returns once the source has been staged: the caller may free it.
  if (bytes)
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
          "cudaMemcpyAsync (host to device)");
}

bool device_accessible(const void* p) {
  cudaPointerAttributes attr{};
  check(cudaPointerGetAttributes(&attr, p), "cudaPointerGetAttributes");
  switch (attr.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: return true;
    case cudaMemoryTypeHost: return attr.devicePointer != nullptr;  // pinned and mapped
    default: return false;                                          // plain pageable host memory
  }
}

}  // namespace ropecheck::kernels::cuda_detail
