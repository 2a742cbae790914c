# The PRODUCTION runtime image for the smoke test: NVIDIA's CUDA 13.1 runtime image on Ubuntu 24.04
# (it brings libcudart.so.13 and registers it with ldconfig) plus the libraries a kit of the
# `ubuntu2404-cuda131` toolchain loads: libcurl (libcurl.so.4), FFmpeg 6 (libavformat.so.60,
# libavcodec.so.60, libavutil.so.58, libswscale.so.7) and libstdc++.
#
# BASE_IMAGE: pin it by digest once known (nvidia/cuda:13.1.2-runtime-ubuntu24.04@sha256:<digest>);
# none is recorded because the machine this was written on reaches no container registry.
#
# RUNTIME_PACKAGES: the apt packages to add. The default holds Ubuntu 24.04's names — libcurl's
# package is libcurl4t64 there (the 64-bit time_t rename; `libcurl4` is only a virtual name that
# apt maps onto it). To check this file without a registry, build it on the Debian trixie minbase
# with trixie's names (FFmpeg 7 there):
#   docker build --network host --build-arg BASE_IMAGE=ninfer-kits/debian-trixie-minbase:local \
#     --build-arg RUNTIME_PACKAGES="libcurl4t64 libavformat61 libavcodec61 libavutil59 libswscale8 libstdc++6" \
#     -t ninfer-kits/ubuntu-runtime-check:local - < runtime-ubuntu.Dockerfile
# Build for real:
#   docker build -t ninfer-kits/runtime-ubuntu2404-cuda131:local - < runtime-ubuntu.Dockerfile
ARG BASE_IMAGE=nvidia/cuda:13.1.2-runtime-ubuntu24.04
FROM ${BASE_IMAGE}

ARG DEBIAN_FRONTEND=noninteractive
ARG RUNTIME_PACKAGES="libcurl4t64 libavformat60 libavcodec60 libavutil58 libswscale7 libstdc++6"
# RUNTIME_PACKAGES is split into words on purpose.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log
ENV LANG=C.UTF-8
LABEL org.ninfer-kits.runtime=ubuntu2404-cuda131 \
      org.ninfer-kits.cuda=13.1.2
