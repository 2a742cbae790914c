// Launcher and CPU reference for dequant_rows.cuh. Shape errors are exceptions inside (as the
// upstreams' launchers throw std::invalid_argument) and become the returned error text.
#include <stdexcept>

#include "common.cuh"
#include "dequant_rows.cuh"

namespace ninfer {

namespace {

using namespace kernels;

constexpr int kRowsPerBlock = 4;

void require_shape(const std::vector<std::uint16_t>& bits, const std::vector<float>& scales,
                   int rows, int cols) {
  if (rows <= 0 || cols <= 0)
    throw std::invalid_argument("dequant_rows: rows and cols must be positive");
  const auto count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (bits.size() != count || scales.size() != static_cast<std::size_t>(rows))
    throw std::invalid_argument("dequant_rows: bits must hold rows * cols values, scales rows");
}

cudaError_t launch(const std::vector<std::uint16_t>& bits, const std::vector<float>& scales,
                   int rows, int cols, std::vector<float>& out) {
  DeviceArray<std::uint16_t> d_bits;
  DeviceArray<__nv_bfloat16> d_scales;
  DeviceArray<float> d_out;
  cudaError_t status = upload_exact(bits, d_bits);
  if (status == cudaSuccess) status = upload(scales, d_scales);  // rounded to bf16
  if (status == cudaSuccess) status = d_out.allocate(static_cast<std::size_t>(rows));
  if (status != cudaSuccess) return status;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  dequant_rows_kernel<kRowsPerBlock><<<blocks, kRowsPerBlock * kWarp>>>(
      d_bits.get(), d_scales.get(), d_out.get(), rows, cols);
  status = cudaGetLastError();
  if (status == cudaSuccess) status = download(d_out, out);
  return status;
}

}  // namespace

std::string dequant_rows(const std::vector<std::uint16_t>& bits, const std::vector<float>& scales,
                         int rows, int cols, std::vector<float>& out) {
  try {
    require_shape(bits, scales, rows, cols);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return error_text(launch(bits, scales, rows, cols, out));
}

std::vector<std::uint16_t> to_f16_bits(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = __half_as_ushort(__float2half_rn(values[i]));
  return bits;
}

std::vector<float> dequant_rows_reference(const std::vector<std::uint16_t>& bits,
                                          const std::vector<float>& scales, int rows, int cols) {
  std::vector<float> out(static_cast<std::size_t>(rows));
  for (int row = 0; row < rows; ++row) {
    double sum = 0.0;
    for (int col = 0; col < cols; ++col)
      sum += static_cast<double>(
          __half2float(__ushort_as_half(bits[static_cast<std::size_t>(row) * cols + col])));
    const float scale = to_float(from_float<__nv_bfloat16>(scales[static_cast<std::size_t>(row)]));
    out[static_cast<std::size_t>(row)] = static_cast<float>(sum * scale);
  }
  return out;
}

}  // namespace ninfer
