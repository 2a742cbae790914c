# The TEST runtime image: a plain Debian trixie (minbase) with only what a kit of the test
# toolchain (`trixie-cuda130`) needs at run time — libcurl, libstdc++ and the CUDA runtime
# library libcudart.so.13 from the pinned `nvidia-cuda-runtime` wheel. No GPU driver: a kit's
# binaries load and answer --version, but cannot run a kernel.
#
# libcudart is found through the kit's RUNPATH only (no ld.so.conf entry, no LD_LIBRARY_PATH), so a
# kit whose RUNPATH is wrong fails here. Binaries built by the test toolchain carry
# RUNPATH /usr/local/cuda-13.0/lib (CMake records the resolved toolkit folder, not the
# /usr/local/cuda link); the library sits there, and /usr/local/cuda, lib64 and
# targets/x86_64-linux/lib lead to the same folder, so every usual spelling resolves.
#
# BASE_IMAGE: a plain trixie minbase root, made with
#   scripts/make-base-image.sh ninfer-kits/debian-trixie-minbase:local trixie --include ''
# The build context holds this file and `host-ca.crt` (the CA bundle pip needs to reach PyPI,
# e.g. a copy of /etc/ssl/certs/ca-certificates.crt); it only lives in the first stage.
#   docker build --network host -f runtime-wheels-debian.Dockerfile -t ninfer-kits/runtime-trixie-cuda130:local CONTEXT
ARG BASE_IMAGE=ninfer-kits/debian-trixie-minbase:local

FROM ${BASE_IMAGE} AS cudart
COPY host-ca.crt /etc/ninfer-kits/host-ca.crt
ENV PIP_CERT=/etc/ninfer-kits/host-ca.crt \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=180 \
    DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-pip \
 && rm -rf /var/lib/apt/lists/*
RUN echo 'nvidia-cuda-runtime==13.0.96 --hash=sha256:7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548' \
      > /tmp/cudart.txt \
 && python3 -m pip install --no-deps --no-compile --only-binary=:all: --require-hashes \
      --target /tmp/wheels -r /tmp/cudart.txt \
 && mkdir -p /usr/local/cuda-13.0/lib /usr/local/cuda-13.0/targets/x86_64-linux \
 && cp -a /tmp/wheels/nvidia/cu13/lib/libcudart.so.13 /usr/local/cuda-13.0/lib/ \
 && ln -s lib /usr/local/cuda-13.0/lib64 \
 && ln -s ../../lib /usr/local/cuda-13.0/targets/x86_64-linux/lib

FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4t64 libstdc++6 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log
COPY --from=cudart /usr/local/cuda-13.0 /usr/local/cuda-13.0
RUN ln -s cuda-13.0 /usr/local/cuda
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8
LABEL org.ninfer-kits.runtime=trixie-cuda130 \
      org.ninfer-kits.cuda=13.0.88 \
      org.ninfer-kits.cudart="nvidia-cuda-runtime 13.0.96 (libcudart.so.13)"
