// The device function rdc_main.cu calls across objects (needs -rdc=true and a device link).
__device__ float twice(float x) { return 2.0f * x; }
