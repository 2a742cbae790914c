"""The build matrix, read from matrix.toml (docs/matrix.md): `model` (the data), `load`
(checked, every mistake located), `names`, `collisions`, `inputs`. Import from here."""

from __future__ import annotations

from ninfer_kits.matrix.collisions import shared_tag
from ninfer_kits.matrix.load import (
    MATRIX_ENV,
    add_matrix_argument,
    default_matrix_path,
    github_api_problem,
    load_matrix,
    read_repository,
)
from ninfer_kits.matrix.model import (
    DEFAULT_GITHUB_API,
    CudaVersion,
    GitHubTarget,
    Kit,
    Matrix,
    RevisionFacts,
    SourcesConfig,
    Toolchain,
    UnresolvedPlaceholders,
    Upstream,
    render,
)
from ninfer_kits.matrix.names import arch_id, cmake_arch, relative_path_problem, version_core

__all__ = [
    "DEFAULT_GITHUB_API", "MATRIX_ENV", "CudaVersion", "GitHubTarget", "Kit", "Matrix",
    "RevisionFacts", "SourcesConfig", "Toolchain", "UnresolvedPlaceholders", "Upstream",
    "add_matrix_argument", "arch_id", "cmake_arch", "default_matrix_path", "github_api_problem",
    "load_matrix", "read_repository", "relative_path_problem", "render", "shared_tag",
    "version_core",
]
