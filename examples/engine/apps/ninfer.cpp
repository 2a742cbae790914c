// ninfer: prints what this build is and what CUDA sees; runs the kernels when a GPU exists.
#include <cstdio>
#include <cstring>
#include <string>

#include "ninfer/ninfer.hpp"

namespace {

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: ninfer [--version] [--help] [--prompt TEXT]\n"
               "\n"
               "With no option, prints the version, the build information and the CUDA\n"
               "device query, then runs a small kernel smoke test when a device exists.\n"
               "\n"
               "  --version      print one line: version, CUDA architecture, build info\n"
               "  --prompt TEXT  text to tokenize and feed to the smoke test\n"
               "  --help         show this help\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string prompt = "hello from ninfer";
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    if (std::strcmp(arg, "--version") == 0) {
      std::printf("%s\n", ninfer::version_line("ninfer").c_str());
      return 0;
    }
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (std::strcmp(arg, "--prompt") == 0 && i + 1 < argc) {
      prompt = argv[++i];
      continue;
    }
    std::fprintf(stderr, "ninfer: unknown or incomplete option '%s'\n", arg);
    usage(stderr);
    return 2;
  }

  std::printf("%s\n", ninfer::version_line("ninfer").c_str());
  std::printf("build: %s\n", ninfer::build_info());
  std::printf("libcurl: %s\n", ninfer::curl_info().c_str());
  std::printf("FFmpeg: %s\n", ninfer::media_info().c_str());

  const ninfer::DeviceReport report = ninfer::query_devices();
  std::printf("CUDA runtime: %s\n", ninfer::format_version(report.runtime_version).c_str());
  std::printf("CUDA driver: %s\n", ninfer::format_version(report.driver_version).c_str());
  if (!report.error.empty()) {
    std::printf("CUDA devices: 0 (CUDA error: %s)\n", report.error.c_str());
  } else {
    std::printf("CUDA devices: %d\n", report.count);
    for (std::size_t i = 0; i < report.devices.size(); ++i)
      std::printf("  device %zu: %s\n", i, report.devices[i].c_str());
  }

  const auto tokens = ninfer::tokenize(prompt);
  std::printf("prompt tokens: %zu\n", tokens.size());
  const ninfer::SmokeResult smoke = ninfer::smoke_test(tokens);
  std::printf("kernel smoke test: %s\n", smoke.detail.c_str());
  return smoke.ran && !smoke.ok ? 1 : 0;
}
