// Token embedding lookup: out [ids, dim] = table[id] * scale (Gemma scales by sqrt(dim), most
// models by 1); an id outside [0, vocab) gives a row of zeros. One block per id.
#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    embedding_kernel(const T* __restrict__ table, const std::int32_t* __restrict__ ids,
                     T* __restrict__ out, int vocab, int dim, float scale) {
  const std::int32_t id = ids[blockIdx.x];
  const bool known = id >= 0 && id < vocab;
  const std::size_t width = static_cast<std::size_t>(dim);
  const T* row = table + (known ? static_cast<std::size_t>(id) : 0) * width;
  T* out_row = out + static_cast<std::size_t>(blockIdx.x) * width;
  for (int i = static_cast<int>(threadIdx.x); i < dim; i += kBlock)
    out_row[i] = from_float<T>(known ? to_float(row[i]) * scale : 0.0f);
}

}  // namespace

std::string embedding(DType dtype, const std::vector<float>& table, int vocab, int dim,
                      const std::vector<std::int32_t>& ids, float scale,
                      std::vector<float>& out) {
  if (vocab <= 0 || dim <= 0 ||
      table.size() != static_cast<std::size_t>(vocab) * static_cast<std::size_t>(dim))
    return "embedding: table must hold vocab * dim values";
  if (ids.empty()) return "embedding: no ids";
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_table, d_out;
    DeviceArray<std::int32_t> d_ids;
    cudaError_t status = upload(table, d_table);
    if (status == cudaSuccess) status = upload_exact(ids, d_ids);
    if (status == cudaSuccess) status = d_out.allocate(ids.size() * static_cast<std::size_t>(dim));
    if (status == cudaSuccess) {
      status = with_block(dim, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        embedding_kernel<T, kBlock><<<static_cast<unsigned int>(ids.size()), kBlock>>>(
            d_table.get(), d_ids.get(), d_out.get(), vocab, dim, scale);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_out, out);
    return status;
  });
  return error_text(result);
}

std::vector<float> embedding_reference(const std::vector<float>& table, int vocab, int dim,
                                       const std::vector<std::int32_t>& ids, float scale) {
  const auto width = static_cast<std::size_t>(dim);
  std::vector<float> out(ids.size() * width, 0.0f);
  for (std::size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) continue;
    const std::size_t row = static_cast<std::size_t>(ids[t]) * width;
    for (std::size_t i = 0; i < width; ++i) out[t * width + i] = table[row + i] * scale;
  }
  return out;
}

}  // namespace ninfer
