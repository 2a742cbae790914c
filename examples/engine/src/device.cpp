// Device query and the kernel smoke test; both degrade to a description without a GPU.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

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

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

namespace {

// The smoke test runs every kernel in every element type, at widths that pick each of the
// kernels' block sizes (64, 128 and 256 threads), and compares with the CPU references.
constexpr DType kDTypes[] = {DType::f32, DType::f16, DType::bf16};
constexpr int kWidths[] = {40, 100, 300};
constexpr int kRows = 3;

std::size_t elements(int a, int b) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b);
}

// How far a result may be from the reference, relative to 1 + |reference|: the kernels compute
// in float and round once when they store, a few units in the last place of the element type.
float tolerance(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 1e-4f;
    case DType::f16:
      return 4e-3f;
    case DType::bf16:
      return 3e-2f;
  }
  return 0.0f;
}

// n inputs derived from the prompt tokens; each is a multiple of 1/16 in [-4, 4), which all
// three element types hold exactly, so the kernels see the very values the references see.
std::vector<float> inputs(const std::vector<std::int32_t>& tokens, std::size_t n,
                          std::uint32_t salt) {
  std::vector<float> values(n);
  std::uint32_t state = salt * 2654435761u;
  for (std::size_t i = 0; i < n; ++i) {
    const auto token = tokens.empty() ? 1u : static_cast<std::uint32_t>(tokens[i % tokens.size()]);
    state = state * 1664525u + 1013904223u + token;
    values[i] = static_cast<float>(static_cast<int>((state >> 16) % 128u) - 64) / 16.0f;
  }
  return values;
}

// Empty when `got` matches `want` within tol * (1 + |want|), else where it first differs.
std::string compare(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " values, expected " +
           std::to_string(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol * (1.0f + std::fabs(want[i]))))
      return "mismatch at " + std::to_string(i) + ": " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]);
  }
  return {};
}

template <typename Int>
std::string compare_exact(const std::vector<Int>& got, const std::vector<Int>& want, int slack) {
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " values, expected " +
           std::to_string(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const int difference = static_cast<int>(got[i]) - static_cast<int>(want[i]);
    if (difference > slack || difference < -slack)
      return "mismatch at " + std::to_string(i) + ": " + std::to_string(got[i]) +
             ", expected " + std::to_string(want[i]);
  }
  return {};
}

using Tokens = std::vector<std::int32_t>;

std::string check_rmsnorm(DType dtype, const Tokens& tokens, int width) {
  const auto x = inputs(tokens, elements(kRows, width), 1);
  const auto weight = inputs(tokens, elements(1, width), 2);
  std::vector<float> out;
  const std::string error = rmsnorm(dtype, x, kRows, width, weight, 1e-6f, out);
  if (!error.empty()) return error;
  return compare(out, rmsnorm_reference(x, kRows, width, weight, 1e-6f), tolerance(dtype));
}

std::string check_sampling(DType dtype, const Tokens& tokens, int width) {
  const auto logits = inputs(tokens, elements(kRows, width), 3);  // with ties: lowest index wins
  std::vector<std::int32_t> picked;
  const std::string error = greedy_sample(dtype, logits, kRows, picked);
  if (!error.empty()) return error;
  return compare_exact(picked, greedy_sample_reference(logits, kRows), 0);
}

std::string check_softmax(DType dtype, const Tokens& tokens, int width) {
  const auto x = inputs(tokens, elements(kRows, width), 4);
  std::vector<float> out;
  const std::string error = softmax(dtype, x, kRows, width, 0.75f, out);
  if (!error.empty()) return error;
  return compare(out, softmax_reference(x, kRows, width, 0.75f), tolerance(dtype));
}

std::string check_rope(DType dtype, const Tokens& tokens, int width) {
  const int heads = 2;  // head_dim = width: every width above is even
  std::vector<std::int32_t> positions;
  for (std::size_t t = 0; t < 4; ++t)
    positions.push_back(static_cast<std::int32_t>(t * 7 + tokens.size() % 5));
  const auto x = inputs(tokens, positions.size() * elements(heads, width), 5);
  std::vector<float> out;
  const std::string error = rope(dtype, x, positions, heads, width, 10000.0f, out);
  if (!error.empty()) return error;
  return compare(out, rope_reference(x, positions, heads, width, 10000.0f), tolerance(dtype));
}

