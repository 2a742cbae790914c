/* Force-included into every C and C++ compile of the bullseye-sysroot toolchain (the compiler
 * wrappers' -include): the kits it builds need no glibc newer than 2.28 (RHEL 8 and its
 * rebuilds), though they link against Debian 11's 2.31.
 *
 * glibc 2.29 gave exp, exp2, log, log2 and pow new symbol versions (faster code, the same
 * results within their documented error); the GLIBC_2.2.5 versions stay in every later libm.
 * A reference bound here to the old version loads on 2.28 and later alike. The other symbols
 * newer than 2.28 in glibc 2.31 have no older version to bind to: libstdc++ is configured not
 * to use pthread_cond_clockwait and its kin (libstdcxx.sh), and the matrix's glibc_floor fails
 * any build whose kit still needs one. Not for device code or assembler. */
#if defined(__x86_64__) && !defined(__ASSEMBLER__) && !defined(__CUDA_ARCH__)
__asm__(".symver exp,exp@GLIBC_2.2.5");
__asm__(".symver exp2,exp2@GLIBC_2.2.5");
__asm__(".symver log,log@GLIBC_2.2.5");
__asm__(".symver log2,log2@GLIBC_2.2.5");
__asm__(".symver pow,pow@GLIBC_2.2.5");
#endif
