"""What every kit must carry, and must not: the upstream's license, SASS for its arch and no other
arch's device code, no search path relative to the current directory, no glibc symbol newer
than its toolchain's floor."""

from __future__ import annotations

import shutil
from pathlib import Path

from ninfer_kits.errors import CheckFailed
from ninfer_kits.host import versions
from ninfer_kits.inspector.floor import describe_device_code
from ninfer_kits.inspector.inspection import Inspection
from ninfer_kits.matrix import Kit, Toolchain


def copy_licenses(kit: Kit, source: Path, kit_root: Path) -> tuple[str, ...]:
    found = sorted({path for pattern in kit.upstream.licenses for path in source.glob(pattern)
                    if path.is_file()})
    names = tuple(str(path.relative_to(source)) for path in found)
    if not any(Path(name).name.upper().startswith(("LICENSE", "COPYING")) for name in names):
        raise CheckFailed(f"no license file found in {kit.upstream.repository} for patterns "
                          f"{', '.join(kit.upstream.licenses)}: a kit must carry the upstream's "
                          f"license")
    for name in names:
        target = kit_root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target)
    return tuple(f"kit/{name}" for name in names)


def check_archs(kit: Kit, inspection: Inspection) -> None:
    """Some file carries loaded SASS for the kit's arch, and none loaded SASS or PTX of another
    (the PTX of relocatable entries too: the runtime JIT-links it when the SASS does not fit)."""
    allowed = {("sass", kit.arch), ("ptx", f"compute_{kit.arch.removeprefix('sm_')}")}
    floor = inspection.floor
    if kit.arch not in floor.sass:
        relocatable = describe_device_code(floor.relocatable)
        raise CheckFailed(
            f"kit {kit.id} carries no SASS for {kit.arch} that the CUDA runtime loads (loaded: "
            f"{', '.join((*floor.sass, *floor.ptx)) or 'no device code'}"
            + (f"; device-link inputs: {relocatable})" if relocatable else ")"))
    for info in inspection.files:
        loaded = {(entry.kind, entry.arch) for entry in info.device_code
                  if entry.kind == "ptx" or (entry.loadable and entry.kind == "sass")}
        extra = sorted(arch for _kind, arch in loaded - allowed)
        if extra:
            raise CheckFailed(f"{info.path} carries {', '.join(extra)}, which kit {kit.id} "
                              f"does not declare (it declares {kit.arch})")


def check_search_paths(inspection: Inspection) -> None:
    """No RUNPATH/RPATH entry may be empty or relative (but $ORIGIN-based): the loader would
    search the folder the kit is run from."""
    for info in inspection.files:
        for kind, paths in (("RUNPATH", info.runpath), ("RPATH", info.rpath)):
            bad = [p for p in paths if not p.startswith(("/", "$ORIGIN", "${ORIGIN}"))]
            if bad:
                shown = ", ".join(repr(p) for p in bad)
                raise CheckFailed(f"{info.path}: {kind} {':'.join(paths)!r} has {shown}, which "
                                  f"the loader reads relative to the current directory")


def check_glibc_floor(toolchain: Toolchain, inspection: Inspection, flavour: str) -> None:
    """A kit of a toolchain with a `glibc_floor` needing a newer symbol took it from the image's
    own glibc, and would not start where the floor says it does."""
    if toolchain.glibc_floor is None:
        return
    found = inspection.floor.floor("GLIBC")
    if found is None or versions.parse(found.version) <= versions.parse(toolchain.glibc_floor):
        return
    needed_by = ", ".join(found.needed_by)
    raise CheckFailed(f"the {flavour} kit needs {found.name} ({needed_by}), newer than glibc "
                      f"{toolchain.glibc_floor}, the floor of toolchain {toolchain.id!r} "
                      f"(matrix.toml [toolchains.{toolchain.id}] glibc_floor): something in "
                      f"the link came from the build image's own glibc, not the sysroot's")