std::string check_silu_mul(DType dtype, const Tokens& tokens, int width) {
  const auto x = inputs(tokens, 2 * elements(kRows, width), 6);
  std::vector<float> out;
  const std::string error = silu_mul(dtype, x, kRows, width, out);
  if (!error.empty()) return error;
  return compare(out, silu_mul_reference(x, kRows, width), tolerance(dtype));
}

std::string check_embedding(DType dtype, const Tokens& tokens, int width) {
  const int vocab = 37;
  const auto table = inputs(tokens, elements(vocab, width), 7);
  std::vector<std::int32_t> ids = {-1, vocab};  // outside the table: zero rows
  for (const std::int32_t token : tokens) ids.push_back(token % vocab);
  std::vector<float> out;
  const std::string error = embedding(dtype, table, vocab, width, ids, 1.5f, out);
  if (!error.empty()) return error;
  return compare(out, embedding_reference(table, vocab, width, ids, 1.5f), tolerance(dtype));
}

std::string check_residual_add(DType dtype, const Tokens& tokens, int width) {
  const auto x = inputs(tokens, elements(kRows, width), 8);
  std::vector<float> residual = inputs(tokens, x.size(), 9);
  const std::vector<float> expected = residual_add_reference(x, 0.5f, residual);
  const std::string error = residual_add(dtype, x, 0.5f, residual);
  if (!error.empty()) return error;
  return compare(residual, expected, tolerance(dtype));
}

std::string check_layernorm(DType dtype, const Tokens& tokens, int width) {
  const auto x = inputs(tokens, elements(kRows, width), 10);
  const auto gamma = inputs(tokens, elements(1, width), 11);
  const auto beta = inputs(tokens, elements(1, width), 12);
  std::vector<float> out;
  const std::string error = layernorm(dtype, x, kRows, width, gamma, beta, 1e-5f, out);
  if (!error.empty()) return error;
  return compare(out, layernorm_reference(x, kRows, width, gamma, beta, 1e-5f), tolerance(dtype));
}

std::string check_top_k(DType dtype, const Tokens& tokens, int width) {
  const int k = 7;
  const auto x = inputs(tokens, elements(kRows, width), 13);  // with ties: lowest index first
  std::vector<float> values, expected_values;
  std::vector<std::int32_t> indices, expected_indices;
  const std::string error = top_k(dtype, x, kRows, width, k, values, indices);
  if (!error.empty()) return error;
  top_k_reference(x, kRows, width, k, expected_values, expected_indices);
  const std::string wrong = compare_exact(indices, expected_indices, 0);
  return wrong.empty() ? compare(values, expected_values, 0.0f) : wrong;
}

std::string check_attention_scores(DType dtype, const Tokens& tokens, int width) {
  const int heads = 4, kv_heads = 2, head_dim = 64;  // seq = width keys
  const auto q = inputs(tokens, elements(heads, head_dim), 14);
  const auto k = inputs(tokens, elements(width, kv_heads * head_dim), 15);
  std::vector<float> scores;
  const std::string error =
      attention_scores(dtype, q, k, heads, kv_heads, head_dim, 0.125f, scores);
  if (!error.empty()) return error;
  return compare(scores, attention_scores_reference(q, k, heads, kv_heads, head_dim, 0.125f),
                 tolerance(dtype));
}

