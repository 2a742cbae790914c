/* Bound to explicit glibc symbol versions, so the floor is known: dlopen@GLIBC_2.34 (the
   version glibc 2.34 gave it when libdl moved into libc) beside memcpy@GLIBC_2.14, to show
   that 2.34 > 2.14 compares numerically, not as text. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

__asm__(".symver dlopen,dlopen@GLIBC_2.34");
__asm__(".symver memcpy,memcpy@GLIBC_2.14");

int main(int argc, char **argv) {
    char buffer[32];
    memcpy(buffer, argv[0], argc > 0 ? 8 : 0);
    void *handle = dlopen("libm.so.6", RTLD_NOW);
    printf("%p %c\n", handle, buffer[0]);
    return 0;
}
