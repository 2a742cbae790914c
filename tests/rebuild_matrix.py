"""The matrix both rebuild tests (test_rebuild_e2e.py, test_rebuild_act.py) give their
checkout: one kit per example upstream, built with the test toolchain images."""

from __future__ import annotations

from collections.abc import Mapping

# Modelled on matrix.toml's `example` upstream and kit, one kit per upstream, and its [publish]
# table (no [publish.b2]: GitHub only). The tags name the revision, so a new head is a new tag.
_UPSTREAM = """
[upstreams.{name}]
repository = "up/{name}"
url = "{url}"
branch = "{branch}"
version_file = "VERSION"
archs = ["sm_86"]
min_cuda = "13.0"
licenses = ["LICENSE", "NOTICE", "third_party/*/LICENSE*"]
cmake_options = {{ CMAKE_BUILD_TYPE = "Release" }}
targets = {{ "ninfer" = "apps/ninfer", "ninfer-serve" = "apps/ninfer-serve" }}

[kits.{name}-sm86]
upstream = "{name}"
arch = "sm_86"
toolchain = "trixie-cuda130"
card = "any sm_86 GPU (example engine {name})"
tag = "{name}-v{{version_core}}-linux-{{arch_id}}-{{rev8}}"
asset = "ninfer-{name}-kit-{{rev12}}-{{arch_id}}.tar.gz"
"""

_REST = """
[toolchains.trixie-cuda130]
dockerfile = "dockerfiles/toolchain-wheels-debian.Dockerfile"
base_image = "ninfer-kits/debian-trixie-base:local"
cuda = "13.0.88"
build_args = {{ CUDA_WHEELS = "13.0" }}
runtime_dockerfile = "dockerfiles/runtime-wheels-debian.Dockerfile"
runtime_base_image = "ninfer-kits/debian-trixie-minbase:local"
runtime_build_args = {{ CUDA_WHEELS = "13.0" }}
runtime_packages = ["libavformat61", "libavcodec61", "libavutil59", "libswscale8"]

[publish]
ledger = "commit"

[publish.github]
repository = "{repository}"
api = "{api}"
"""


def rebuild_matrix(upstreams: Mapping[str, tuple[str, str]], repository: str, api: str) -> str:
    """matrix.toml's text: `upstreams` maps each name to (git URL, branch); the kits publish to
    `repository` through the GitHub API at `api`."""
    return "schema = 1\n" + "".join(
        _UPSTREAM.format(name=name, url=url, branch=branch)
        for name, (url, branch) in upstreams.items()) + _REST.format(repository=repository,
                                                                     api=api)
