# The TEST runtime image: a plain Debian trixie (minbase) with only what a kit of a test toolchain
# (`trixie-cuda130`, `trixie-cuda131`) needs at run time — libcurl, libstdc++, the CUDA runtime
# library libcudart.so.13 from the pinned `nvidia-cuda-runtime` wheel, and the extra packages the
# matrix names (runtime_packages, e.g. FFmpeg 7). No GPU driver: every library a kit's binaries
# need must load here (`ld.so --list` resolves every soname), but no kernel can run.
#
# libcudart is found through the kit's RUNPATH only (no ld.so.conf entry, no LD_LIBRARY_PATH), so a
# kit whose RUNPATH is wrong fails here. Binaries built by a test toolchain carry
# RUNPATH /usr/local/cuda-<CUDA_WHEELS>/lib (CMake records the resolved toolkit folder, not the
# /usr/local/cuda link); the library sits there, and /usr/local/cuda, lib64 and
# targets/x86_64-linux/lib lead to the same folder, so every usual spelling resolves.
#
# Build args:
#   BASE_IMAGE              a plain trixie minbase root, made with
#                           scripts/make-base-image.sh ninfer-kits/debian-trixie-minbase:local trixie --include ''
#   CUDA_WHEELS             13.0 (default; nvidia-cuda-runtime 13.0.96) or 13.1 (nvidia-cuda-runtime
#                           13.1.80), matching the toolchain's CUDA_WHEELS. Any other value fails.
#   EXTRA_RUNTIME_PACKAGES  space-separated apt packages added to this image's own list (default
#                           none); the matrix sets it from runtime_packages, e.g.
#                           "libavformat61 libavcodec61 libavutil59 libswscale8" (FFmpeg 7 on trixie).
# The build context holds this file and `host-ca.crt` (the CA bundle pip needs to reach PyPI,
# e.g. a copy of /etc/ssl/certs/ca-certificates.crt); it only lives in the first stage.
#   docker build --network host --build-arg CUDA_WHEELS=13.1 -f runtime-wheels-debian.Dockerfile \
#     -t ninfer-kits/runtime-trixie-cuda131:local CONTEXT
ARG BASE_IMAGE=ninfer-kits/debian-trixie-minbase:local
ARG CUDA_WHEELS=13.0

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
ARG CUDA_WHEELS
RUN set -eu; \
    case "$CUDA_WHEELS" in \
    13.0) echo 'nvidia-cuda-runtime==13.0.96 --hash=sha256:7f82250d7782aa23b6cfe765ecc7db554bd3c2870c43f3d1821f1d18aebf0548' \
      > /tmp/cudart.txt ;; \
    13.1) echo 'nvidia-cuda-runtime==13.1.80 --hash=sha256:dac25b52e69050e5a7a84957e6df470a85b185f8f648a99a1ab1dfce027576cf' \
      > /tmp/cudart.txt ;; \
    *) echo "CUDA_WHEELS='$CUDA_WHEELS' names no wheel set of runtime-wheels-debian.Dockerfile: use 13.0 or 13.1" >&2; \
       exit 1 ;; \
    esac; \
    python3 -m pip install --no-deps --no-compile --only-binary=:all: --require-hashes \
      --target /tmp/wheels -r /tmp/cudart.txt; \
    prefix=/usr/local/cuda-$CUDA_WHEELS; \
    mkdir -p "$prefix/lib" "$prefix/targets/x86_64-linux"; \
    cp -a /tmp/wheels/nvidia/cu13/lib/libcudart.so.13 "$prefix/lib/"; \
    ln -s lib "$prefix/lib64"; \
    ln -s ../../lib "$prefix/targets/x86_64-linux/lib"

FROM ${BASE_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
ARG EXTRA_RUNTIME_PACKAGES=
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4t64 libstdc++6 ${EXTRA_RUNTIME_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log
ARG CUDA_WHEELS
COPY --from=cudart /usr/local/cuda-${CUDA_WHEELS} /usr/local/cuda-${CUDA_WHEELS}
RUN ln -s cuda-${CUDA_WHEELS} /usr/local/cuda
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8

# The labels of each wheel set; the last stage picks one (the classic builder has no
# conditional LABEL, but FROM expands build args).
FROM runtime AS labels-13.0
LABEL org.ninfer-kits.runtime=trixie-cuda-wheels-13.0 \
      org.ninfer-kits.cuda=13.0.88 \
      org.ninfer-kits.cudart="nvidia-cuda-runtime 13.0.96 (libcudart.so.13)"

FROM runtime AS labels-13.1
LABEL org.ninfer-kits.runtime=trixie-cuda-wheels-13.1 \
      org.ninfer-kits.cuda=13.1.115 \
      org.ninfer-kits.cudart="nvidia-cuda-runtime 13.1.80 (libcudart.so.13)"

FROM labels-${CUDA_WHEELS}
