// Appending this step's keys and values to a paged KV cache ("reshape and cache"): token t of
// k and v [tokens, kv_heads, head_dim] goes to slot slots[t] of the caches [slots, kv_heads,
// head_dim]; a negative slot (padding) or one past the cache is skipped. One block per token.
#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    kv_append_kernel(const T* __restrict__ k, const T* __restrict__ v,
                     const std::int32_t* __restrict__ slots, T* __restrict__ k_cache,
                     T* __restrict__ v_cache, int width, int cache_slots) {
  const std::int32_t slot = slots[blockIdx.x];
  if (slot < 0 || slot >= cache_slots) return;  // the whole block leaves together
  const std::size_t from = static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(width);
  const std::size_t to = static_cast<std::size_t>(slot) * static_cast<std::size_t>(width);
  for (int i = static_cast<int>(threadIdx.x); i < width; i += kBlock) {
    k_cache[to + static_cast<std::size_t>(i)] = k[from + static_cast<std::size_t>(i)];
    v_cache[to + static_cast<std::size_t>(i)] = v[from + static_cast<std::size_t>(i)];
  }
}

}  // namespace

std::string kv_append(DType dtype, const std::vector<float>& k, const std::vector<float>& v,
                      const std::vector<std::int32_t>& slots, int kv_heads, int head_dim,
                      std::vector<float>& k_cache, std::vector<float>& v_cache) {
  if (kv_heads <= 0 || head_dim <= 0) return "kv_append: kv_heads and head_dim must be positive";
  const int width = kv_heads * head_dim;
  const auto row = static_cast<std::size_t>(width);
  if (slots.empty() || k.size() != slots.size() * row || v.size() != k.size())
    return "kv_append: k and v must hold tokens * kv_heads * head_dim values, one slot per token";
  if (k_cache.empty() || k_cache.size() % row != 0 || v_cache.size() != k_cache.size())
    return "kv_append: the caches must hold slots * kv_heads * head_dim values each";
  const int cache_slots = static_cast<int>(k_cache.size() / row);
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_k, d_v, d_k_cache, d_v_cache;
    DeviceArray<std::int32_t> d_slots;
    cudaError_t status = upload(k, d_k);
    if (status == cudaSuccess) status = upload(v, d_v);
    if (status == cudaSuccess) status = upload_exact(slots, d_slots);
    if (status == cudaSuccess) status = upload(k_cache, d_k_cache);
    if (status == cudaSuccess) status = upload(v_cache, d_v_cache);
    if (status == cudaSuccess) {
      status = with_block(width, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        kv_append_kernel<T, kBlock><<<static_cast<unsigned int>(slots.size()), kBlock>>>(
            d_k.get(), d_v.get(), d_slots.get(), d_k_cache.get(), d_v_cache.get(), width,
            cache_slots);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_k_cache, k_cache);
    if (status == cudaSuccess) status = download(d_v_cache, v_cache);
    return status;
  });
  return error_text(result);
}

void kv_append_reference(const std::vector<float>& k, const std::vector<float>& v,
                         const std::vector<std::int32_t>& slots, int kv_heads, int head_dim,
                         std::vector<float>& k_cache, std::vector<float>& v_cache) {
  const std::size_t width = static_cast<std::size_t>(kv_heads) * static_cast<std::size_t>(head_dim);
  const std::size_t cache_slots = k_cache.size() / width;
  for (std::size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0 || static_cast<std::size_t>(slots[t]) >= cache_slots) continue;
    const std::size_t to = static_cast<std::size_t>(slots[t]) * width;
    for (std::size_t i = 0; i < width; ++i) {
      k_cache[to + i] = k[t * width + i];
      v_cache[to + i] = v[t * width + i];
    }
  }
}

}  // namespace ninfer
