/* A stand-in for the NVIDIA driver's libcuda.so.1 with the same C symbols and signatures (cuda.h)
 * that ninfer_kits.verify.gpu calls through ctypes, returning fixed answers, so that the tests
 * exercise the real marshalling on a machine with no GPU and no driver.
 *
 * Environment (read on each call):
 *   FAKE_CUDA_VERSION  what cuDriverGetVersion reports (default 13000: CUDA 13.0)
 *   FAKE_CUDA_INIT     what cuInit returns (default 0; 100 = CUDA_ERROR_NO_DEVICE,
 *                      803 = CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
 *   FAKE_CUDA_HANG=1   cuInit never returns;  FAKE_CUDA_CRASH=1  cuInit dereferences NULL
 *   FAKE_GPUS          "NAME=MAJOR.MINOR;..." (default "NVIDIA H200=9.0;NVIDIA GeForce RTX 3090=8.6")
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;

#define MAX_GPUS 16
static char names[MAX_GPUS][128];
static int majors[MAX_GPUS], minors[MAX_GPUS];
static int gpu_count = -1;

static void load_gpus(void) {
    const char *spec = getenv("FAKE_GPUS");
    char copy[2048];
    snprintf(copy, sizeof copy, "%s",
             spec ? spec : "NVIDIA H200=9.0;NVIDIA GeForce RTX 3090=8.6");
    gpu_count = 0;
    for (char *save = NULL, *item = strtok_r(copy, ";", &save); item && gpu_count < MAX_GPUS;
         item = strtok_r(NULL, ";", &save)) {
        char *equals = strrchr(item, '=');
        if (!equals) continue;
        *equals = '\0';
        snprintf(names[gpu_count], sizeof names[0], "%s", item);
        if (sscanf(equals + 1, "%d.%d", &majors[gpu_count], &minors[gpu_count]) == 2) gpu_count++;
    }
}

static int env_int(const char *name, int fallback) {
    const char *value = getenv(name);
    return value && *value ? atoi(value) : fallback;
}

static int initialised = 0;

CUresult cuDriverGetVersion(int *version) {
    if (!version) return 1; /* CUDA_ERROR_INVALID_VALUE */
    *version = env_int("FAKE_CUDA_VERSION", 13000);
    return 0;
}

CUresult cuInit(unsigned int flags) {
    if (flags != 0) return 1;
    if (env_int("FAKE_CUDA_HANG", 0)) for (;;) pause();
    if (env_int("FAKE_CUDA_CRASH", 0)) { volatile int *nowhere = NULL; return *nowhere; }
    CUresult result = env_int("FAKE_CUDA_INIT", 0);
    if (result == 0) { initialised = 1; load_gpus(); }
    return result;
}

CUresult cuDeviceGetCount(int *count) {
    if (!initialised) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    if (!count) return 1;
    *count = gpu_count;
    return 0;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (!initialised) return 3;
    if (!device || ordinal < 0 || ordinal >= gpu_count) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *device = ordinal;
    return 0;
}

CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    if (!initialised) return 3;
    if (!value || device < 0 || device >= gpu_count) return 101;
    if (attribute == 75) { *value = majors[device]; return 0; } /* ..._COMPUTE_CAPABILITY_MAJOR */
    if (attribute == 76) { *value = minors[device]; return 0; } /* ..._COMPUTE_CAPABILITY_MINOR */
    return 1;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
    if (!initialised) return 3;
    if (!name || length <= 0 || device < 0 || device >= gpu_count) return 101;
    snprintf(name, (size_t)length, "%s", names[device]);
    return 0;
}

CUresult cuGetErrorName(CUresult error, const char **text) {
    if (!text) return 1;
    switch (error) {
    case 0: *text = "CUDA_SUCCESS"; return 0;
    case 3: *text = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *text = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 803: *text = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return 0;
    default: *text = NULL; return 1;
    }
}
