// RMSNorm: out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], one block per row.
#include <cuda_runtime.h>

#include <cmath>

#include "ninfer/ninfer.hpp"

namespace ninfer {

namespace {

constexpr int kThreads = 128;

__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                               float* __restrict__ out, int n, float eps) {
  __shared__ float partial[kThreads];
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += x[i] * x[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float scale = rsqrtf(partial[0] / static_cast<float>(n) + eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = x[i] * scale * weight[i];
}

struct DeviceBuffer {
  float* ptr = nullptr;
  ~DeviceBuffer() { if (ptr != nullptr) cudaFree(ptr); }
};

}  // namespace

std::string rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, float eps,
                    std::vector<float>& out) {
  const int n = static_cast<int>(x.size());
  const size_t bytes = x.size() * sizeof(float);
  DeviceBuffer dx, dw, dout;
  cudaError_t status = cudaMalloc(&dx.ptr, bytes);
  if (status == cudaSuccess) status = cudaMalloc(&dw.ptr, bytes);
  if (status == cudaSuccess) status = cudaMalloc(&dout.ptr, bytes);
  if (status == cudaSuccess) status = cudaMemcpy(dx.ptr, x.data(), bytes, cudaMemcpyHostToDevice);
  if (status == cudaSuccess)
    status = cudaMemcpy(dw.ptr, weight.data(), bytes, cudaMemcpyHostToDevice);
  if (status == cudaSuccess) {
    rmsnorm_kernel<<<1, kThreads>>>(dx.ptr, dw.ptr, dout.ptr, n, eps);
    status = cudaGetLastError();
  }
  if (status == cudaSuccess) {
    out.resize(x.size());
    status = cudaMemcpy(out.data(), dout.ptr, bytes, cudaMemcpyDeviceToHost);
  }
  return status == cudaSuccess ? std::string() : std::string(cudaGetErrorString(status));
}

std::vector<float> rmsnorm_reference(const std::vector<float>& x,
                                     const std::vector<float>& weight, float eps) {
  double sum = 0.0;
  for (const float v : x) sum += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<float>(x[i] * scale * weight[i]);
  return out;
}

}  // namespace ninfer
