// GPU smoke test: runs a tiny RoPE rotation on the device and compares it with the host.
// Exits 77 (ctest: skipped) with a message when no CUDA device is present, as in CI.
#include <cmath>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

namespace {

__global__ void rotate_pairs(const float* x, float* y, int pairs, float angle_step) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= pairs) return;
  float s, c;
  sincosf(angle_step * static_cast<float>(j), &s, &c);
  const float a = x[2 * j], b = x[2 * j + 1];
  y[2 * j] = a * c - b * s;
  y[2 * j + 1] = b * c + a * s;
}

}  // namespace

int main() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device available (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  const int pairs = 64;
  std::vector<float> x(2 * pairs), y(2 * pairs);
  for (int i = 0; i < 2 * pairs; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
  float *dx = nullptr, *dy = nullptr;
  if (cudaMalloc(&dx, x.size() * sizeof(float)) != cudaSuccess || cudaMalloc(&dy, y.size() * sizeof(float)) != cudaSuccess) {
    std::printf("FAILED: cudaMalloc\n");
    return 1;
  }
  cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  rotate_pairs<<<1, 64>>>(dx, dy, pairs, 0.25f);
  cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  if (cudaGetLastError() != cudaSuccess) {
    std::printf("FAILED: kernel launch\n");
    return 1;
  }
  // CUDA sincosf is within 2 ulp (precision.md 1.1); |a|, |b| <= 3 and the angles are small,
  // so 1e-5 absolute bounds 2 ulp of each product plus the final rounding.
  double worst = 0;
  for (int j = 0; j < pairs; ++j) {
    const double ang = 0.25 * j, a = x[2 * j], b = x[2 * j + 1];
    worst = std::fmax(worst, std::fabs(y[2 * j] - (a * std::cos(ang) - b * std::sin(ang))));
    worst = std::fmax(worst, std::fabs(y[2 * j + 1] - (b * std::cos(ang) + a * std::sin(ang))));
  }
  std::printf("%s: max abs error %.3g over %d pairs\n", worst <= 1e-5 ? "PASSED" : "FAILED", worst, pairs);
  return worst <= 1e-5 ? 0 : 1;
}
