/* Preloaded by scripts/kit-startup-check.sh and scripts/upstream-gpu-check.sh: runs in place of
 * the program's main, after every constructor (so its fatbins are registered), creates the CUDA
 * context (with CUDA_MODULE_LOADING=EAGER that loads every module), says how long that took,
 * and exits. With STARTCUDA_KERNEL=<mangled name of one of the program's kernels> it then
 * launches that kernel <<<1, 1>>> (its parameters all zero) and waits for it: on a GPU that no
 * device code of the program fits, eager loading was seen to succeed, and only a launch says.
 *
 * The CUDA runtime's functions are the program's own when it links the static runtime (not in
 * its dynamic symbol table): they are then found in its .symtab (a kit's binaries keep it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef int (*main_fn)(int, char **, char **);
typedef int (*start_main_fn)(main_fn, int, char **, void (*)(void), void (*)(void),
                             void (*)(void), void *);
typedef struct { unsigned x, y, z; } dim3;
typedef int (*launch_fn)(const void *, dim3, dim3, void **, size_t, void *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int main_base(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr;  /* the first object is the program */
    return 1;
}

/* `name`'s address from the program's .symtab, or NULL. */
static void *from_symtab(const char *name) {
    int fd = open("/proc/self/exe", O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return NULL;
    const unsigned char *file = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (file == MAP_FAILED) return NULL;
    const Elf64_Ehdr *header = (const Elf64_Ehdr *)file;
    const Elf64_Shdr *sections = (const Elf64_Shdr *)(file + header->e_shoff);
    void *found = NULL;
    for (int i = 0; i < header->e_shnum && found == NULL; i++) {
        if (sections[i].sh_type != SHT_SYMTAB) continue;
        const Elf64_Sym *symbols = (const Elf64_Sym *)(file + sections[i].sh_offset);
        const char *names = (const char *)(file + sections[sections[i].sh_link].sh_offset);
        size_t count = sections[i].sh_size / sizeof(Elf64_Sym);
        for (size_t j = 0; j < count; j++) {
            if (ELF64_ST_TYPE(symbols[j].st_info) == STT_FUNC && symbols[j].st_value != 0 &&
                strcmp(names + symbols[j].st_name, name) == 0) {
                uintptr_t base = 0;
                dl_iterate_phdr(main_base, &base);
                found = (void *)(base + symbols[j].st_value);
                break;
            }
        }
    }
    munmap((void *)file, st.st_size);
    return found;
}

static void *resolve(const char *name) {
    void *address = dlsym(RTLD_DEFAULT, name);
    return address != NULL ? address : from_symtab(name);
}

static int start_cuda(int argc, char **argv, char **envp) {
    (void)argc; (void)argv; (void)envp;
    int (*cuda_free)(void *) = (int (*)(void *))resolve("cudaFree");
    const char *(*error_name)(int) = (const char *(*)(int))resolve("cudaGetErrorName");
    if (cuda_free == NULL || error_name == NULL) {
        printf("startcuda: the program has no cudaFree (neither exported nor in .symtab)\n");
        fflush(stdout);
        _exit(3);
    }
    printf("startcuda: the CUDA runtime is %s\n",
           dlsym(RTLD_DEFAULT, "cudaFree") != NULL ? "a shared library" : "the program's own");
    double started = now();
    int error = cuda_free(NULL);
    printf("startcuda: cudaFree(0) -> %s in %.3f s\n", error_name(error), now() - started);
    const char *kernel_name = getenv("STARTCUDA_KERNEL");
    if (error == 0 && kernel_name != NULL && *kernel_name != '\0') {
        launch_fn launch = (launch_fn)resolve("cudaLaunchKernel");
        int (*synchronize)(void) = (int (*)(void))resolve("cudaDeviceSynchronize");
        void *kernel = from_symtab(kernel_name);
        if (launch == NULL || synchronize == NULL || kernel == NULL) {
            printf("startcuda: cannot launch %s (kernel or runtime function not found)\n",
                   kernel_name);
            fflush(stdout);
            _exit(3);
        }
        static unsigned char zeros[4096];
        void *arguments[64];
        for (int i = 0; i < 64; i++) arguments[i] = zeros;
        dim3 one = {1, 1, 1};
        error = launch(kernel, one, one, arguments, 0, NULL);
        printf("startcuda: launching %s <<<1, 1>>> -> %s\n", kernel_name, error_name(error));
        if (error == 0) {
            error = synchronize();
            printf("startcuda: cudaDeviceSynchronize -> %s\n", error_name(error));
        }
    }
    fflush(stdout);
    _exit(error == 0 ? 0 : 1);
}

int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
    (void)main;
    start_main_fn real = (start_main_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    return real(start_cuda, argc, argv, init, fini, rtld_fini, stack_end);
}
