// ninfer-serve: a minimal OpenAI-style endpoint (GET /v1/models) on loopback by default.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ninfer/ninfer.hpp"

namespace {

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: ninfer-serve [--host ADDR] [--port N] [--once] [--version] [--help]\n"
               "\n"
               "Serves GET /v1/models over HTTP/1.1; every other path answers 404.\n"
               "\n"
               "  --host ADDR  IPv4 address to listen on (default 127.0.0.1, loopback only)\n"
               "  --port N     TCP port, 0 picks a free one (default 8080)\n"
               "  --once       answer one request, then exit\n"
               "  --version    print the version line\n"
               "  --help       show this help\n");
}

bool parse_port(const char* text, int& port) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > 65535) return false;
  port = static_cast<int>(value);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ninfer::ServeOptions options;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (std::strcmp(arg, "--version") == 0) {
      std::printf("%s\n", ninfer::version_line("ninfer-serve").c_str());
      return 0;
    }
    if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (std::strcmp(arg, "--once") == 0) {
      options.once = true;
    } else if (std::strcmp(arg, "--host") == 0 && has_value) {
      options.host = argv[++i];
    } else if (std::strcmp(arg, "--port") == 0 && has_value) {
      if (!parse_port(argv[++i], options.port)) {
        std::fprintf(stderr, "ninfer-serve: --port needs a number from 0 to 65535, not '%s'\n",
                     argv[i]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "ninfer-serve: unknown or incomplete option '%s'\n", arg);
      usage(stderr);
      return 2;
    }
  }
  // A real engine would load its model on the GPU here; the example says what CUDA sees, runs
  // the same kernel smoke test as `ninfer` when a device exists (so the server carries device
  // code like the real one), and serves either way.
  std::printf("ninfer-serve: FFmpeg %s\n", ninfer::media_info().c_str());
  const ninfer::DeviceReport report = ninfer::query_devices();
  if (report.error.empty()) {
    std::printf("ninfer-serve: CUDA devices: %d\n", report.count);
  } else {
    std::printf("ninfer-serve: CUDA devices: 0 (CUDA error: %s)\n", report.error.c_str());
  }
  const ninfer::SmokeResult smoke = ninfer::smoke_test(ninfer::tokenize("ninfer-serve warm-up"));
  if (smoke.ran && !smoke.ok) {
    std::fprintf(stderr, "ninfer-serve: kernel smoke test failed: %s\n", smoke.detail.c_str());
    return 1;
  }
  return ninfer::serve(options);
}
