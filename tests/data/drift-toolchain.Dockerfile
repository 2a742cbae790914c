# The toolchain of tests/test_toolchain_pins.py: made FROM a base that already holds the
# compilers and CUDA (the session's trixie-cuda130 toolchain image, retagged), so that "a later
# archive" is a layer of seconds on that base (another stdio.h), not a toolchain build of
# minutes. What the docker builder, `toolchain push` and repro do with it is what they do with
# any toolchain: its image is built from this file on the base the matrix names (or pins).
ARG BASE_IMAGE=ninfer-kits-test/drift-base:local
FROM ${BASE_IMAGE}
RUN nvcc --version && g++ --version
