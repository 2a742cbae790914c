# The TEST toolchains (matrix toolchains `trixie-cuda130`, `trixie-cuda131`): Debian trixie plus a
# CUDA toolkit assembled from NVIDIA's PyPI wheels, so they build with no container registry.
#
# Build args:
#   BASE_IMAGE   must already hold the compilers and the engine's build dependencies
#                (build-essential, cmake, ninja-build, pkg-config, ccache, git, python3, libcurl
#                and FFmpeg dev packages): `scripts/make-base-image.sh ninfer-kits/debian-trixie-base:local`.
#   CUDA_WHEELS  which pinned wheel set of context/cuda-wheels/: 13.0 (default; nvcc V13.0.88)
#                or 13.1 (nvcc V13.1.115). The toolkit goes to /usr/local/cuda-<CUDA_WHEELS>,
#                with /usr/local/cuda leading there. Any other value fails the build.
#
# The build context holds this file, context/cuda-wheels/ and `host-ca.crt`: the CA bundle pip
# needs to reach PyPI from inside the build (on machines whose TLS goes through a local CA; copy
# /etc/ssl/certs/ca-certificates.crt). pip and the CA only live in the first stage.
# Build with `--network host` (engines without a bridge network):
#   docker build --network host --build-arg CUDA_WHEELS=13.1 -f toolchain-wheels-debian.Dockerfile \
#     -t ninfer-kits/toolchain-trixie-cuda131:local CONTEXT
#
# Every wheel is pinned by version and by the sha256 of its manylinux x86_64 file on PyPI, in
# context/cuda-wheels/<set>.txt, shared with toolchain-sysroot-debian.Dockerfile (pip
# --require-hashes; scripts/check-cuda-wheels.sh compares the pins with PyPI).
# 13.0 is this project's reference toolkit (the dist-info folders in the host's
# /usr/local/cuda-13.0/dist-info); its nvidia-cuda-runtime is 13.0.96, not 13.0.88.
# 13.1 is CUDA 13.1 Update 1 (13.1.115); its newest nvidia-cuda-runtime is 13.1.80.
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

FROM ${BASE_IMAGE} AS toolchain
ARG CUDA_WHEELS
COPY --from=cuda-wheels /usr/local/cuda-${CUDA_WHEELS} /usr/local/cuda-${CUDA_WHEELS}
RUN ln -s cuda-${CUDA_WHEELS} /usr/local/cuda \
 && /usr/local/cuda/bin/nvcc --version
ENV PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CUDA_HOME=/usr/local/cuda \
    LANG=C.UTF-8

# The labels of each wheel set; the last stage picks one (the classic builder has no
# conditional LABEL, but FROM expands build args).
FROM toolchain AS labels-13.0
LABEL org.ninfer-kits.toolchain=trixie-cuda130 \
      org.ninfer-kits.cuda=13.0.88 \
      org.ninfer-kits.cuda.source="PyPI wheels: nvidia-cuda-nvcc/crt 13.0.88, nvidia-nvvm 13.0.88, nvidia-cuda-runtime 13.0.96, nvidia-cuda-cccl/culibos/cupti/cuxxfilt/profiler-api 13.0.85, nvidia-nvtx 13.0.85"

FROM toolchain AS labels-13.1
LABEL org.ninfer-kits.toolchain=trixie-cuda131 \
      org.ninfer-kits.cuda=13.1.115 \
      org.ninfer-kits.cuda.source="PyPI wheels: nvidia-cuda-nvcc/crt 13.1.115, nvidia-nvvm 13.1.115, nvidia-cuda-runtime 13.1.80, nvidia-cuda-cccl/culibos/cupti/cuxxfilt/profiler-api 13.1.115, nvidia-nvtx 13.1.115"

FROM labels-${CUDA_WHEELS}
