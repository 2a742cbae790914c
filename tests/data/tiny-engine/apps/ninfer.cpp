// ninfer of the tiny engine: its version, its libraries, and what running one kernel gave.
#include <cstdio>

const char* tiny_run_kernel();
const char* tiny_libraries();

int main() {
  std::printf("ninfer %s (%s)\n%s\nCUDA: %s\n", NINFER_VERSION, NINFER_BUILD_INFO,
              tiny_libraries(), tiny_run_kernel());
  return 0;
}
