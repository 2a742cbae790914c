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
// Each returns an empty string on success, or the CUDA error string.
std::string rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, float eps,
                    std::vector<float>& out);
std::string greedy_sample(const std::vector<float>& logits, int& index);

// CPU references for the kernels, to check what the device computed.
std::vector<float> rmsnorm_reference(const std::vector<float>& x,
                                     const std::vector<float>& weight, float eps);
int greedy_sample_reference(const std::vector<float>& logits);

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