std::string check_kv_append(DType dtype, const Tokens& tokens, int width) {
  const int kv_heads = 2, head_dim = width / 2, cache_slots = 6;
  const std::vector<std::int32_t> slots = {3, -1, 0, cache_slots, 5};  // -1 and 6: skipped
  const auto k = inputs(tokens, slots.size() * static_cast<std::size_t>(width), 16);
  const auto v = inputs(tokens, k.size(), 17);
  std::vector<float> k_cache = inputs(tokens, elements(cache_slots, width), 18);
  std::vector<float> v_cache = inputs(tokens, k_cache.size(), 19);
  std::vector<float> expected_k = k_cache, expected_v = v_cache;
  kv_append_reference(k, v, slots, kv_heads, head_dim, expected_k, expected_v);
  const std::string error = kv_append(dtype, k, v, slots, kv_heads, head_dim, k_cache, v_cache);
  if (!error.empty()) return error;
  const std::string wrong = compare(k_cache, expected_k, 0.0f);
  return wrong.empty() ? compare(v_cache, expected_v, 0.0f) : wrong;
}

std::string check_quantize_int8(DType dtype, const Tokens& tokens, int width) {
  auto x = inputs(tokens, elements(kRows, width), 20);
  for (std::size_t i = 0; i < static_cast<std::size_t>(width); ++i)
    x[static_cast<std::size_t>(width) + i] = 0.0f;  // an all-zero row: scale 1
  std::vector<std::int8_t> q, expected_q;
  std::vector<float> scales, expected_scales;
  const std::string error = quantize_int8(dtype, x, kRows, width, q, scales);
  if (!error.empty()) return error;
  quantize_int8_reference(x, kRows, width, expected_q, expected_scales);
  const std::string wrong = compare_exact(q, expected_q, 1);  // a rounding tie may go either way
  return wrong.empty() ? compare(scales, expected_scales, 1e-6f) : wrong;
}

// The kernel reads fp16 bit patterns whatever `dtype` says: each dtype pass runs it once more.
std::string check_dequant_rows(DType dtype, const Tokens& tokens, int width) {
  const auto bits = to_f16_bits(inputs(tokens, elements(kRows, width), 21));
  const auto scales = inputs(tokens, elements(kRows, 1), 22);
  std::vector<float> out;
  const std::string error = dequant_rows(bits, scales, kRows, width, out);
  if (!error.empty()) return error;
  return compare(out, dequant_rows_reference(bits, scales, kRows, width), tolerance(dtype));
}

struct Check {
  const char* name;
  std::string (*run)(DType dtype, const Tokens& tokens, int width);
};

constexpr Check kChecks[] = {
    {"rmsnorm", check_rmsnorm},
    {"sampling", check_sampling},
    {"softmax", check_softmax},
    {"rope", check_rope},
    {"silu_mul", check_silu_mul},
    {"embedding", check_embedding},
    {"residual_add", check_residual_add},
    {"layernorm", check_layernorm},
    {"top_k", check_top_k},
    {"attention_scores", check_attention_scores},
    {"kv_append", check_kv_append},
    {"quantize_int8", check_quantize_int8},
    {"dequant_rows", check_dequant_rows},
};

}  // namespace

SmokeResult smoke_test(const std::vector<std::int32_t>& tokens) {
  SmokeResult result;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    result.detail = "skipped (no CUDA device)";
    return result;
  }
  result.ran = true;

  for (const Check& check : kChecks) {
    for (const DType dtype : kDTypes) {
      for (const int width : kWidths) {
        const std::string failure = check.run(dtype, tokens, width);
        if (!failure.empty()) {
          result.detail = std::string(check.name) + " (" + dtype_name(dtype) + ", width " +
                          std::to_string(width) + ") failed: " + failure;
          return result;
        }
      }
    }
  }

  // The token the example "generates": greedy sampling over logits made from the prompt.
  std::vector<float> logits(97);
  for (std::size_t i = 0; i < logits.size(); ++i)
    logits[i] = std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(tokens.size()));
  std::vector<std::int32_t> picked;
  const std::string error = greedy_sample(DType::f32, logits, 1, picked);
  if (!error.empty()) {
    result.detail = "sampling failed: " + error;
    return result;
  }
  result.ok = true;
  result.detail = std::to_string(std::size(kChecks)) + " kernels ok in f32, f16 and bf16 (token " +
                  std::to_string(picked[0]) + ")";
  return result;
}

}  // namespace ninfer
