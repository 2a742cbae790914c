// The residual stream update between transformer sublayers: residual += alpha * x, in place,
// in the element type of the stream. Grid-stride elementwise.
#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    residual_add_kernel(const T* __restrict__ x, T* __restrict__ residual, std::size_t count,
                        float alpha) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * kBlock;
  for (std::size_t at = static_cast<std::size_t>(blockIdx.x) * kBlock + threadIdx.x; at < count;
       at += step)
    residual[at] = from_float<T>(to_float(residual[at]) + alpha * to_float(x[at]));
}

}  // namespace

std::string residual_add(DType dtype, const std::vector<float>& x, float alpha,
                         std::vector<float>& residual) {
  if (x.empty() || x.size() != residual.size())
    return "residual_add: x and residual must hold the same, non-zero number of values";
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x, d_residual;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = upload(residual, d_residual);
    if (status == cudaSuccess) {
      const int work = x.size() < 256 ? static_cast<int>(x.size()) : 256;
      status = with_block(work, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        residual_add_kernel<T, kBlock><<<grid_for<kBlock>(x.size()), kBlock>>>(
            d_x.get(), d_residual.get(), x.size(), alpha);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_residual, residual);
    return status;
  });
  return error_text(result);
}

std::vector<float> residual_add_reference(const std::vector<float>& x, float alpha,
                                          const std::vector<float>& residual) {
  std::vector<float> out(residual.size());
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(static_cast<double>(residual[i]) +
                                static_cast<double>(alpha) * static_cast<double>(x[i]));
  return out;
}

}  // namespace ninfer
