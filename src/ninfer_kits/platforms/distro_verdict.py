"""Which known distributions meet a kit's floor, requirement by requirement, from its KitFloor and
platforms.distros alone; every answer names the unconfirmed facts it rests on."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from ninfer_kits.host import versions
from ninfer_kits.host.runtime_facts import RuntimeFacts, runtime_facts
from ninfer_kits.inspector.floor import BASE_VERSION, CUDART, KitFloor, SymbolVersion
from ninfer_kits.platforms.distros import (
    DRIVER_SONAMES,
    FFMPEG_SONAME,
    GCC_SONAMES,
    LIBCURL_SONAME,
    CudaFacts,
    Distro,
    DistroFacts,
    Provenance,
)

MET, NOT_MET, NOT_KNOWN = "met", "not met", "not known"
YES, NO, UNKNOWN = "yes", "no", "not known"


@dataclass(frozen=True)
class Reason:
    requirement: str  # "glibc ≥ 2.38"
    status: str  # MET, NOT_MET or NOT_KNOWN
    text: str  # "glibc 2.34 < 2.38"
    unchecked: tuple[str, ...] = ()  # the unconfirmed facts it rests on: "glibc.version"


@dataclass(frozen=True)
class CudaRuntime:
    soname: str  # libcudart.so.13
    how: str  # "distribution", "nvidia", "none" or "not known"
    package: str
    image: str  # nvidia/cuda:13.0.x-runtime-ubuntu24.04, or ""
    text: str  # "from NVIDIA's repository (cuda-cudart-13-0)"
    unchecked: tuple[str, ...] = ()
    image_unchecked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    distro: Distro
    answer: str  # YES, NO or UNKNOWN
    reasons: tuple[Reason, ...]
    cuda: tuple[CudaRuntime, ...]
    notes: tuple[str, ...] = ()

    @property
    def unchecked(self) -> tuple[str, ...]:
        """The unconfirmed facts the answer rests on (for a no, the unmet requirements')."""
        deciding = [r for r in self.reasons if r.status == NOT_MET] if self.answer == NO \
            else list(self.reasons)
        return tuple(dict.fromkeys(key for reason in deciding for key in reason.unchecked))

    def line(self) -> str:
        """`Ubuntu 24.04: no — libavcodec.so.61 (FFmpeg 7.x); it has libavcodec.so.60`."""
        if self.answer == YES:
            rests = self.unchecked
            return f"{self.distro.name}: yes" + (
                f" (rests on unchecked facts: {', '.join(rests)})" if rests else "")
        wanted = NOT_MET if self.answer == NO else NOT_KNOWN
        parts = [r.text + (" [unchecked]" if r.unchecked else "")
                 for r in self.reasons if r.status == wanted]
        return f"{self.distro.name}: {self.answer} — " + "; ".join(parts)


def judge(floor: KitFloor, distro: Distro, *, arch: str = "x86-64",
          cuda_version: str | None = None, facts: RuntimeFacts | None = None) -> Verdict:
    """`cuda_version` (BUILDINFO's) names the cuda-cudart package's minor."""
    facts = facts or runtime_facts()
    reasons = [*_machine(floor, arch), *_glibc_reason(floor, distro),
               *_libstdcxx_reasons(floor, distro, facts), *_soname_reasons(floor, distro, facts)]
    runtimes = [_cuda_runtime(int(m["major"]), distro, cuda_version)
                for m in map(CUDART.match, floor.sonames) if m]
    reasons += [_as_reason(runtime) for runtime in runtimes]
    statuses = {r.status for r in reasons}
    answer = NO if NOT_MET in statuses else UNKNOWN if NOT_KNOWN in statuses else YES
    ffmpeg = any(FFMPEG_SONAME.fullmatch(soname) for soname in floor.sonames)
    notes = (distro.ffmpeg.note,) if ffmpeg and distro.ffmpeg.note else ()
    return Verdict(distro, answer, tuple(reasons), tuple(runtimes), notes)


def judge_all(floor: KitFloor, known: DistroFacts, *,
              cuda_version: str | None = None) -> tuple[Verdict, ...]:
    return tuple(judge(floor, distro, arch=known.arch, cuda_version=cuda_version)
                 for distro in known.distros)


def _unconfirmed(provenance: Provenance, *keys: str) -> tuple[str, ...]:
    return tuple(f"{provenance.table}.{key}" for key in keys if not provenance.confirmed(key))


def _machine(floor: KitFloor, arch: str) -> list[Reason]:
    other = [machine for machine in floor.machines if machine != arch]
    if not other:
        return []
    return [Reason(f"{'/'.join(floor.machines)} Linux", NOT_KNOWN,
                   f"the kit is for {'/'.join(other)}; these facts are for {arch}")]


def _glibc_reason(floor: KitFloor, distro: Distro) -> list[Reason]:
    need = floor.floor("GLIBC")
    if need is None:
        return []
    have = distro.glibc.version
    met = versions.parse(need.version) <= versions.parse(have)
    text = f"glibc {have} ≥ {need.version}" if met else f"glibc {have} < {need.version}"
    return [Reason(f"glibc ≥ {need.version}", MET if met else NOT_MET, text,
                   _unconfirmed(distro.glibc.provenance, "version"))]


def _libstdcxx_reasons(floor: KitFloor, distro: Distro, facts: RuntimeFacts) -> list[Reason]:
    row, reasons = distro.libstdcxx, []
    for prefix, key in (("GLIBCXX", "glibcxx"), ("CXXABI", "cxxabi")):
        need = floor.floor(prefix)
        if need is None:
            continue
        have: str = getattr(row, key)
        advice = facts.gcc_advice(prefix, versions.parse(need.version))
        met = versions.parse(need.version) <= versions.parse(have)
        text = (f"{need.name} ({advice}); it has {prefix}_{have} (GCC {row.gcc})" if not met
                else f"{row.package} provides {prefix}_{have}")
        reasons.append(Reason(f"{need.libraries[0]} providing {need.name}",
                              MET if met else NOT_MET, text,
                              _unconfirmed(row.provenance, key)))
    need = floor.floor("GCC")
    if need is not None and need.version:
        # libgcc_s of GCC N defines GCC_<N>.0.0 at most: a later major is not met.
        met = int(need.version.split(".")[0]) <= versions.parse(row.gcc)[0]
        text = (f"libgcc_s.so.1 of GCC {row.gcc}" if met
                else f"{need.name} (libgcc_s.so.1); it has the libgcc_s of GCC {row.gcc}")
        reasons.append(Reason(f"libgcc_s.so.1 providing {need.name}", MET if met else NOT_MET,
                              text, _unconfirmed(row.provenance, "gcc")))
    return reasons


def _soname_reasons(floor: KitFloor, distro: Distro, facts: RuntimeFacts) -> list[Reason]:
    skip = facts.glibc_sonames | GCC_SONAMES | DRIVER_SONAMES
    ffmpeg = [s for s in floor.sonames if FFMPEG_SONAME.fullmatch(s)]
    reasons = [_ffmpeg_reason(ffmpeg, distro, facts)] if ffmpeg else []
    for soname in floor.sonames:
        if soname in skip or soname in ffmpeg or CUDART.match(soname):
            continue
        if LIBCURL_SONAME.fullmatch(soname):
            reasons += _libcurl_reasons(floor, soname, distro)
        else:
            reasons.append(Reason(soname, NOT_KNOWN, f"{soname}: not in the distributions file"))
    return reasons


def _family(sonames: Iterable[str], facts: RuntimeFacts) -> str:
    names = {facts.family_of(s) for s in sonames}
    if len(names) == 1 and (name := names.pop()):
        return name.removesuffix(" runtime")
    return "FFmpeg"


def _ffmpeg_reason(needed: list[str], distro: Distro, facts: RuntimeFacts) -> Reason:
    row = distro.ffmpeg
    requirement = f"{', '.join(needed)} ({_family(needed, facts)})"
    missing = [s for s in needed if s not in row.sonames]
    keys = _unconfirmed(row.provenance, "version", "sonames")
    if not missing:
        return Reason(requirement, MET, f"FFmpeg {row.version} ({row.packages})", keys)
    family = _family(missing, facts)
    if row.version:
        libraries = {m["lib"] for m in map(FFMPEG_SONAME.fullmatch, missing) if m}
        have = [s for s in row.sonames
                if (m := FFMPEG_SONAME.fullmatch(s)) and m["lib"] in libraries]
        text = f"{', '.join(missing)} ({family}); it has {', '.join(have)} (FFmpeg {row.version})"
        return Reason(requirement, NOT_MET, text, keys)
    text = f"{', '.join(missing)} ({family}); {distro.name} packages no FFmpeg"
    if row.extra_from:
        covered = all(s in row.extra_sonames for s in missing)
        text += (f"; {row.extra_from} has FFmpeg {row.extra_version}"
                 + (" with these sonames" if covered else f": {', '.join(row.extra_sonames)}"))
        keys += _unconfirmed(row.provenance, "extra_sonames")
    return Reason(requirement, NOT_MET, text, keys)


def _libcurl_reasons(floor: KitFloor, soname: str, distro: Distro) -> list[Reason]:
    row = distro.libcurl
    if soname != row.soname:
        return [Reason(soname, NOT_MET, f"{soname}; it has {row.soname} ({row.package})",
                       _unconfirmed(row.provenance, "soname"))]
    reasons = [Reason(soname, MET, f"{soname} ({row.package})",
                      _unconfirmed(row.provenance, "soname", "package"))]
    wanted = [name for name in dict(floor.versions_by_library).get(soname, ())
              if name != BASE_VERSION and SymbolVersion.parse(name).number]
    if not wanted:
        return reasons
    requirement = f"{soname} defining {', '.join(wanted)}"
    keys = _unconfirmed(row.provenance, "versions")
    if row.versions is None:
        reasons.append(Reason(requirement, NOT_KNOWN,
                              f"whether its {soname} defines {', '.join(wanted)} is not known "
                              f"here"))
    elif not row.versions:
        reasons.append(Reason(requirement, MET,
                              f"its {soname} defines no symbol versions: the loader warns \"no "
                              f"version information available\" and goes on", keys))
    else:
        lacking = [name for name in wanted if name not in row.versions]
        reasons.append(
            Reason(requirement, NOT_MET,
                   f"{soname} defining {', '.join(lacking)}; its libcurl defines "
                   f"{', '.join(row.versions)}", keys) if lacking
            else Reason(requirement, MET, f"its {soname} defines {', '.join(wanted)}", keys))
    return reasons


def _cuda_runtime(major: int, distro: Distro, cuda_version: str | None) -> CudaRuntime:
    row, soname = distro.cuda, f"libcudart.so.{major}"
    image = _image(row, major, cuda_version)
    runtime = _runtime(row, soname, major, distro.name, cuda_version, image)
    image_keys = _unconfirmed(row.provenance, "image", "image_since") if image else ()
    return dataclasses.replace(runtime, image_unchecked=image_keys)


def _runtime(row: CudaFacts, soname: str, major: int, name: str, cuda_version: str | None,
             image: str) -> CudaRuntime:
    if soname in row.cudart_sonames:
        return CudaRuntime(soname, "distribution", row.cudart_package, image,
                           f"from {name} itself ({row.cudart_package})",
                           _unconfirmed(row.provenance, "cudart_sonames"))
    if major in row.nvidia_majors:
        package = _cudart_package(major, cuda_version)
        return CudaRuntime(soname, "nvidia", package, image,
                           f"from NVIDIA's repository ({package}; repository {row.nvidia_repo})",
                           _unconfirmed(row.provenance, "nvidia_repo", "nvidia_majors"))
    if row.nvidia_repo:
        return CudaRuntime(soname, NOT_KNOWN, "", image,
                           f"{soname} (CUDA {major} runtime): not packaged by {name}; "
                           f"whether NVIDIA's {row.nvidia_repo} repository has CUDA {major} is "
                           f"not recorded here")
    return CudaRuntime(soname, "none", "", image,
                       f"{soname} (CUDA {major} runtime): neither {name} nor NVIDIA's "
                       f"CUDA repository packages it",
                       _unconfirmed(row.provenance, "cudart_sonames", "nvidia_repo"))


def _as_reason(runtime: CudaRuntime) -> Reason:
    status = {"distribution": MET, "nvidia": MET, NOT_KNOWN: NOT_KNOWN}.get(runtime.how, NOT_MET)
    return Reason(f"CUDA runtime {runtime.soname}", status, runtime.text, runtime.unchecked)


def _cudart_package(major: int, cuda_version: str | None) -> str:
    """cuda-cudart-13-0 for a kit of CUDA 13.0.x (any later 13.y provides it too)."""
    kit = _kit_cuda(cuda_version, major)
    return f"cuda-cudart-{major}-{kit[1]}" if kit else f"cuda-cudart-{major}-<minor>"


def _image(row: CudaFacts, major: int, cuda_version: str | None) -> str:
    """nvidia/cuda:13.0.x-runtime-ubuntu24.04: the kit's minor, or the earliest image known."""
    since = versions.parse(row.image_since) if row.image else ()
    if not since or since[0] > major:
        return ""
    version = since[:2] if since[0] == major else (major, 0)
    kit = _kit_cuda(cuda_version, major)
    if kit is not None and kit > version:
        version = kit
    return f"nvidia/cuda:{major}.{version[1] if len(version) > 1 else 0}.x-runtime-{row.image}"


def _kit_cuda(cuda_version: str | None, major: int) -> tuple[int, ...] | None:
    if not cuda_version or not versions.DOTTED.fullmatch(cuda_version):
        return None
    version = versions.parse(cuda_version)
    return version[:2] if version[0] == major and len(version) > 1 else None


# --------------------------------------------------------------------------- the summary


def floor_summary(floor: KitFloor, facts: RuntimeFacts | None = None) -> tuple[str, ...]:
    facts = facts or runtime_facts()
    parts = ["/".join(floor.machines) or "unknown machine"]
    for prefix in ("GLIBC", "GLIBCXX", "CXXABI", "GCC"):
        need = floor.floor(prefix)
        if need is not None:
            parts.append(f"glibc ≥ {need.version}" if prefix == "GLIBC" else need.name)
    skip = facts.glibc_sonames | GCC_SONAMES
    parts += [soname for soname in floor.sonames if soname not in skip]
    return tuple(parts)
