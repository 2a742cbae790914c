# The PORTABLE toolchain (matrix toolchain `bullseye-sysroot-cuda130`): kits whose glibc floor
# is Debian 11's 2.31, so that they start on Ubuntu 22.04, Debian 12 and RHEL 9, while they are
# compiled with GCC 14 (C++20), CMake 3.31 and CUDA 13.0 (13.1 builds too; README says why no
# matrix toolchain uses it) of Debian trixie.
#
# How: the image's GCC compiles and links against a sysroot of Debian 11 packages (glibc 2.31,
# zlib, GCC 10's unwinder), with libstdc++ 14.2.0 built against that sysroot and linked statically; the
# libraries a kit needs besides (OpenSSL 3.5, libcurl 8.14, FFmpeg 7.1) are built from Debian
# trixie's upstream tarballs against the same sysroot, into it (/opt/sysroot/usr/local). Every
# file is pinned by sha256 (context/sysroot/sources.txt, context/cuda-wheels/). The compiler
# wrappers (/opt/ninfer-kits/bin) and the CMake toolchain file (ENV CMAKE_TOOLCHAIN_FILE) make an
# ordinary `cmake -S -B` build use them; /etc/ninfer-kits/toolchain.toml tells the portable
# repair to resolve libraries in the sysroot first and where their records and licences are.
# dockerfiles/README.md says why each choice.
#
# Build args:
#   BASE_IMAGE     Debian trixie with the compilers and build tools, as the trixie toolchains'
#                  (scripts/make-base-image.sh ninfer-kits/debian-trixie-base:local). Its own
#                  FFmpeg and curl development files are never seen: headers come from the
#                  sysroot (--sysroot), libraries from its folders first (-L), and CMake and
#                  pkg-config search the sysroot only.
#   CUDA_WHEELS    the pinned CUDA wheel set, context/cuda-wheels/<set>.txt: 13.0 (or 13.1).
#   DEBIAN_MIRROR  where the pool paths of sources.txt are fetched (default: the base image's
#                  apt source).
# The build context: this file as Dockerfile, host-ca.crt (pip's CA) and dockerfiles/context/.
ARG BASE_IMAGE=ninfer-kits/debian-trixie-base:local
ARG CUDA_WHEELS=13.0

FROM ${BASE_IMAGE} AS cuda-wheels
ARG CUDA_WHEELS
COPY host-ca.crt /etc/ninfer-kits/host-ca.crt
ENV PIP_CERT=/etc/ninfer-kits/host-ca.crt \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=180 \
    DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-pip \
 && rm -rf /var/lib/apt/lists/*
COPY context/cuda-wheels/ /tmp/cuda-wheels/
RUN bash /tmp/cuda-wheels/install.sh "$CUDA_WHEELS"

# Each step its own layer and script: a change to one rebuilds it and those after it only.
FROM ${BASE_IMAGE} AS sysroot
ARG DEBIAN_MIRROR=
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends curl nasm xz-utils \
 && rm -rf /var/lib/apt/lists/*
COPY context/sysroot/compiler /opt/ninfer-kits/bin/gcc
COPY context/sysroot/glibc-2.28.h /opt/ninfer-kits/include/glibc-2.28.h
RUN ln /opt/ninfer-kits/bin/gcc /opt/ninfer-kits/bin/cc \
 && ln /opt/ninfer-kits/bin/gcc /opt/ninfer-kits/bin/g++ \
 && ln /opt/ninfer-kits/bin/gcc /opt/ninfer-kits/bin/c++
COPY context/sysroot/common.sh context/sysroot/sources.txt context/sysroot/sysroot.sh /opt/ninfer-kits/build/
RUN bash /opt/ninfer-kits/build/sysroot.sh
COPY context/sysroot/libstdcxx.sh /opt/ninfer-kits/build/
RUN bash /opt/ninfer-kits/build/libstdcxx.sh
COPY context/sysroot/openssl.sh /opt/ninfer-kits/build/
RUN bash /opt/ninfer-kits/build/openssl.sh
COPY context/sysroot/curl.sh /opt/ninfer-kits/build/
RUN bash /opt/ninfer-kits/build/curl.sh
COPY context/sysroot/ffmpeg.sh /opt/ninfer-kits/build/
RUN bash /opt/ninfer-kits/build/ffmpeg.sh

FROM ${BASE_IMAGE} AS toolchain
ARG CUDA_WHEELS
COPY --from=cuda-wheels /usr/local/cuda-${CUDA_WHEELS} /usr/local/cuda-${CUDA_WHEELS}
COPY --from=sysroot /opt /opt
COPY context/sysroot/toolchain.cmake /opt/ninfer-kits/toolchain.cmake
COPY context/sysroot/toolchain.toml /etc/ninfer-kits/toolchain.toml
COPY context/sysroot/LICENSE /opt/ninfer-kits/share/doc/ninfer-kits/LICENSE
COPY context/sysroot/glibc-floor-record.sh /opt/ninfer-kits/build/
RUN bash /opt/ninfer-kits/build/glibc-floor-record.sh
# The toolkit inside the sysroot as well (absolute links: the image's own), so that CMake's
# find_package(CUDAToolkit) finds it where the toolchain file lets it look.
RUN ln -s cuda-${CUDA_WHEELS} /usr/local/cuda \
 && ln -s /usr/local/cuda-${CUDA_WHEELS} /opt/sysroot/usr/local/cuda-${CUDA_WHEELS} \
 && ln -s /usr/local/cuda-${CUDA_WHEELS} /opt/sysroot/usr/local/cuda \
 && /usr/local/cuda/bin/nvcc --version
ENV PATH=/opt/ninfer-kits/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CUDA_HOME=/usr/local/cuda \
    CMAKE_TOOLCHAIN_FILE=/opt/ninfer-kits/toolchain.cmake \
    PKG_CONFIG_LIBDIR=/opt/sysroot/usr/local/lib/pkgconfig:/opt/sysroot/usr/lib/x86_64-linux-gnu/pkgconfig:/opt/sysroot/usr/share/pkgconfig \
    PKG_CONFIG_SYSROOT_DIR=/opt/sysroot \
    LANG=C.UTF-8

# The labels of each wheel set; the last stage picks one (the classic builder has no
# conditional LABEL, but FROM expands build args).
FROM toolchain AS labels-13.0
LABEL org.ninfer-kits.toolchain=bullseye-sysroot-cuda130 \
      org.ninfer-kits.cuda=13.0.88 \
      org.ninfer-kits.glibc-floor=2.28

FROM toolchain AS labels-13.1
LABEL org.ninfer-kits.toolchain=bullseye-sysroot-cuda131 \
      org.ninfer-kits.cuda=13.1.115 \
      org.ninfer-kits.glibc-floor=2.28

FROM labels-${CUDA_WHEELS}
