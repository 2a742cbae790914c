/* Preloaded by scripts/kit-startup-check.sh: runs in place of the program's main, after every
 * constructor (so its fatbins are registered), creates the CUDA context (with
 * CUDA_MODULE_LOADING=EAGER that loads every module), says how long that took, and exits. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

typedef int (*main_fn)(int, char **, char **);
typedef int (*start_main_fn)(main_fn, int, char **, void (*)(void), void (*)(void),
                             void (*)(void), void *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int start_cuda(int argc, char **argv, char **envp) {
    (void)argc; (void)argv; (void)envp;
    int (*cuda_free)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaFree");
    const char *(*error_name)(int) = (const char *(*)(int))dlsym(RTLD_DEFAULT, "cudaGetErrorName");
    if (cuda_free == NULL) {
        printf("startcuda: the program has no cudaFree\n");
        fflush(stdout);
        _exit(3);
    }
    double started = now();
    int error = cuda_free(NULL);
    printf("startcuda: cudaFree(0) -> %s in %.3f s\n",
           error_name != NULL ? error_name(error) : "?", now() - started);
    fflush(stdout);
    _exit(error == 0 ? 0 : 1);
}

int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
    (void)main;
    start_main_fn real = (start_main_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    return real(start_cuda, argc, argv, init, fini, rtld_fini, stack_end);
}
