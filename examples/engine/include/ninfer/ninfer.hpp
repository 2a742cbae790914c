// ninfer-example: the small core that both apps link (static library ninfer_core).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {

// version.cpp: facts fixed at build time.
const char* version();     // from the VERSION file, e.g. "0.3.0-example"
const char* build_info();  // NINFER_BUILD_INFO, e.g. "local build"
const char* cuda_arch();   // the one architecture built, e.g. "sm_86"
std::string cuda_version_built();  // CUDA runtime headers used, e.g. "13.0"
std::string version_line(std::string_view program);  // "ninfer 0.3.0-example (sm_86, ...)"
std::string curl_info();   // curl_version() of the libcurl loaded at run time
// media.cpp: "libavformat 61.7.100, libavcodec ..." of the FFmpeg libraries loaded at run time.
std::string media_info();

// device.cpp: what the CUDA runtime and driver report; never fails, only describes.
struct DeviceReport {
  int runtime_version = 0;  // cudaRuntimeGetVersion, e.g. 13000
  int driver_version = 0;   // cudaDriverGetVersion, 0 when no driver is installed
  int count = 0;            // devices usable by this process
  std::string error;        // CUDA error string when the device query failed
  std::vector<std::string> devices;  // "NVIDIA GeForce RTX 3090 (sm_86)"
};
DeviceReport query_devices();
std::string format_version(int cuda_version);  // 13000 -> "13.0"

// kernels/*.cu: tiny kernels run once as a smoke test when a device exists.
// Each returns an empty string on success, or what went wrong (usually the CUDA error string).
// Tensors travel as row-major float vectors; the kernels below store them on the device in the
// element type `dtype` names and always compute in float.
enum class DType { f32, f16, bf16 };
const char* dtype_name(DType dtype);  // "f32", "f16", "bf16"

// rmsnorm.cu: each row of x [rows, cols] -> x / sqrt(mean(x^2) + eps) * weight.
std::string rmsnorm(DType dtype, const std::vector<float>& x, int rows, int cols,
                    const std::vector<float>& weight, float eps, std::vector<float>& out);
// sampling.cu: greedy sampling, the index of the largest logit of each row of logits
// [rows, vocab] (lowest index wins a tie).
std::string greedy_sample(DType dtype, const std::vector<float>& logits, int rows,
                          std::vector<std::int32_t>& indices);
// softmax.cu: each row of x [rows, cols] -> softmax(row / temperature).
std::string softmax(DType dtype, const std::vector<float>& x, int rows, int cols,
                    float temperature, std::vector<float>& out);
// rope.cu: rotary position embedding (rotate-half form) of x [tokens, heads, head_dim] at
// positions [tokens], frequencies base^(-2i/head_dim); head_dim even.
std::string rope(DType dtype, const std::vector<float>& x,
                 const std::vector<std::int32_t>& positions, int heads, int head_dim, float base,
                 std::vector<float>& out);
// silu_mul.cu: SwiGLU, x [rows, 2 * cols] = gate | up -> out [rows, cols] = silu(gate) * up.
std::string silu_mul(DType dtype, const std::vector<float>& x, int rows, int cols,
                     std::vector<float>& out);
// embedding.cu: out [ids, dim] = table[id] * scale; ids outside [0, vocab) give zero rows.
std::string embedding(DType dtype, const std::vector<float>& table, int vocab, int dim,
                      const std::vector<std::int32_t>& ids, float scale, std::vector<float>& out);
// residual_add.cu: the residual stream update residual += alpha * x, in place.
std::string residual_add(DType dtype, const std::vector<float>& x, float alpha,
                         std::vector<float>& residual);
// layernorm.cu: each row of x [rows, cols] -> (x - mean) / sqrt(var + eps) * gamma + beta.
std::string layernorm(DType dtype, const std::vector<float>& x, int rows, int cols,
                      const std::vector<float>& gamma, const std::vector<float>& beta, float eps,
                      std::vector<float>& out);
// topk.cu: the k largest entries of each row of x [rows, cols], largest first (lowest index
// wins a tie) -> values and indices [rows, k]; 1 <= k <= min(cols, 64).
std::string top_k(DType dtype, const std::vector<float>& x, int rows, int cols, int k,
                  std::vector<float>& values, std::vector<std::int32_t>& indices);
