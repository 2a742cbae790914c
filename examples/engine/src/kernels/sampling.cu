// Greedy sampling: the index of the largest logit of each row of logits [rows, vocab] (lowest
// index wins a tie), one block per row, (value, index) pairs reduced in shared memory.
#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    argmax_kernel(const T* __restrict__ logits, std::int32_t* __restrict__ indices, int vocab) {
  __shared__ float best_value[kBlock];
  __shared__ int best_index[kBlock];
  const int tid = static_cast<int>(threadIdx.x);
  const T* row = logits + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(vocab);
  float value = -INFINITY;
  int at = vocab;
  for (int i = tid; i < vocab; i += kBlock) {
    const float v = to_float(row[i]);
    if (v > value) {  // i only grows, so the first of equal values stays
      value = v;
      at = i;
    }
  }
  best_value[tid] = value;
  best_index[tid] = at;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride /= 2) {
    if (tid < stride) {
      const float other = best_value[tid + stride];
      const int other_at = best_index[tid + stride];
      if (other > best_value[tid] || (other == best_value[tid] && other_at < best_index[tid])) {
        best_value[tid] = other;
        best_index[tid] = other_at;
      }
    }
    __syncthreads();
  }
  if (tid == 0) indices[blockIdx.x] = best_index[0];
}

}  // namespace

std::string greedy_sample(DType dtype, const std::vector<float>& logits, int rows,
                          std::vector<std::int32_t>& indices) {
  if (rows <= 0 || logits.empty() || logits.size() % static_cast<std::size_t>(rows) != 0)
    return "greedy_sample: logits must hold rows * vocab values";
  const int vocab = static_cast<int>(logits.size() / static_cast<std::size_t>(rows));
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_logits;
    DeviceArray<std::int32_t> d_indices;
    cudaError_t status = upload(logits, d_logits);
    if (status == cudaSuccess) status = d_indices.allocate(static_cast<std::size_t>(rows));
    if (status == cudaSuccess) {
      status = with_block(vocab, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        argmax_kernel<T, kBlock><<<static_cast<unsigned int>(rows), kBlock>>>(
            d_logits.get(), d_indices.get(), vocab);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download_exact(d_indices, indices);
    return status;
  });
  return error_text(result);
}

std::vector<std::int32_t> greedy_sample_reference(const std::vector<float>& logits, int rows) {
  const std::size_t vocab = logits.size() / static_cast<std::size_t>(rows);
  std::vector<std::int32_t> indices(static_cast<std::size_t>(rows), 0);
  for (std::size_t r = 0; r < indices.size(); ++r) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < vocab; ++i)
      if (logits[r * vocab + i] > logits[r * vocab + best]) best = i;
    indices[r] = static_cast<std::int32_t>(best);
  }
  return indices;
}

}  // namespace ninfer
