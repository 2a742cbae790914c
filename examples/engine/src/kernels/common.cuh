// What the kernel files share: element types, device arrays, dispatch and block reductions.
// Private to src/kernels; everything here is a template or inline. The files are compiled as
// relocatable device code and joined by the device link when the apps link.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "ninfer/ninfer.hpp"

namespace ninfer::kernels {

// Loads and stores of the three element types; arithmetic is always done in float.
template <typename T>
struct Element;

template <>
struct Element<float> {
  __host__ __device__ static float load(float v) { return v; }
  __host__ __device__ static float store(float v) { return v; }
};

template <>
struct Element<__half> {
  __host__ __device__ static float load(__half v) { return __half2float(v); }
  __host__ __device__ static __half store(float v) { return __float2half_rn(v); }
};

template <>
struct Element<__nv_bfloat16> {
  __host__ __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

template <typename T>
__host__ __device__ inline float to_float(T v) {
  return Element<T>::load(v);
}

template <typename T>
__host__ __device__ inline T from_float(float v) {
  return Element<T>::store(v);
}

// Calls f(T{}) for the element type `dtype` names and returns what f returns (a cudaError_t).
template <typename F>
cudaError_t with_element(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f(float{});
    case DType::f16:
      return f(__half{});
    case DType::bf16:
      return f(__nv_bfloat16{});
  }
  return cudaErrorInvalidValue;
}

// Calls f(std::integral_constant<int, N>{}) with the block size for `work` items per block:
// 64, 128 or 256 threads, so that small rows do not leave most of a block idle.
template <typename F>
cudaError_t with_block(int work, F&& f) {
  if (work <= 64) return f(std::integral_constant<int, 64>{});
  if (work <= 128) return f(std::integral_constant<int, 128>{});
  return f(std::integral_constant<int, 256>{});
}

// Owns one device allocation of `size()` elements.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  cudaError_t allocate(std::size_t count) {
    size_ = count;
    return cudaMalloc(&ptr_, (count == 0 ? 1 : count) * sizeof(T));
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return size_; }

 private:
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

// Host floats -> device elements of type T (rounded to nearest).
template <typename T>
cudaError_t upload(const std::vector<float>& host, DeviceArray<T>& device) {
  std::vector<T> converted(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) converted[i] = from_float<T>(host[i]);
  const cudaError_t status = device.allocate(host.size());
  if (status != cudaSuccess) return status;
  return cudaMemcpy(device.get(), converted.data(), host.size() * sizeof(T),
                    cudaMemcpyHostToDevice);
}

// Host values copied as they are (indices, slots).
template <typename T>
cudaError_t upload_exact(const std::vector<T>& host, DeviceArray<T>& device) {
  const cudaError_t status = device.allocate(host.size());
  if (status != cudaSuccess) return status;
  return cudaMemcpy(device.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
}

// Device elements of type T -> host floats; the copy waits for the kernels before it.
template <typename T>
cudaError_t download(const DeviceArray<T>& device, std::vector<float>& host) {
  std::vector<T> raw(device.size());
  const cudaError_t status =
      cudaMemcpy(raw.data(), device.get(), raw.size() * sizeof(T), cudaMemcpyDeviceToHost);
  if (status != cudaSuccess) return status;
  host.resize(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) host[i] = to_float(raw[i]);
  return cudaSuccess;
}

template <typename T>
cudaError_t download_exact(const DeviceArray<T>& device, std::vector<T>& host) {
  host.resize(device.size());
  return cudaMemcpy(host.data(), device.get(), host.size() * sizeof(T), cudaMemcpyDeviceToHost);
}

inline std::string error_text(cudaError_t status) {
  return status == cudaSuccess ? std::string() : std::string(cudaGetErrorString(status));
}

// A grid of at most `limit` blocks that covers `count` items with kBlock threads each; the
// kernels loop (grid-stride) over whatever one pass does not reach.
template <int kBlock>
unsigned int grid_for(std::size_t count, unsigned int limit = 1024) {
  const std::size_t blocks = (count + kBlock - 1) / kBlock;
  return blocks == 0 ? 1u : (blocks < limit ? static_cast<unsigned int>(blocks) : limit);
}

// Block-wide reductions through shared memory; every thread of the block must call them and
// gets the result. `scratch` holds kBlock floats and may be reused once the call returns.
template <int kBlock>
__device__ inline float block_sum(float value, float* scratch) {
  static_assert((kBlock & (kBlock - 1)) == 0, "block size must be a power of two");
  const int tid = static_cast<int>(threadIdx.x);
  scratch[tid] = value;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (tid < stride) scratch[tid] += scratch[tid + stride];
    __syncthreads();
  }
  const float total = scratch[0];
  __syncthreads();
  return total;
}

template <int kBlock>
__device__ inline float block_max(float value, float* scratch) {
  static_assert((kBlock & (kBlock - 1)) == 0, "block size must be a power of two");
  const int tid = static_cast<int>(threadIdx.x);
  scratch[tid] = value;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (tid < stride) scratch[tid] = fmaxf(scratch[tid], scratch[tid + stride]);
    __syncthreads();
  }
  const float best = scratch[0];
  __syncthreads();
  return best;
}

}  // namespace ninfer::kernels
