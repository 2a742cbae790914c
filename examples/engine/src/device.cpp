// Device query and the kernel smoke test; both degrade to a description without a GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>

#include "ninfer/ninfer.hpp"

namespace ninfer {

DeviceReport query_devices() {
  DeviceReport report;
  cudaRuntimeGetVersion(&report.runtime_version);
  cudaDriverGetVersion(&report.driver_version);  // 0 without a driver; not an error
  const cudaError_t status = cudaGetDeviceCount(&report.count);
  if (status != cudaSuccess) {
    report.count = 0;
    report.error = cudaGetErrorString(status);
    cudaGetLastError();  // clear the error so later runtime calls start clean
    return report;
  }
  for (int i = 0; i < report.count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      report.devices.push_back("(properties unavailable)");
      continue;
    }
    char line[320];
    std::snprintf(line, sizeof line, "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
    report.devices.emplace_back(line);
  }
  return report;
}

SmokeResult smoke_test(const std::vector<std::int32_t>& tokens) {
  SmokeResult result;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    result.detail = "skipped (no CUDA device)";
    return result;
  }
  result.ran = true;

  // Turn the token ids into a small activation vector and a logit vector.
  std::vector<float> x(64), weight(64), logits(97);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto t = tokens.empty() ? 1 : tokens[i % tokens.size()];
    x[i] = static_cast<float>((t % 17) - 8) * 0.25f + 0.01f * static_cast<float>(i);
    weight[i] = 1.0f + 0.001f * static_cast<float>(i);
  }
  for (std::size_t i = 0; i < logits.size(); ++i)
    logits[i] = std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(tokens.size()));

  std::vector<float> normed;
  std::string error = rmsnorm(x, weight, 1e-6f, normed);
  if (!error.empty()) {
    result.detail = "rmsnorm failed: " + error;
    return result;
  }
  const std::vector<float> expected = rmsnorm_reference(x, weight, 1e-6f);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::fabs(normed[i] - expected[i]) > 1e-4f * (1.0f + std::fabs(expected[i]))) {
      result.detail = "rmsnorm mismatch at " + std::to_string(i);
      return result;
    }
  }
  int index = -1;
  error = greedy_sample(logits, index);
  if (!error.empty()) {
    result.detail = "sampling failed: " + error;
    return result;
  }
  if (index != greedy_sample_reference(logits)) {
    result.detail = "sampling picked " + std::to_string(index) + ", expected " +
                    std::to_string(greedy_sample_reference(logits));
    return result;
  }
  result.ok = true;
  result.detail = "rmsnorm ok, sampling ok (token " + std::to_string(index) + ")";
  return result;
}

}  // namespace ninfer
