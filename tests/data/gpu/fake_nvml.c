/* A stand-in for the NVIDIA driver's libnvidia-ml.so.1 (NVML) with the C symbols and signatures
 * (nvml.h) that ninfer_kits.verify.gpu calls through ctypes. Device handles are pointers, as
 * NVML's opaque nvmlDevice_t is.
 *
 * Environment: FAKE_NVML_DRIVER (default "580.159.04"), FAKE_NVML_CUDA (default 13000),
 * FAKE_NVML_INIT (what nvmlInit_v2 returns, default 0), FAKE_GPUS as in fake_libcuda.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
struct nvmlDevice_st { char name[128]; int major, minor; };
typedef struct nvmlDevice_st *nvmlDevice_t;

#define MAX_GPUS 16
static struct nvmlDevice_st devices[MAX_GPUS];
static unsigned int device_count;
static int initialised = 0;

static int env_int(const char *name, int fallback) {
    const char *value = getenv(name);
    return value && *value ? atoi(value) : fallback;
}

nvmlReturn_t nvmlInit_v2(void) {
    nvmlReturn_t result = env_int("FAKE_NVML_INIT", 0);
    if (result != 0) return result;
    const char *spec = getenv("FAKE_GPUS");
    char copy[2048];
    snprintf(copy, sizeof copy, "%s",
             spec ? spec : "NVIDIA H200=9.0;NVIDIA GeForce RTX 3090=8.6");
    device_count = 0;
    for (char *save = NULL, *item = strtok_r(copy, ";", &save); item && device_count < MAX_GPUS;
         item = strtok_r(NULL, ";", &save)) {
        char *equals = strrchr(item, '=');
        if (!equals) continue;
        *equals = '\0';
        struct nvmlDevice_st *device = &devices[device_count];
        snprintf(device->name, sizeof device->name, "%s", item);
        if (sscanf(equals + 1, "%d.%d", &device->major, &device->minor) == 2) device_count++;
    }
    initialised = 1;
    return 0;
}

nvmlReturn_t nvmlShutdown(void) { initialised = 0; return 0; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialised) return 1; /* NVML_ERROR_UNINITIALIZED */
    const char *value = getenv("FAKE_NVML_DRIVER");
    if (!version || length < 80) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    snprintf(version, length, "%s", value ? value : "580.159.04");
    return 0;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    if (!version) return 2;
    *version = env_int("FAKE_NVML_CUDA", 13000);
    return 0;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (!initialised) return 1;
    if (!count) return 2;
    *count = device_count;
    return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialised) return 1;
    if (!device || index >= device_count) return 2;
    *device = &devices[index];
    return 0;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    if (!initialised) return 1;
    if (!device || device < devices || device >= devices + device_count || !major || !minor)
        return 2;
    *major = device->major;
    *minor = device->minor;
    return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    if (!initialised) return 1;
    if (!device || device < devices || device >= devices + device_count || !name || length < 96)
        return 2;
    snprintf(name, length, "%s", device->name);
    return 0;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}
