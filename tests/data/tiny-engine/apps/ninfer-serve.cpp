// ninfer-serve of the tiny engine: its version and libraries (it serves nothing).
#include <cstdio>

const char* tiny_libraries();

int main() {
  std::printf("ninfer-serve %s (%s)\n%s\n", NINFER_VERSION, NINFER_BUILD_INFO, tiny_libraries());
  return 0;
}
