// The tiny engine's one kernel (a CUB block reduction), and the host functions around it.
#include <cub/block/block_reduce.cuh>
#include <cuda_runtime.h>
#include <curl/curl.h>
extern "C" {
#include <libavformat/avformat.h>
}

__global__ void sum(const float* values, float* total) {
  using Reduce = cub::BlockReduce<float, 32>;
  __shared__ typename Reduce::TempStorage storage;
  float block = Reduce(storage).Sum(values[threadIdx.x]);
  if (threadIdx.x == 0) *total = block;
}

// The CUDA runtime's word on running `sum` once: "no error", or why not (no device here).
const char* tiny_run_kernel() {
  float* values = nullptr;
  cudaError_t status = cudaMalloc(&values, 33 * sizeof(float));
  if (status == cudaSuccess) {
    sum<<<1, 32>>>(values, values + 32);
    status = cudaDeviceSynchronize();
    cudaFree(values);
  }
  return cudaGetErrorString(status);
}

// The libraries it links, as the upstreams do: libcurl's and libavformat's versions.
const char* tiny_libraries() {
  static char text[128];
  unsigned format = avformat_version();
  snprintf(text, sizeof text, "libcurl %s, libavformat %u.%u", curl_version_info(CURLVERSION_NOW)->version,
           format >> 16, (format >> 8) & 0xff);
  return text;
}
