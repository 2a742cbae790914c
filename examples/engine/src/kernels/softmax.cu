// Softmax over each row of a [rows, cols] matrix (attention probabilities, sampling
// distributions): one block per row, row maximum and sum reduced in shared memory.
#include <cmath>

#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    softmax_kernel(const T* __restrict__ x, T* __restrict__ out, int cols, float inv_temperature) {
  __shared__ float scratch[kBlock];
  const int tid = static_cast<int>(threadIdx.x);
  const T* row = x + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  T* out_row = out + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);

  float local_max = -INFINITY;
  for (int i = tid; i < cols; i += kBlock)
    local_max = fmaxf(local_max, to_float(row[i]) * inv_temperature);
  const float row_max = block_max<kBlock>(local_max, scratch);

  float local_sum = 0.0f;
  for (int i = tid; i < cols; i += kBlock)
    local_sum += expf(to_float(row[i]) * inv_temperature - row_max);
  const float inv_sum = 1.0f / block_sum<kBlock>(local_sum, scratch);

  for (int i = tid; i < cols; i += kBlock)
    out_row[i] = from_float<T>(expf(to_float(row[i]) * inv_temperature - row_max) * inv_sum);
}

}  // namespace

std::string softmax(DType dtype, const std::vector<float>& x, int rows, int cols,
                    float temperature, std::vector<float>& out) {
  if (rows <= 0 || cols <= 0 ||
      x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    return "softmax: x must hold rows * cols values";
  if (!(temperature > 0.0f)) return "softmax: temperature must be positive";
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x, d_out;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = d_out.allocate(x.size());
    if (status == cudaSuccess) {
      status = with_block(cols, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        softmax_kernel<T, kBlock><<<static_cast<unsigned int>(rows), kBlock>>>(
            d_x.get(), d_out.get(), cols, 1.0f / temperature);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_out, out);
    return status;
  });
  return error_text(result);
}

std::vector<float> softmax_reference(const std::vector<float>& x, int rows, int cols,
                                     float temperature) {
  const auto width = static_cast<std::size_t>(cols);
  std::vector<float> out(x.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* row = x.data() + r * width;
    double row_max = -INFINITY;
    for (std::size_t i = 0; i < width; ++i)
      row_max = std::fmax(row_max, static_cast<double>(row[i]) / temperature);
    double sum = 0.0;
    for (std::size_t i = 0; i < width; ++i)
      sum += std::exp(static_cast<double>(row[i]) / temperature - row_max);
    for (std::size_t i = 0; i < width; ++i)
      out[r * width + i] =
          static_cast<float>(std::exp(static_cast<double>(row[i]) / temperature - row_max) / sum);
  }
  return out;
}

}  // namespace ninfer
