// Row sums of fp16 weights (stored as raw 16-bit patterns, as quantized weight files hold them)
// times one bf16 scale per row, one warp per row. Kept in a header, in an anonymous namespace,
// the way the upstreams' kernels are: with relocatable device code (-rdc) this is the shape
// whose compiled names nvcc draws from a per-process number unless -frandom-seed is given.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace ninfer::kernels {
namespace {

constexpr int kWarp = 32;

template <int kRowsPerBlock>
__global__ void __launch_bounds__(kRowsPerBlock * kWarp)
    dequant_rows_kernel(const std::uint16_t* __restrict__ bits,
                        const __nv_bfloat16* __restrict__ scales, float* __restrict__ out,
                        int rows, int cols) {
  const int row = blockIdx.x * kRowsPerBlock + static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  float sum = 0.0f;
  if (row < rows) {
    for (int col = lane; col < cols; col += kWarp)
      sum += __half2float(__ushort_as_half(bits[static_cast<std::size_t>(row) * cols + col]));
  }
  __syncwarp();
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (row < rows && lane == 0) out[row] = sum * __bfloat162float(scales[row]);
}

}  // namespace
}  // namespace ninfer::kernels
