// Separable compilation (-rdc=true): the kernel calls a device function defined in
// rdc_helper.cu, so the two objects need nvlink's device link.
#include <cstdio>

__device__ float twice(float x);

__global__ void apply(float* data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = twice(data[i]);
}

int main() {
    float* device = nullptr;
    cudaError_t status = cudaMalloc(&device, 64 * sizeof(float));
    std::printf("cudaMalloc: %s\n", cudaGetErrorString(status));
    if (status != cudaSuccess) return 1;
    apply<<<1, 64>>>(device, 64);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
