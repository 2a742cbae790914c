"""What a valid value of the matrix looks like (a revision, an arch, a tag, a path in a source
tree), shared by the model, the loader and the pipeline; nothing here reads a file."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Final

from ninfer_kits.config.tables import quote

ARCH_FORMS: Final = "sm_NN, sm_NNN, sm_NNa, sm_NNf, e.g. sm_86, sm_120a"

# ASCII classes throughout: `\d` would also accept digits of other scripts.
_ARCH = re.compile(r"sm_[0-9]{2,3}[af]?")
HEX_REVISION: Final = re.compile(r"[0-9a-fA-F]{7,40}")
_VERSION_CORE = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_GIT_REF_BAD_CHARS: Final = frozenset(" ~^:?*[\\")


def arch_id(arch: str) -> str:
    """`sm_120a` → `sm120a`, the form used in tags and asset names."""
    return arch.replace("_", "")


def cmake_arch(arch: str) -> str:
    """`sm_120a` → `120a`, the form CMAKE_CUDA_ARCHITECTURES takes."""
    return arch.removeprefix("sm_")


def is_valid_arch(arch: str) -> bool:
    return _ARCH.fullmatch(arch) is not None


def version_core(version: str) -> str | None:
    """The leading dotted number of a version: `0.6.1-rtx3090` → `0.6.1`; None if there is none."""
    match = _VERSION_CORE.match(version)
    return match.group(0) if match else None


def relative_path_problem(path: str) -> str | None:
    """Why a path from the matrix may not be used inside a source tree, or None."""
    if path.startswith(("/", "\\", "~")) or re.match(r"[A-Za-z]:", path):
        return "must be a relative path"
    if ".." in PurePosixPath(path.replace("\\", "/")).parts:
        return "must not contain '..'"
    return None


def git_ref_problem(name: str) -> str | None:
    """Why name cannot be a git tag or branch (a subset of git check-ref-format), or None."""
    bad = sorted({c for c in name if c in _GIT_REF_BAD_CHARS or not c.isprintable()})
    if bad:
        listed = ", ".join(quote(c) for c in bad)
        return f"contains {listed}, not allowed in a git tag or branch name"
    for part, reason in (("..", "'..'"), ("@{", "'@{'"), ("//", "'//'"), ("/.", "'/.'")):
        if part in name:
            return f"contains {reason}, not allowed in a git tag or branch name"
    if name.startswith(("-", "/", ".")) or name.endswith(("/", ".", ".lock")) or name == "@":
        return "starts or ends in a way git does not allow (-, /, ., .lock)"
    return None


def asset_name_problem(name: str) -> str | None:
    """Why name cannot be a release asset file name, or None."""
    if not name.endswith(".tar.gz") or name == ".tar.gz":
        return "must end in '.tar.gz'"
    if "/" in name or "\\" in name:
        return "must be a file name, without '/'"
    if any(c.isspace() or not c.isprintable() for c in name):
        return "must not contain whitespace or control characters"
    return None
