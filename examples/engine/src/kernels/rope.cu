// Rotary position embedding, rotate-half form (GPT-NeoX, Llama): within each head the pair
// (x[i], x[i + head_dim/2]) turns by position * base^(-2i/head_dim). One block per token.
#include <cmath>

#include "common.cuh"

namespace ninfer {

namespace {

using namespace kernels;

template <typename T, int kBlock>
__global__ void __launch_bounds__(kBlock)
    rope_kernel(const T* __restrict__ x, const std::int32_t* __restrict__ positions,
                T* __restrict__ out, int heads, int head_dim, float log2_base) {
  const int half = head_dim / 2;
  const std::size_t token_offset =
      static_cast<std::size_t>(blockIdx.x) * static_cast<std::size_t>(heads * head_dim);
  const float position = static_cast<float>(positions[blockIdx.x]);
  for (int pair = static_cast<int>(threadIdx.x); pair < heads * half; pair += kBlock) {
    const int head = pair / half;
    const int i = pair % half;
    const float inv_freq =
        exp2f(-log2_base * static_cast<float>(2 * i) / static_cast<float>(head_dim));
    float sin_angle, cos_angle;
    sincosf(position * inv_freq, &sin_angle, &cos_angle);
    const std::size_t at = token_offset + static_cast<std::size_t>(head * head_dim + i);
    const float a = to_float(x[at]);
    const float b = to_float(x[at + static_cast<std::size_t>(half)]);
    out[at] = from_float<T>(a * cos_angle - b * sin_angle);
    out[at + static_cast<std::size_t>(half)] = from_float<T>(b * cos_angle + a * sin_angle);
  }
}

}  // namespace

std::string rope(DType dtype, const std::vector<float>& x,
                 const std::vector<std::int32_t>& positions, int heads, int head_dim, float base,
                 std::vector<float>& out) {
  if (heads <= 0 || head_dim <= 0 || head_dim % 2 != 0)
    return "rope: heads must be positive and head_dim positive and even";
  if (positions.empty() ||
      x.size() != positions.size() * static_cast<std::size_t>(heads) *
                      static_cast<std::size_t>(head_dim))
    return "rope: x must hold tokens * heads * head_dim values, one position per token";
  if (!(base > 1.0f)) return "rope: base must be greater than 1";
  const cudaError_t result = with_element(dtype, [&](auto element) {
    using T = decltype(element);
    DeviceArray<T> d_x, d_out;
    DeviceArray<std::int32_t> d_positions;
    cudaError_t status = upload(x, d_x);
    if (status == cudaSuccess) status = upload_exact(positions, d_positions);
    if (status == cudaSuccess) status = d_out.allocate(x.size());
    if (status == cudaSuccess) {
      status = with_block(heads * head_dim / 2, [&](auto block) {
        constexpr int kBlock = decltype(block)::value;
        rope_kernel<T, kBlock><<<static_cast<unsigned int>(positions.size()), kBlock>>>(
            d_x.get(), d_positions.get(), d_out.get(), heads, head_dim, std::log2(base));
        return cudaGetLastError();
      });
    }
    if (status == cudaSuccess) status = download(d_out, out);
    return status;
  });
  return error_text(result);
}

std::vector<float> rope_reference(const std::vector<float>& x,
                                  const std::vector<std::int32_t>& positions, int heads,
                                  int head_dim, float base) {
  const auto dim = static_cast<std::size_t>(head_dim);
  const std::size_t half = dim / 2;
  std::vector<float> out(x.size());
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (std::size_t h = 0; h < static_cast<std::size_t>(heads); ++h) {
      const std::size_t offset = (t * static_cast<std::size_t>(heads) + h) * dim;
      for (std::size_t i = 0; i < half; ++i) {
        const double angle = positions[t] * std::pow(static_cast<double>(base),
                                                     -2.0 * static_cast<double>(i) /
                                                         static_cast<double>(dim));
        const double a = x[offset + i];
        const double b = x[offset + i + half];
        out[offset + i] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
        out[offset + i + half] = static_cast<float>(b * std::cos(angle) + a * std::sin(angle));
      }
    }
  }
  return out;
}

}  // namespace ninfer
