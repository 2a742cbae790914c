"""The build matrix: which upstream is built for which CUDA arch, read from matrix.toml.

The package by job: `model` (the frozen upstreams, toolchains and kits, the tag and asset
templates, and [publish]: where kits go), `load` (reading the file and checking every table and
key, with did-you-mean errors that name file, line, table and key, through the ground floor's
`tables`), `names` (what a valid arch, revision, tag or path looks like), `collisions` (no two
kits can get the same tag) and `inputs` (everything a kit's bytes depend on, hashed: what watch
compares and BUILDINFO's `inputs` records). Import from here: this is the public API.
"""

from __future__ import annotations

from ninfer_kits.matrix.collisions import shared_tag
from ninfer_kits.matrix.load import (
    BASE_IMAGE_ARG,
    DEFAULT_MATRIX,
    MATRIX_ENV,
    SCHEMA_VERSION,
    add_matrix_argument,
    b2_prefix_problem,
    default_matrix_path,
    github_api_problem,
    load_matrix,
)
from ninfer_kits.matrix.model import (
    DEFAULT_GITHUB_API,
    DEFAULT_SNAPSHOT,
    EXTRA_RUNTIME_PACKAGES,
    LEDGER_MODES,
    PLACEHOLDERS,
    VERSION_PLACEHOLDERS,
    B2Target,
    CudaVersion,
    GitHubTarget,
    Kit,
    Matrix,
    Publish,
    RevisionFacts,
    Signing,
    SourcesConfig,
    Toolchain,
    UnresolvedPlaceholders,
    Upstream,
    render,
    resolve_dockerfile,
    template_placeholders,
)
from ninfer_kits.matrix.names import (
    ARCH_FORMS,
    arch_id,
    asset_name_problem,
    cmake_arch,
    git_ref_problem,
    is_valid_arch,
    relative_path_problem,
    version_core,
)

__all__ = [
    "ARCH_FORMS",
    "BASE_IMAGE_ARG",
    "DEFAULT_GITHUB_API",
    "DEFAULT_MATRIX",
    "DEFAULT_SNAPSHOT",
    "EXTRA_RUNTIME_PACKAGES",
    "LEDGER_MODES",
    "MATRIX_ENV",
    "PLACEHOLDERS",
    "SCHEMA_VERSION",
    "VERSION_PLACEHOLDERS",
    "B2Target",
    "CudaVersion",
    "GitHubTarget",
    "Kit",
    "Matrix",
    "Publish",
    "RevisionFacts",
    "Signing",
    "SourcesConfig",
    "Toolchain",
    "UnresolvedPlaceholders",
    "Upstream",
    "add_matrix_argument",
    "arch_id",
    "asset_name_problem",
    "b2_prefix_problem",
    "cmake_arch",
    "default_matrix_path",
    "git_ref_problem",
    "github_api_problem",
    "is_valid_arch",
    "load_matrix",
    "relative_path_problem",
    "render",
    "resolve_dockerfile",
    "shared_tag",
    "template_placeholders",
    "version_core",
]
