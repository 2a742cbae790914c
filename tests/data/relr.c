/* Pointers in initialised data: relative relocations, which `-z pack-relative-relocs` packs. */
#include <stdio.h>

static const char *const names[] = {"alpha", "beta", "gamma"};

int main(int argc, char **argv) {
    (void)argv;
    puts(names[argc % 3]);
    return 0;
}
