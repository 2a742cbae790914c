// One whole-program kernel (no device link), built for sm_86 with and without PTX and run on
// an H200 (9.0): h200-jit-probe.txt has what each printed.
#include <cstdio>
__global__ void apply(float* data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = 2.0f * data[i];
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
