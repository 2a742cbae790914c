// RMSNorm: out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i] for each row of x [rows, cols],
// one block per row, the sum of squares reduced in shared memory.
#include <cmath>

#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    rmsnorm_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                   int cols, float eps) {
  __shared__ float scratch[kBlock];
  const int tid = static_cast<int>(threadIdx.x);
  const T* row = x + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  T* out_row = out + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  float sum = 0.0f;
  for (int i = tid; i < cols; i += kBlock) {
    const float v = to_float(row[i]);
    sum += v * v;
  }
  const float scale = rsqrtf(block_sum<kBlock>(sum, scratch) / static_cast<float>(cols) + eps);
  for (int i = tid; i < cols; i += kBlock)
    out_row[i] = from_float<T>(to_float(row[i]) * scale * to_float(weight[i]));
}

}  // namespace

std::string rmsnorm(DType dtype, const std::vector<float>& x, int rows, int cols,
                    const std::vector<float>& weight, float eps, std::vector<float>& out) {
  if (rows <= 0 || cols <= 0 ||
      x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    return "rmsnorm: x must hold rows * cols values";
  if (weight.size() != static_cast<std::size_t>(cols))
    return "rmsnorm: weight must hold cols values";
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x, d_weight, d_out;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = upload(weight, d_weight);
    if (status == cudaSuccess) status = d_out.allocate(x.size());
    if (status == cudaSuccess) {
      status = with_block(cols, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        rmsnorm_kernel<T, kBlock><<<static_cast<unsigned int>(rows), kBlock>>>(
            d_x.get(), d_weight.get(), d_out.get(), cols, eps);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_out, out);
    return status;
  });
  return error_text(result);
}

std::vector<float> rmsnorm_reference(const std::vector<float>& x, int rows, int cols,
                                     const std::vector<float>& weight, float eps) {
  const auto width = static_cast<std::size_t>(cols);
  std::vector<float> out(x.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* row = x.data() + r * width;
    double sum = 0.0;
    for (std::size_t i = 0; i < width; ++i) sum += static_cast<double>(row[i]) * row[i];
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(width) + eps);
    for (std::size_t i = 0; i < width; ++i)
      out[r * width + i] = static_cast<float>(row[i] * scale * weight[i]);
  }
  return out;
}

}  // namespace ninfer
