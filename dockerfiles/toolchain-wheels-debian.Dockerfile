# The TEST toolchains (matrix toolchains `trixie-cuda130`, `trixie-cuda131`): Debian trixie plus a
# CUDA toolkit assembled from NVIDIA's PyPI wheels, so they build with no container registry.
#
# Build args:
#   BASE_IMAGE   must already hold the compilers and the engine's build dependencies
#                (build-essential, cmake, ninja-build, pkg-config, ccache, git, python3, libcurl
#                and FFmpeg dev packages): `scripts/make-base-image.sh ninfer-kits/debian-trixie-base:local`.
#   CUDA_WHEELS  which pinned wheel set: 13.0 (default; nvcc V13.0.88) or 13.1 (nvcc V13.1.115).
#                The toolkit goes to /usr/local/cuda-<CUDA_WHEELS>, with /usr/local/cuda leading
#                there. Any other value fails the build.
#
# The build context holds this file and `host-ca.crt`: the CA bundle pip needs to reach PyPI from
# inside the build (on machines whose TLS goes through a local CA; copy
# /etc/ssl/certs/ca-certificates.crt). pip and the CA only live in the first stage.
# Build with `--network host` (engines without a bridge network):
#   docker build --network host --build-arg CUDA_WHEELS=13.1 -f toolchain-wheels-debian.Dockerfile \
#     -t ninfer-kits/toolchain-trixie-cuda131:local CONTEXT
#
# Every wheel is pinned by version and by the sha256 of its manylinux x86_64 file on PyPI
# (pip --require-hashes; scripts/check-cuda-wheels.sh compares the pins with PyPI).
# 13.0 is this project's reference toolkit (the dist-info folders in the host's
# /usr/local/cuda-13.0/dist-info); its nvidia-cuda-runtime is 13.0.96, not 13.0.88.
# 13.1 is CUDA 13.1 Update 1 (13.1.115); its newest nvidia-cuda-runtime is 13.1.80.
ARG BASE_IMAGE=ninfer-kits/debian-trixie-base:local
ARG CUDA_WHEELS=13.0

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
ARG CUDA_WHEELS
RUN set -eu; \
    case "$CUDA_WHEELS" in \
    13.0) echo 13.0.88 > /tmp/cuda-nvcc-version; printf '%s\n' \
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
      > /tmp/cuda-wheels.txt ;; \
    13.1) echo 13.1.115 > /tmp/cuda-nvcc-version; printf '%s\n' \
      'nvidia-cuda-nvcc==13.1.115 --hash=sha256:fe5c0604869dfbc837bdce9e1eef8e4f0e0d103c29e3875014ba3538c70efb74' \
      'nvidia-cuda-crt==13.1.115 --hash=sha256:53c9b03f804dc7e539dd11914ec3d3fd0849791d8cd6a73f0d4df984bb339916' \
      'nvidia-nvvm==13.1.115 --hash=sha256:6fdf483d85d9903f9cbf84c41d99221a86e0c0511d05de3d237b4ab69c11627e' \
      'nvidia-cuda-runtime==13.1.80 --hash=sha256:dac25b52e69050e5a7a84957e6df470a85b185f8f648a99a1ab1dfce027576cf' \
      'nvidia-cuda-cccl==13.1.115 --hash=sha256:d4a9e0590cd34290cda27f402a67fbf42e3ed043bdd927c6dd52419c860f2f92' \
      'nvidia-cuda-culibos==13.1.115 --hash=sha256:d9a3ff55a60b116b505418cfa4538a0cbe2fe68f2e3209234b32b193195fa92c' \
      'nvidia-cuda-cupti==13.1.115 --hash=sha256:2c76d91807cf76fc0e4b08ad71c4dff0e8e9f678fc8dbbbc43ec55125a70b553' \
      'nvidia-cuda-cuxxfilt==13.1.115 --hash=sha256:0bd38b8017f4d834a49c345b118e0a58e7c74584253e19ac01434db37d1667f5' \
      'nvidia-cuda-profiler-api==13.1.115 --hash=sha256:a960d5448a9fdb481a7f3fb2dc30f8ab2114254b44f7f32b80ca19135aefd729' \
      'nvidia-nvtx==13.1.115 --hash=sha256:0d7685a5f65014a38a92ae96491f2412e8f0c32f33523476b9a718d0ced51b41' \
      > /tmp/cuda-wheels.txt ;; \
    *) echo "CUDA_WHEELS='$CUDA_WHEELS' names no wheel set of toolchain-wheels-debian.Dockerfile: use 13.0 or 13.1" >&2; \
       exit 1 ;; \
    esac; \
    python3 -m pip install --no-deps --no-compile --only-binary=:all: --require-hashes \
      --target /tmp/wheels -r /tmp/cuda-wheels.txt
# The wheels' nvidia/cu13/ tree becomes the prefix; then the links a CUDA install has and wheels
# cannot carry: lib64 -> lib, lib/libX.so -> libX.so.N, targets/x86_64-linux/{include,lib}.
RUN set -eu; \
    prefix=/usr/local/cuda-$CUDA_WHEELS; \
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
      && test -L "$prefix/lib/libcudart.so" && test -f "$prefix/include/cuda_runtime.h"; \
    expected="V$(cat /tmp/cuda-nvcc-version)"; \
    "$prefix/bin/nvcc" --version | grep -q -- ", $expected\$" \
      || { echo "nvcc does not report $expected:" >&2; "$prefix/bin/nvcc" --version >&2; exit 1; }

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