// attention_scores.cu: one decode step, q [heads, head_dim] against keys k [seq, kv_heads,
// head_dim] (grouped-query: heads a multiple of kv_heads) -> scores [heads, seq] = scale * q.k
// in float; head_dim <= 256.
std::string attention_scores(DType dtype, const std::vector<float>& q,
                             const std::vector<float>& k, int heads, int kv_heads, int head_dim,
                             float scale, std::vector<float>& scores);
// kv_append.cu: writes k and v [tokens, kv_heads, head_dim] into the caches [slots, kv_heads,
// head_dim] at slots[token] (paged-cache "reshape and cache"); a slot < 0 skips the token.
std::string kv_append(DType dtype, const std::vector<float>& k, const std::vector<float>& v,
                      const std::vector<std::int32_t>& slots, int kv_heads, int head_dim,
                      std::vector<float>& k_cache, std::vector<float>& v_cache);
// quantize_int8.cu: symmetric per-row int8, x [rows, cols] -> q [rows, cols] and scales [rows]
// with x ~= q * scale, scale = max|x| / 127 (1 for an all-zero row).
std::string quantize_int8(DType dtype, const std::vector<float>& x, int rows, int cols,
                          std::vector<std::int8_t>& q, std::vector<float>& scales);
// dequant_rows.cu: out [rows] = scale[row] * sum of the fp16 values whose raw 16-bit patterns
// are bits [rows, cols]; the scales are applied in bf16, as quantized weight files store them.
std::string dequant_rows(const std::vector<std::uint16_t>& bits, const std::vector<float>& scales,
                         int rows, int cols, std::vector<float>& out);
std::vector<std::uint16_t> to_f16_bits(const std::vector<float>& values);  // round to nearest

// CPU references for the kernels, to check what the device computed.
std::vector<float> rmsnorm_reference(const std::vector<float>& x, int rows, int cols,
                                     const std::vector<float>& weight, float eps);
std::vector<std::int32_t> greedy_sample_reference(const std::vector<float>& logits, int rows);
std::vector<float> softmax_reference(const std::vector<float>& x, int rows, int cols,
                                     float temperature);
std::vector<float> rope_reference(const std::vector<float>& x,
                                  const std::vector<std::int32_t>& positions, int heads,
                                  int head_dim, float base);
std::vector<float> silu_mul_reference(const std::vector<float>& x, int rows, int cols);
std::vector<float> embedding_reference(const std::vector<float>& table, int vocab, int dim,
                                       const std::vector<std::int32_t>& ids, float scale);
std::vector<float> residual_add_reference(const std::vector<float>& x, float alpha,
                                          const std::vector<float>& residual);
std::vector<float> layernorm_reference(const std::vector<float>& x, int rows, int cols,
                                       const std::vector<float>& gamma,
                                       const std::vector<float>& beta, float eps);
void top_k_reference(const std::vector<float>& x, int rows, int cols, int k,
                     std::vector<float>& values, std::vector<std::int32_t>& indices);
std::vector<float> attention_scores_reference(const std::vector<float>& q,
                                              const std::vector<float>& k, int heads,
                                              int kv_heads, int head_dim, float scale);
void kv_append_reference(const std::vector<float>& k, const std::vector<float>& v,
                         const std::vector<std::int32_t>& slots, int kv_heads, int head_dim,
                         std::vector<float>& k_cache, std::vector<float>& v_cache);
void quantize_int8_reference(const std::vector<float>& x, int rows, int cols,
                             std::vector<std::int8_t>& q, std::vector<float>& scales);
std::vector<float> dequant_rows_reference(const std::vector<std::uint16_t>& bits,
                                          const std::vector<float>& scales, int rows, int cols);

struct SmokeResult {
  bool ran = false;  // false: no device, nothing was launched
  bool ok = false;
  std::string detail;
};
SmokeResult smoke_test(const std::vector<std::int32_t>& tokens);

// tokenize.cpp: a byte-level toy tokenizer (words -> stable ids).
std::vector<std::int32_t> tokenize(std::string_view text);

// http.cpp: a single-threaded HTTP/1.1 server on plain POSIX sockets.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};
Response route(std::string_view method, std::string_view target);
std::string models_json();

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  bool once = false;  // answer one request, then return
};
// Returns a process exit code; prints "listening on http://HOST:PORT" once bound.
int serve(const ServeOptions& options);

}  // namespace ninfer
