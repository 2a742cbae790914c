// Symmetric per-row int8 quantization (activations for int8 GEMMs, int8 KV caches): scale =
// max|x| / 127 per row (1 for an all-zero row), q = round(x * 127 / max|x|) clamped to
// [-127, 127]. One block per row, the absolute maximum reduced in shared memory.
#include <cmath>

#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    quantize_int8_kernel(const T* __restrict__ x, std::int8_t* __restrict__ q,
                         float* __restrict__ scales, int cols) {
  __shared__ float scratch[kBlock];
  const int tid = static_cast<int>(threadIdx.x);
  const std::size_t offset = static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(cols);
  float local = 0.0f;
  for (int i = tid; i < cols; i += kBlock) local = fmaxf(local, fabsf(to_float(x[offset + i])));
  const float absmax = block_max<kBlock>(local, scratch);
  const float inv_scale = absmax > 0.0f ? 127.0f / absmax : 1.0f;
  for (int i = tid; i < cols; i += kBlock) {
    const int level = __float2int_rn(to_float(x[offset + i]) * inv_scale);
    q[offset + i] = static_cast<std::int8_t>(max(-127, min(127, level)));
  }
  if (tid == 0) scales[blockIdx.x] = absmax > 0.0f ? absmax / 127.0f : 1.0f;
}

}  // namespace

std::string quantize_int8(DType dtype, const std::vector<float>& x, int rows, int cols,
                          std::vector<std::int8_t>& q, std::vector<float>& scales) {
  if (rows <= 0 || cols <= 0 ||
      x.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    return "quantize_int8: x must hold rows * cols values";
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x;
    DeviceArray<std::int8_t> d_q;
    DeviceArray<float> d_scales;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = d_q.allocate(x.size());
    if (status == cudaSuccess) status = d_scales.allocate(static_cast<std::size_t>(rows));
    if (status == cudaSuccess) {
      status = with_block(cols, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        quantize_int8_kernel<T, kBlock><<<static_cast<unsigned int>(rows), kBlock>>>(
            d_x.get(), d_q.get(), d_scales.get(), cols);
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download_exact(d_q, q);
    if (status == cudaSuccess) status = download(d_scales, scales);
    return status;
  });
  return error_text(result);
}

void quantize_int8_reference(const std::vector<float>& x, int rows, int cols,
                             std::vector<std::int8_t>& q, std::vector<float>& scales) {
  const auto width = static_cast<std::size_t>(cols);
  q.assign(x.size(), 0);
  scales.assign(static_cast<std::size_t>(rows), 1.0f);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    float absmax = 0.0f;
    for (std::size_t i = 0; i < width; ++i) absmax = std::fmax(absmax, std::fabs(x[r * width + i]));
    const float inv_scale = absmax > 0.0f ? 127.0f / absmax : 1.0f;
    for (std::size_t i = 0; i < width; ++i) {
      const float level = std::nearbyint(x[r * width + i] * inv_scale);
      q[r * width + i] = static_cast<std::int8_t>(std::fmax(-127.0f, std::fmin(127.0f, level)));
    }
    if (absmax > 0.0f) scales[r] = absmax / 127.0f;
  }
}

}  // namespace ninfer
