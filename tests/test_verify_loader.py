"""verify's resolver against the real dynamic loader, at scale, on real Debian roots.

Every ELF program and shared library of one suite's /usr/bin and /usr/lib/x86_64-linux-gnu is
copied into the other suite's root (bookworm ↔ trixie, each a debootstrapped minbase with the
runtime libraries kits link). For each, the resolver's verdict — which library each needed name
comes from, which names are missing, which symbol versions are missing — must equal what the
root's own loader says in trace mode (`chroot ROOT ld.so` with LD_TRACE_LOADED_OBJECTS, LD_WARN
and LD_VERBOSE: what `ldd -v` does, every failure listed). /proc is mounted in the root first:
without it the loader cannot expand $ORIGIN in a program's RUNPATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ninfer_kits.inspector.elf import is_elf
from ninfer_kits.loader.facts import loader_setup
from ninfer_kits.loader.resolve import Resolution, Resolver
from ninfer_kits.loader.rootfs import RootFS

LOADER = "/lib64/ld-linux-x86-64.so.2"
# Set inside the root (by its own env), so that they reach its loader and not chroot's.
TRACE_ENV = ("LD_TRACE_LOADED_OBJECTS=1", "LD_WARN=yes", "LD_BIND_NOW=yes", "LD_VERBOSE=yes")
MAPPED = re.compile(r"^\t(?P<name>\S+) => (?P<path>/\S+) \(0x[0-9a-f]+\)$")
NOT_FOUND = re.compile(r"^\t(?P<name>\S+) => not found$")
VERSION_MISSING = re.compile(r"^\t\t(?P<library>\S+) \((?P<version>[^)]+)\) => not found$")
# The version check's own word (elf/dl-version.c): a library without version definitions
# satisfies every need with this warning, though the trace listing says "not found" for them.
NO_VERSION_INFO = re.compile(r": (?P<path>/\S+): no version information available \(required by")
ASSERTION = "Inconsistency detected by ld.so"  # binding to it failed after all (dl-lookup.c)
SCANNED = ("usr/bin", "usr/lib/x86_64-linux-gnu")


@dataclass(frozen=True)
class Verdict:
    mapped: frozenset[tuple[str, str]]  # (needed name, canonical path in the root)
    missing: frozenset[str]
    versions: frozenset[tuple[str, str]]  # (library name, version)


def probes(source: Path) -> list[Path]:
    """The ELF files a suite ships in its program and library folders (no symlinks)."""
    found = []
    for folder in SCANNED:
        for path in sorted((source / folder).iterdir()):
            if path.is_file() and not path.is_symlink() and is_elf(path):
                found.append(path)
    return found


def loader_verdict(root: Path, program: str) -> Verdict:
    chroot = shutil.which("chroot") or "chroot"
    done = subprocess.run([chroot, str(root), "/usr/bin/env", "-i", *TRACE_ENV, LOADER, program],
                          capture_output=True, text=True, check=False)
    mapped, absent, versions = set(), set(), set()
    fs = RootFS(root)
    text = done.stdout + done.stderr
    unversioned = {fs.canonical(m["path"]) or m["path"] for m in NO_VERSION_INFO.finditer(text)}
    if ASSERTION in text:
        unversioned = set()
    paths: dict[str, str] = {}
    for line in text.splitlines():
        if match := MAPPED.match(line):
            paths[match["name"]] = fs.canonical(match["path"]) or match["path"]
            mapped.add((match["name"], paths[match["name"]]))
        elif match := NOT_FOUND.match(line):
            absent.add(match["name"])
        elif ((match := VERSION_MISSING.match(line)) and match["library"] not in absent
              and paths.get(match["library"]) not in unversioned):
            versions.add((match["library"], match["version"]))
    return Verdict(frozenset(mapped), frozenset(absent), frozenset(versions))


def our_verdict(resolution: Resolution, fs: RootFS) -> Verdict:
    return Verdict(
        frozenset((item.name, fs.canonical(item.path) or item.path) for item in resolution.found
                  if "/" not in item.name),
        # what the driver supplies in a container is missing from the root itself
        frozenset(item.name for item in (*resolution.missing, *resolution.from_driver)),
        frozenset((gap.library, gap.version) for gap in resolution.gaps),
    )


def difference(loader: Verdict, ours: Verdict) -> str:
    parts = []
    for field in ("mapped", "missing", "versions"):
        only_loader = sorted(getattr(loader, field) - getattr(ours, field))
        only_ours = sorted(getattr(ours, field) - getattr(loader, field))
        if only_loader or only_ours:
            parts.append(f"{field}: loader only {only_loader}, ours only {only_ours}")
    return "; ".join(parts)


def agreement(source: Path, target: Path) -> tuple[int, list[str]]:
    fs = RootFS(target)
    resolver = Resolver(loader_setup(fs))
    probe_dir = target / "opt" / "probe"
    shutil.rmtree(probe_dir, ignore_errors=True)
    probe_dir.mkdir(parents=True)
    cases, disagreements = 0, []
    for index, path in enumerate(probes(source)):
        name = f"/opt/probe/{index:04d}-{path.name}"
        shutil.copy2(path, target / name.lstrip("/"))
        info = resolver.info(name)
        if info is None or (not info.needed and info.interpreter is None):
            continue  # static, or not something the loader maps
        cases += 1
        ours = our_verdict(resolver.resolve(name), fs)
        theirs = loader_verdict(target, name)
        if ours != theirs:
            disagreements.append(f"{path.relative_to(source)}: {difference(theirs, ours)}")
    shutil.rmtree(probe_dir, ignore_errors=True)
    return cases, disagreements


@pytest.mark.slow
@pytest.mark.parametrize(("source", "target"), [("trixie", "bookworm"), ("bookworm", "trixie")])
def test_resolver_agrees_with_the_loader(roots: dict[str, Path], proc_mounted: None,
                                         source: str, target: str) -> None:
    cases, disagreements = agreement(roots[source], roots[target])
    print(f"{source} files in a {target} root: {cases} cases, "
          f"{len(disagreements)} disagreements")
    assert cases >= 100, cases
    assert not disagreements, "\n".join(disagreements[:20])
