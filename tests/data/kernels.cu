// Two kernels so that every arch gets real SASS; the host side only launches them.
#include <cstdio>

__global__ void scale(float* data, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}

__global__ void offset(float* data, float amount, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] += amount;
}

int main() {
    float* device = nullptr;
    cudaError_t status = cudaMalloc(&device, 64 * sizeof(float));
    std::printf("cudaMalloc: %s\n", cudaGetErrorString(status));
    if (status != cudaSuccess) return 1;
    scale<<<1, 64>>>(device, 2.0f, 64);
    offset<<<1, 64>>>(device, 1.0f, 64);
    return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
