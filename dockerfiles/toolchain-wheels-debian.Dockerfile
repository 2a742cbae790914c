# The TEST toolchain (matrix toolchain `trixie-cuda130`): Debian trixie plus a CUDA 13.0 toolkit
# assembled from NVIDIA's PyPI wheels, so it builds with no container registry at all.
#
# BASE_IMAGE must already hold the compilers and the engine's build dependencies (build-essential,
# cmake, ninja-build, pkg-config, ccache, git, python3, libcurl and FFmpeg dev packages): make it
# with `scripts/make-base-image.sh ninfer-kits/debian-trixie-base:local`.
#
# The build context holds this file and `host-ca.crt`: the CA bundle pip needs to reach PyPI from
# inside the build (on machines whose TLS goes through a local CA; copy
# /etc/ssl/certs/ca-certificates.crt). pip and the CA only live in the first stage.
# Build with `--network host` (engines without a bridge network):
#   docker build --network host -f toolchain-wheels-debian.Dockerfile -t ninfer-kits/toolchain-trixie-cuda130:local CONTEXT
#
# The pins are this project's reference toolkit (nvcc V13.0.88, the dist-info folders in the
# host's /usr/local/cuda-13.0/dist-info), with the sha256 of every wheel file, so the toolkit is
# byte-for-byte the one the local builder uses. Note nvidia-cuda-runtime is 13.0.96, not 13.0.88.
ARG BASE_IMAGE=ninfer-kits/debian-trixie-base:local

FROM ${BASE_IMAGE} AS cuda-wheels
COPY host-ca.crt /etc/ninfer-kits/host-ca.crt
ENV PIP_CERT=/etc/ninfer-kits/host-ca.crt \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_DEFAULT_TIMEOUT=180 \
    DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-pip \
 && rm -rf /var/lib/apt/lists/*
RUN printf '%s\n' \
      'nvidia-cuda-nvcc==13.0.88 --hash=sha256:56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03' \
      'nvidia-cuda-crt==13.0.88 --hash=sha256:2c8043c7c9e02492716426e9919fc78d2c5b3b2a7a768a88e952676b08aa55a4' \
      'nvidia-nvvm==13.0.88 --hash=sha256:c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0' \
      'nvidia-cuda-runtime==13.0.96 --hash=sha256:7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548' \
      'nvidia-cuda-cccl==13.0.85 --hash=sha256:e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649' \
      'nvidia-cuda-culibos==13.0.85 --hash=sha256:5c178858405f485367175e14f8a7536af6c86c5c428d25301f2218406c316ba0' \
      'nvidia-cuda-cupti==13.0.85 --hash=sha256:4eb01c08e859bf924d222250d2e8f8b8ff6d3db4721288cf35d14252a4d933c8' \
      'nvidia-cuda-cuxxfilt==13.0.85 --hash=sha256:a3449fe64974ddc97419cf2c2a8fc560e159601d74d80fa120ffe953e40d67e9' \
      'nvidia-cuda-profiler-api==13.0.85 --hash=sha256:73d2671deac833db6686d6fbde4753fa3a3a497d87540fc246f081f375243f66' \
      'nvidia-nvtx==13.0.85 --hash=sha256:4936d1d6780fbe68db454f5e72a42ff64d1fd6397df9f363ae786930fd5c1cd4' \
      > /tmp/cuda-wheels.txt \
 && python3 -m pip install --no-deps --no-compile --only-binary=:all: --require-hashes \
      --target /tmp/wheels -r /tmp/cuda-wheels.txt
# The wheels' nvidia/cu13/ tree becomes the prefix; then the links a CUDA install has and wheels
# cannot carry: lib64 -> lib, lib/libX.so -> libX.so.N, targets/x86_64-linux/{include,lib}.
RUN set -eu; \
    prefix=/usr/local/cuda-13.0; \
    mkdir -p "$prefix/dist-info" "$prefix/targets/x86_64-linux"; \
    cp -a /tmp/wheels/nvidia/cu13/. "$prefix/"; \
    rm -rf "$prefix/.metadata"; \
    mv /tmp/wheels/*.dist-info "$prefix/dist-info/"; \
    ln -s lib "$prefix/lib64"; \
    for versioned in "$prefix"/lib/lib*.so.*; do \
      link="${versioned%%.so.*}.so"; \
      [ -e "$link" ] || ln -s "$(basename "$versioned")" "$link"; \
    done; \
    ln -s ../../include "$prefix/targets/x86_64-linux/include"; \
    ln -s ../../lib "$prefix/targets/x86_64-linux/lib"; \
    test -x "$prefix/bin/nvcc" && test -x "$prefix/nvvm/bin/cicc" \
      && test -L "$prefix/lib/libcudart.so" && test -f "$prefix/include/cuda_runtime.h"

FROM ${BASE_IMAGE}
COPY --from=cuda-wheels /usr/local/cuda-13.0 /usr/local/cuda-13.0
RUN ln -s cuda-13.0 /usr/local/cuda \
 && /usr/local/cuda/bin/nvcc --version
ENV PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CUDA_HOME=/usr/local/cuda \
    LANG=C.UTF-8
LABEL org.ninfer-kits.toolchain=trixie-cuda130 \
      org.ninfer-kits.cuda=13.0.88 \
      org.ninfer-kits.cuda.source="PyPI wheels: nvidia-cuda-nvcc/crt 13.0.88, nvidia-nvvm 13.0.88, nvidia-cuda-runtime 13.0.96, nvidia-cuda-cccl/culibos/cupti/cuxxfilt/profiler-api 13.0.85, nvidia-nvtx 13.0.85"
