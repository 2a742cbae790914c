// Build facts: set by CMakeLists.txt as compile definitions on this file only.
#include <cuda_runtime_api.h>
#include <curl/curl.h>

#include "ninfer/ninfer.hpp"

#ifndef NINFER_VERSION
#error "NINFER_VERSION must be defined by the build (read from the VERSION file)"
#endif
#ifndef NINFER_BUILD_INFO
#define NINFER_BUILD_INFO "local build"
#endif
#ifndef NINFER_CUDA_ARCH
#error "NINFER_CUDA_ARCH must be defined by the build (from CMAKE_CUDA_ARCHITECTURES)"
#endif

namespace ninfer {

const char* version() { return NINFER_VERSION; }
const char* build_info() { return NINFER_BUILD_INFO; }
const char* cuda_arch() { return NINFER_CUDA_ARCH; }

std::string format_version(int cuda_version) {
  if (cuda_version <= 0) return "none";
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

std::string cuda_version_built() { return format_version(CUDART_VERSION); }

std::string version_line(std::string_view program) {
  std::string line(program);
  line += " ";
  line += version();
  line += " (";
  line += cuda_arch();
  line += ", CUDA " + cuda_version_built() + ", build: " + build_info() + ")";
  return line;
}

std::string curl_info() {
  const char* text = curl_version();
  return text != nullptr ? text : "unknown";
}

}  // namespace ninfer
