# The PRODUCTION toolchain (matrix toolchain `ubuntu2404-cuda131`): NVIDIA's CUDA 13.1 devel image
# on Ubuntu 24.04 plus what the upstreams need to configure and compile: CMake, Ninja, pkg-config,
# ccache, git, python3 (for build/recipe.py), GCC 13, libcurl and FFmpeg 6 dev packages.
# Kits built here need glibc 2.39 / Ubuntu 24.04 and link FFmpeg 6 (libavformat.so.60,
# libavcodec.so.60, libavutil.so.58, libswscale.so.7) — the seed kits' runtime floor.
#
# BASE_IMAGE: pin it by digest once known, e.g.
#   nvidia/cuda:13.1.2-devel-ubuntu24.04@sha256:<digest>
# No digest is recorded yet: the machine this file was written on reaches no container registry,
# so the tag could not be resolved (`docker buildx imagetools inspect` or `docker pull` + RepoDigests
# gives it where a registry is reachable).
#
# FFMPEG_AVFORMAT_MAJOR: the libavformat major version the image must end up with (60 = FFmpeg 6,
# Ubuntu 24.04). A guard, so a changed base cannot silently move the kits' soname floor.
#
# Build (no build context files needed besides this one):
#   docker build -f toolchain-cuda-ubuntu.Dockerfile -t ninfer-kits/toolchain-ubuntu2404-cuda131:local .
# Syntax/consistency check without a registry (Debian trixie has gcc-13 and the same package names,
# but FFmpeg 7):
#   docker build --network host --build-arg BASE_IMAGE=ninfer-kits/toolchain-trixie-cuda130:local \
#     --build-arg FFMPEG_AVFORMAT_MAJOR=61 -f toolchain-cuda-ubuntu.Dockerfile -t ninfer-kits/ubuntu-toolchain-check:local .
ARG BASE_IMAGE=nvidia/cuda:13.1.2-devel-ubuntu24.04
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
ARG FFMPEG_AVFORMAT_MAJOR=60
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates \
      ccache \
      cmake \
      g++-13 \
      gcc-13 \
      git \
      libc6-dev \
      libavcodec-dev \
      libavformat-dev \
      libavutil-dev \
      libcurl4-openssl-dev \
      libswscale-dev \
      ninja-build \
      pkg-config \
      python3 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log \
 && avformat="$(pkg-config --modversion libavformat)" \
 && if [ "${avformat%%.*}" != "$FFMPEG_AVFORMAT_MAJOR" ]; then \
      echo "libavformat is $avformat, expected major $FFMPEG_AVFORMAT_MAJOR" >&2; exit 1; \
    fi \
 && gcc-13 --version >/dev/null && g++-13 --version >/dev/null \
 && nvcc --version

# GCC 13 explicitly, for host code and as nvcc's host compiler (CMake reads these on configure).
ENV CC=gcc-13 \
    CXX=g++-13 \
    CUDAHOSTCXX=g++-13 \
    LANG=C.UTF-8
LABEL org.ninfer-kits.toolchain=ubuntu2404-cuda131 \
      org.ninfer-kits.cuda=13.1.2
