"""The toolchain image's files that the portable repair and the compiled-in licences read, exported
once per image ID: the build environment under the docker builder (docs/portable.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ninfer_kits.host.engine import engine_guard, exported_image
from ninfer_kits.log import Reporter
from ninfer_kits.pipeline.builders import PreparedToolchain


@contextmanager
def exported_toolchain(client: Any, toolchain_id: str, toolchain: PreparedToolchain,
                       reporter: Reporter, cache_dir: Path | None) -> Iterator[Path]:
    """The image's files, exported once per image ID into `cache_dir`/environments/, or into a
    temporary folder without a cache."""
    if cache_dir is None:
        reporter.info(f"reading the libraries and packages of {toolchain.image}")
        with engine_guard(), exported_image(client, toolchain.image, _build_environment_file,
                                            what="toolchain image") as root:
            yield root
        return
    key = toolchain.image_id.removeprefix("sha256:")[:16] or "unknown"
    root = cache_dir / "environments" / f"{toolchain_id}-{key}-{ENVIRONMENT_LAYOUT}"
    if not (root / "etc").is_dir():
        reporter.info(f"reading the libraries and packages of {toolchain.image} into {root}")
        root.parent.mkdir(parents=True, exist_ok=True)
        with engine_guard(), exported_image(client, toolchain.image, _build_environment_file,
                                            what="toolchain image", into=root.parent) as fresh:
            _keep_folder(fresh, root)
    yield root


# What the portable repair reads in a toolchain image: its libraries, the loader's cache, and of
# /usr/share and /var only the package records and copyright files.
# The toolchain's programs (compilers, nvcc, cicc) are no libraries a kit loads: left out.
_SKIPPED_FOR_REPAIR = ("usr/include/", "usr/src/", "proc/", "sys/", "dev/", "tmp/", "run/",
                       "usr/bin/", "usr/sbin/", "usr/libexec/", "usr/lib/gcc/")
_CUDA_PROGRAMS = re.compile(r"usr/local/cuda[^/]*/(bin|nvvm|include|targets/[^/]+/include)/")
_DPKG_RECORDS = re.compile(r"var/lib/dpkg/(status|info/[^/]+\.(list|md5sums))")
_COPYRIGHT = re.compile(r"usr/share/doc/[^/]+/copyright")
# The link's inputs from GCC's own folder (crt*.o, libgcc.a, libstdc++.so) are compiled-in code
# too: the dependency output names them beside the headers. Its programs (cc1plus) are not.
_HEADERS = re.compile(r"usr/include/|usr/lib/gcc/[^/]+/[^/]+/(include/|[^/]+\.(o|a|so)$)|"
                      r"usr/local/cuda[^/]*/(include|targets/[^/]+/include)/")
# In an exported environment's folder name: a new one when what is exported changes, which the
# image ID alone would not say.
ENVIRONMENT_LAYOUT = 3


def _build_environment_file(name: str) -> bool:
    if _HEADERS.match(name):  # what compiled-in code comes from, for its package and licence
        return True
    if name.startswith(_SKIPPED_FOR_REPAIR) or _CUDA_PROGRAMS.match(name):
        return False
    if name.startswith("var/"):
        return name.rstrip("/") in ("var", "var/lib", "var/lib/dpkg", "var/lib/dpkg/info") \
            or _DPKG_RECORDS.fullmatch(name) is not None
    if name.startswith("usr/share/"):
        parts = name.rstrip("/").split("/")
        folder = len(parts) <= 4 and parts[2:3] in ([], ["doc"])  # usr/share/doc/<package>
        return folder or _COPYRIGHT.fullmatch(name) is not None
    return True


def _keep_folder(source: Path, dest: Path) -> None:
    """One rename: two builds exporting the same image at once leave one complete copy."""
    try:
        source.rename(dest)
    except OSError:
        if not (dest / "etc").is_dir():
            raise
