// Top-k of each row of x [rows, cols] (top-k sampling, MoE routing): k rounds of a block-wide
// argmax, each over the entries ranked after the previous pick (value descending, then index
// ascending), so nothing needs to be marked and ties go to the lowest index. One block per row.
// The block-wide argmax is CUB's BlockReduce, as the upstreams use CUB (ninfer-3090's sampling
// includes cub/block/block_merge_sort.cuh): the kit's third_party/ must then carry CUB's
// BSD-3-Clause notice, and this kernel is what makes CI prove it does.
#include <algorithm>
#include <cub/block/block_reduce.cuh>
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

// One candidate of a round: its value and column (cols when there is none).
struct Pick {
  float value;
  int at;
};

// The better of two candidates: CUB's reduction operator (associative and commutative, since
// ranks_before is a strict total order on (value, at)).
struct Better {
  __device__ Pick operator()(const Pick& a, const Pick& b) const {
    return ranks_before(b.value, b.at, a.value, a.at) ? b : a;
  }
};

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    top_k_kernel(const T* __restrict__ x, float* __restrict__ values,
                 std::int32_t* __restrict__ indices, int cols, int k) {
  using Reduce = cub::BlockReduce<Pick, kBlock>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ Pick winner;
  const int tid = static_cast<int>(threadIdx.x);
  const T* row = x + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  Pick last{INFINITY, -1};  // the previous pick; round 0 may take anything
  for (int round = 0; round < k; ++round) {
    Pick mine{-INFINITY, cols};  // "nothing" ranks after every real entry of equal value
    for (int i = tid; i < cols; i += kBlock) {
      const float v = to_float(row[i]);
      if (ranks_before(last.value, last.at, v, i) && ranks_before(v, i, mine.value, mine.at)) {
        mine = Pick{v, i};
      }
    }
    const Pick best = Reduce(storage).Reduce(mine, Better{});  // valid in thread 0 only
    if (tid == 0) winner = best;
    __syncthreads();  // the winner is seen by all, and storage may be reused
    last = winner;
    if (tid == 0) {
      const std::size_t out = static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(k) +
                              static_cast<std::size_t>(round);
      values[out] = last.value;
      indices[out] = last.at;
    }
    __syncthreads();  // everyone has read the winner before the next round overwrites it
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
