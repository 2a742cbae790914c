// LayerNorm over each row of x [rows, cols]: (x - mean) / sqrt(var + eps) * gamma + beta, with
// the variance taken around the mean (two passes, no E[x^2] - E[x]^2 cancellation). One block
// per row.
#include <cmath>

#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    layernorm_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                     const T* __restrict__ beta, T* __restrict__ out, int cols, float eps) {
  __shared__ float scratch[kBlock];
  const int tid = static_cast<int>(threadIdx.x);
  const T* row = x + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  T* out_row = out + static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  const float n = static_cast<float>(cols);

  float local = 0.0f;
  for (int i = tid; i < cols; i += kBlock) local += to_float(row[i]);
  const float mean = block_sum<kBlock>(local, scratch) / n;

  local = 0.0f;
  for (int i = tid; i < cols; i += kBlock) {
    const float d = to_float(row[i]) - mean;
    local += d * d;
  }
  const float inv_std = rsqrtf(block_sum<kBlock>(local, scratch) / n + eps);

  for (int i = tid; i < cols; i += kBlock)
    out_row[i] =
        from_float<T>((to_float(row[i]) - mean) * inv_std * to_float(gamma[i]) + to_float(beta[i]));
}

}  // namespace

std::string layernorm(DType dtype, const std::vector<float>& x, int rows, int cols,
                      const std::vector<float>& gamma, const std::vector<float>& beta, float eps,
                      std::vector<float>& out) {
  if (rows <= 0 || cols <= 0 ||
      x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    return "layernorm: x must hold rows * cols values";
  if (gamma.size() != static_cast<std::size_t>(cols) || beta.size() != gamma.size())
    return "layernorm: gamma and beta must hold cols values each";
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x, d_gamma, d_beta, d_out;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = upload(gamma, d_gamma);
    if (status == cudaSuccess) status = upload(beta, d_beta);
    if (status == cudaSuccess) status = d_out.allocate(x.size());
    if (status == cudaSuccess) {
      status = with_block(cols, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        layernorm_kernel<T, kBlock><<<static_cast<unsigned int>(rows), kBlock>>>(
            d_x.get(), d_gamma.get(), d_beta.get(), d_out.get(), cols, eps);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_out, out);
    return status;
  });
  return error_text(result);
}

std::vector<float> layernorm_reference(const std::vector<float>& x, int rows, int cols,
                                       const std::vector<float>& gamma,
                                       const std::vector<float>& beta, float eps) {
  const auto width = static_cast<std::size_t>(cols);
  std::vector<float> out(x.size());
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    const float* row = x.data() + r * width;
    double mean = 0.0;
    for (std::size_t i = 0; i < width; ++i) mean += row[i];
    mean /= static_cast<double>(width);
    double var = 0.0;
    for (std::size_t i = 0; i < width; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= static_cast<double>(width);
    const double inv_std = 1.0 / std::sqrt(var + eps);
    for (std::size_t i = 0; i < width; ++i)
      out[r * width + i] = static_cast<float>((row[i] - mean) * inv_std * gamma[i] + beta[i]);
  }
  return out;
}

}  // namespace ninfer
