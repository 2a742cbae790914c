// SwiGLU activation of a gated MLP: x [rows, 2 * cols] holds gate | up side by side, and
// out [rows, cols] = silu(gate) * up with silu(g) = g / (1 + exp(-g)). Grid-stride elementwise.
#include <cmath>

#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    silu_mul_kernel(const T* __restrict__ x, T* __restrict__ out, int rows, int cols) {
  const std::size_t width = static_cast<std::size_t>(cols);
  const std::size_t total = static_cast<std::size_t>(rows) * width;
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * kBlock;
  for (std::size_t at = static_cast<std::size_t>(blockIdx.x) * kBlock + threadIdx.x; at < total;
       at += step) {
    const std::size_t row = at / width;
    const std::size_t col = at % width;
    const float gate = to_float(x[row * 2 * width + col]);
    const float up = to_float(x[row * 2 * width + width + col]);
    out[at] = from_float<T>(gate / (1.0f + expf(-gate)) * up);
  }
}

}  // namespace

std::string silu_mul(DType dtype, const std::vector<float>& x, int rows, int cols,
                     std::vector<float>& out) {
  if (rows <= 0 || cols <= 0 ||
      x.size() != 2 * static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    return "silu_mul: x must hold rows * 2 * cols values";
  const std::size_t total = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x, d_out;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = d_out.allocate(total);
    if (status == cudaSuccess) {
      status = with_block(cols, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        silu_mul_kernel<T, kBlock><<<grid_for<kBlock>(total), kBlock>>>(d_x.get(), d_out.get(),
                                                                       rows, cols);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_out, out);
    return status;
  });
  return error_text(result);
}

std::vector<float> silu_mul_reference(const std::vector<float>& x, int rows, int cols) {
  const auto width = static_cast<std::size_t>(cols);
  std::vector<float> out(static_cast<std::size_t>(rows) * width);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    for (std::size_t c = 0; c < width; ++c) {
      const double gate = x[r * 2 * width + c];
      const double up = x[r * 2 * width + width + c];
      out[r * width + c] = static_cast<float>(gate / (1.0 + std::exp(-gate)) * up);
    }
  }
  return out;
}

}  // namespace ninfer
