// The device function jit_probe_main.cu calls across objects (-rdc=true and a device link).
__device__ float twice(float x) { return 2.0f * x; }
