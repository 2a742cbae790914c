// Top-k of each row of x [rows, cols] (top-k sampling, MoE routing): k rounds of a block-wide
// argmax, each over the entries ranked after the previous pick (value descending, then index
// ascending), so nothing needs to be marked and ties go to the lowest index. One block per row.
#include <algorithm>
#include <numeric>

#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

constexpr int kMaxK = 64;

// True when (value, at) ranks before (other, other_at): larger value, then lower index.
__device__ __host__ inline bool ranks_before(float value, int at, float other, int other_at) {
  return value > other || (value == other && at < other_at);
}

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    top_k_kernel(const T* __restrict__ x, float* __restrict__ values,
                 std::int32_t* __restrict__ indices, int cols, int k) {
  __shared__ float best_value[kBlock];
  __shared__ int best_index[kBlock];
  const int tid = static_cast<int>(threadIdx.x);
  const T* row = x + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  float last_value = INFINITY;  // the previous pick; round 0 may take anything
  int last_index = -1;
  for (int round = 0; round < k; ++round) {
    float value = -INFINITY;
    int at = cols;  // "nothing" ranks after every real entry of equal value
    for (int i = tid; i < cols; i += kBlock) {
      const float v = to_float(row[i]);
      if (ranks_before(last_value, last_index, v, i) && ranks_before(v, i, value, at)) {
        value = v;
        at = i;
      }
    }
    best_value[tid] = value;
    best_index[tid] = at;
    __syncthreads();
    for (int stride = kBlock / 2; stride > 0; stride /= 2) {
      if (tid < stride &&
          ranks_before(best_value[tid + stride], best_index[tid + stride], best_value[tid],
                       best_index[tid])) {
        best_value[tid] = best_value[tid + stride];
        best_index[tid] = best_index[tid + stride];
      }
      __syncthreads();
    }
    last_value = best_value[0];
    last_index = best_index[0];
    __syncthreads();  // everyone has read the winner before the next round overwrites it
    if (tid == 0) {
      const std::size_t out = static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(k) +
                              static_cast<std::size_t>(round);
      values[out] = last_value;
      indices[out] = last_index;
    }
  }
}

}  // namespace

std::string top_k(DType dtype, const std::vector<float>& x, int rows, int cols, int k,
                  std::vector<float>& values, std::vector<std::int32_t>& indices) {
  if (rows <= 0 || cols <= 0 ||
      x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    return "top_k: x must hold rows * cols values";
  if (k < 1 || k > cols || k > kMaxK) return "top_k: k must be in [1, min(cols, 64)]";
  const std::size_t picks = static_cast<std::size_t>(rows) * static_cast<std::size_t>(k);
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x;
    DeviceArray<float> d_values;
    DeviceArray<std::int32_t> d_indices;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = d_values.allocate(picks);
    if (status == cudaSuccess) status = d_indices.allocate(picks);
    if (status == cudaSuccess) {
      status = with_block(cols, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        top_k_kernel<T, kBlock><<<static_cast<unsigned int>(rows), kBlock>>>(
            d_x.get(), d_values.get(), d_indices.get(), cols, k);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_values, values);
    if (status == cudaSuccess) status = download_exact(d_indices, indices);
    return status;
  });
  return error_text(result);
}

void top_k_reference(const std::vector<float>& x, int rows, int cols, int k,
                     std::vector<float>& values, std::vector<std::int32_t>& indices) {
  const auto width = static_cast<std::size_t>(cols);
  const auto picks = static_cast<std::size_t>(k);
  values.assign(static_cast<std::size_t>(rows) * picks, 0.0f);
  indices.assign(values.size(), 0);
  std::vector<std::int32_t> order(width);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* row = x.data() + r * width;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [row](std::int32_t a, std::int32_t b) {
      return row[a] > row[b];
    });
    for (std::size_t j = 0; j < picks; ++j) {
      indices[r * picks + j] = order[j];
      values[r * picks + j] = row[order[j]];
    }
  }
}

}  // namespace ninfer
