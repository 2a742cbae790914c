# The CMake toolchain file of the bullseye-sysroot toolchain image (its ENV CMAKE_TOOLCHAIN_FILE:
# CMake >= 3.21 reads it for every new build folder, so a kit's recipe needs no option for it).
# The compilers are the image's wrappers (/opt/ninfer-kits/bin: GCC 14 against the Debian 11
# sysroot, libstdc++ linked statically); nvcc takes the same g++ as its host compiler.
set(CMAKE_SYSROOT /opt/sysroot)
set(CMAKE_C_COMPILER /opt/ninfer-kits/bin/gcc)
set(CMAKE_CXX_COMPILER /opt/ninfer-kits/bin/g++)
set(CMAKE_CUDA_HOST_COMPILER /opt/ninfer-kits/bin/g++)
# Libraries, headers and packages from the sysroot only: the image's own (glibc 2.41) must never
# be found. The CUDA toolkit is seen there through links the image makes in the sysroot.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# CUDA's static runtime for every program (nvcc's own default, and NVIDIA's EULA lets a program
# carry it): CUDA::cudart, which projects link by name, is libcudart_static.a, and CMake's own
# runtime choice for CUDA targets is the same. A portable kit then carries no libcudart.so: CUDA
# 13.1's needs libstdc++.so.6 and libgcc_s.so.1, has no RUNPATH and may not be edited. (What
# the static runtime needs, libdl and librt of glibc 2.31, CMake's CUDA::cudart brings.)
set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
set(CUDA_cudart_LIBRARY /opt/sysroot/usr/local/cuda/lib/libcudart_static.a
    CACHE FILEPATH "CUDA's runtime: the static library (the bullseye-sysroot toolchain)")
