// Attention scores for one decode step, written out naively: scores[h, j] = scale * q[h] . k[j,
// g(h)] with grouped-query heads (g(h) = h / (heads / kv_heads)). One block per query head; the
// query sits in shared memory and each thread takes whole keys.
#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

constexpr int kMaxHeadDim = 256;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    attention_scores_kernel(const T* __restrict__ q, const T* __restrict__ k,
                            float* __restrict__ scores, int seq, int heads, int kv_heads,
                            int head_dim, float scale) {
  __shared__ float query[kMaxHeadDim];
  const int tid = static_cast<int>(threadIdx.x);
  const int head = static_cast<int>(blockIdx.x);
  const int kv_head = head / (heads / kv_heads);
  for (int i = tid; i < head_dim; i += kBlock)
    query[i] = to_float(q[static_cast<std::size_t>(head * head_dim + i)]);
  __syncthreads();
  const std::size_t key_stride = static_cast<std::size_t>(kv_heads * head_dim);
  for (int j = tid; j < seq; j += kBlock) {
    const T* key = k + static_cast<std::size_t>(j) * key_stride +
                   static_cast<std::size_t>(kv_head * head_dim);
    float dot = 0.0f;
    for (int i = 0; i < head_dim; ++i) dot += query[i] * to_float(key[i]);
    scores[static_cast<std::size_t>(head) * static_cast<std::size_t>(seq) +
           static_cast<std::size_t>(j)] = dot * scale;
  }
}

}  // namespace

std::string attention_scores(DType dtype, const std::vector<float>& q,
                             const std::vector<float>& k, int heads, int kv_heads, int head_dim,
                             float scale, std::vector<float>& scores) {
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    return "attention_scores: heads must be a positive multiple of kv_heads";
  if (head_dim <= 0 || head_dim > kMaxHeadDim)
    return "attention_scores: head_dim must be in [1, 256]";
  const std::size_t key_size =
      static_cast<std::size_t>(kv_heads) * static_cast<std::size_t>(head_dim);
  if (q.size() != static_cast<std::size_t>(heads) * static_cast<std::size_t>(head_dim) ||
      k.empty() || k.size() % key_size != 0)
    return "attention_scores: q must hold heads * head_dim values, k seq * kv_heads * head_dim";
  const int seq = static_cast<int>(k.size() / key_size);
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_q, d_k;
    DeviceArray<float> d_scores;
    cudaError_t status = upload(q, d_q);
    if (status == cudaSuccess) status = upload(k, d_k);
    if (status == cudaSuccess)
      status = d_scores.allocate(static_cast<std::size_t>(heads) * static_cast<std::size_t>(seq));
    if (status == cudaSuccess) {
      status = with_block(seq, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        attention_scores_kernel<T, kBlock><<<static_cast<unsigned int>(heads), kBlock>>>(
            d_q.get(), d_k.get(), d_scores.get(), seq, heads, kv_heads, head_dim, scale);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_scores, scores);
    return status;
  });
  return error_text(result);
}

std::vector<float> attention_scores_reference(const std::vector<float>& q,
                                              const std::vector<float>& k, int heads,
                                              int kv_heads, int head_dim, float scale) {
  const auto dim = static_cast<std::size_t>(head_dim);
  const std::size_t key_size = static_cast<std::size_t>(kv_heads) * dim;
  const std::size_t seq = k.size() / key_size;
  const std::size_t group = static_cast<std::size_t>(heads / kv_heads);
  std::vector<float> scores(static_cast<std::size_t>(heads) * seq);
  for (std::size_t h = 0; h < static_cast<std::size_t>(heads); ++h) {
    for (std::size_t j = 0; j < seq; ++j) {
      double dot = 0.0;
      for (std::size_t i = 0; i < dim; ++i)
        dot += static_cast<double>(q[h * dim + i]) * k[j * key_size + (h / group) * dim + i];
      scores[h * seq + j] = static_cast<float>(dot * scale);
    }
  }
  return scores;
}

}  // namespace ninfer
