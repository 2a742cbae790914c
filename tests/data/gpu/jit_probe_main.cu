// A kernel calling a device function of another file (jit_probe_helper.cu): separable
// compilation with a device link. Built for sm_86 two ways (test_verify_gpu.py) and run on an
// H200 (9.0): h200-jit-probe.txt has what each printed.
#include <cstdio>
__device__ float twice(float x);
__global__ void apply(float* data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = twice(data[i]);
}
int main() {
    float* d = nullptr;
    if (cudaMalloc(&d, 64 * sizeof(float)) != cudaSuccess) { std::puts("cudaMalloc failed"); return 2; }
    apply<<<1, 64>>>(d, 64);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    std::printf("launch: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
