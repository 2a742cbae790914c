// Greedy sampling: the index of the largest logit (lowest index wins a tie).
#include <cuda_runtime.h>

#include "ninfer/ninfer.hpp"

namespace ninfer {

namespace {

constexpr int kThreads = 128;

__global__ void argmax_kernel(const float* __restrict__ logits, int n, int* __restrict__ index) {
  __shared__ float best_value[kThreads];
  __shared__ int best_index[kThreads];
  float value = -INFINITY;
  int at = n;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (logits[i] > value) {
      value = logits[i];
      at = i;
    }
  }
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = at;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float other = best_value[threadIdx.x + stride];
      const int other_at = best_index[threadIdx.x + stride];
      if (other > best_value[threadIdx.x] ||
          (other == best_value[threadIdx.x] && other_at < best_index[threadIdx.x])) {
        best_value[threadIdx.x] = other;
        best_index[threadIdx.x] = other_at;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *index = best_index[0];
}

}  // namespace

std::string greedy_sample(const std::vector<float>& logits, int& index) {
  float* d_logits = nullptr;
  int* d_index = nullptr;
  const size_t bytes = logits.size() * sizeof(float);
  cudaError_t status = cudaMalloc(&d_logits, bytes);
  if (status == cudaSuccess) status = cudaMalloc(&d_index, sizeof(int));
  if (status == cudaSuccess)
    status = cudaMemcpy(d_logits, logits.data(), bytes, cudaMemcpyHostToDevice);
  if (status == cudaSuccess) {
    argmax_kernel<<<1, kThreads>>>(d_logits, static_cast<int>(logits.size()), d_index);
    status = cudaGetLastError();
  }
  if (status == cudaSuccess)
    status = cudaMemcpy(&index, d_index, sizeof(int), cudaMemcpyDeviceToHost);
  if (d_logits != nullptr) cudaFree(d_logits);
  if (d_index != nullptr) cudaFree(d_index);
  return status == cudaSuccess ? std::string() : std::string(cudaGetErrorString(status));
}

int greedy_sample_reference(const std::vector<float>& logits) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(logits.size()); ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

}  // namespace ninfer
