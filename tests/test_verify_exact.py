"""verify as exact as glibc's loader, case by case: each layout is compiled here, verify's verdict
is asserted, and the real loader is asked the same question — by running the program on this
host, by its trace mode (`ld.so` with LD_TRACE_LOADED_OBJECTS), or with `chroot ROOT ld.so` in a
small root made from this host's glibc. Then the fix lines: a package of the target's own
distribution, or that it has none."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ninfer_kits.config.tables import parse
from ninfer_kits.errors import ConfigError
from ninfer_kits.inspector.elf import read_elf
from ninfer_kits.inspector.floor import kit_floor
from ninfer_kits.loader.facts import glibc_platform, platform_of
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.platforms.distros import shipped_distros
from ninfer_kits.verify import fixes
from ninfer_kits.verify.check import verify
from ninfer_kits.verify.fixes import Advice, fix_for, system_of
from ninfer_kits.verify.kit import open_kit
from ninfer_kits.verify.report import (
    CANNOT_RUN,
    MISSING,
    NOT_CHECKED,
    OK,
    VerifyReport,
    to_json,
)
from ninfer_kits.verify.target import open_target
from test_verify import gcc, in_root, row, validate_schema
from test_verify_loader import LOADER, loader_verdict, our_verdict

from tools import tool

HOST = Path("/")
APP = "#include <stdio.h>\nint k(void);\nint main(void) { puts(\"started\"); return k(); }\n"


@contextmanager
def on_host(kit: Path) -> Iterator[VerifyReport]:
    with open_kit(kit) as opened, open_target(opened.root) as target:
        yield verify(opened, target)


def assert_agrees_on_host(report: VerifyReport, kit: Path) -> None:
    """The same libraries, missing names and missing versions as this host's loader says."""
    fs = RootFS(HOST)
    for resolution in report.resolutions:
        program = str((kit / resolution.program).resolve())
        assert our_verdict(resolution, fs) == loader_verdict(HOST, program), resolution.program


def run_app(kit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kit / "kit" / "bin" / "app")], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin"})


def library(folder: Path, source: str, *, version: str | None = None,
            soname: str = "libk.so.1", extra: tuple[str, ...] = ()) -> Path:
    """A shared library; with `version`, its symbols in that version node (a version script),
    without, no version definitions at all."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.c").write_text(source)
    args = ["-shared", "-fPIC", f"-Wl,-soname,{soname}", "k.c", "-o", soname, *extra]
    if version:
        (folder / "k.map").write_text(f"{version} {{ global: *; }};\n")
        args.insert(0, "-Wl,--version-script=k.map")
    gcc(*args, cwd=folder)
    for scratch in ("k.c", "k.map"):
        (folder / scratch).unlink(missing_ok=True)
    return folder / soname


def kit_with(folder: Path, *, link_version: str | None, app: str = APP,
             runpath: str = "$ORIGIN/../lib", app_flags: tuple[str, ...] = ()) -> Path:
    """kit/bin/app linked against a libk.so.1 defining `link_version`, with RUNPATH `runpath`;
    the library it was linked against is left in build/ (the kit's kit/lib is the test's)."""
    build = folder / "build"
    library(build, "int k(void) { return 0; }\n", version=link_version)
    (folder / "kit" / "bin").mkdir(parents=True)
    (folder / "kit" / "lib").mkdir()
    (build / "app.c").write_text(app)
    gcc("app.c", "-L.", "-Wl,--no-as-needed", "-l:libk.so.1",
        f"-Wl,--enable-new-dtags,-rpath,{runpath}", *app_flags,
        "-o", str(folder / "kit" / "bin" / "app"), cwd=build)
    return folder


# --------------------------------------------------------------------------- symbol versions


USES_LIBC = "#include <stdlib.h>\nint k(void) { return abs(atoi(\"0\")); }\n"


def test_a_library_without_symbol_versions_satisfies_a_versioned_need(tmp_path: Path) -> None:
    """curl built with default options (no version script) defines no versions; a kit linked
    against a versioned libcurl needs CURL_OPENSSL_4 from it. glibc warns and runs."""
    system = tmp_path / "system"  # outside the kit: a library of the target, as libcurl is
    kit = kit_with(tmp_path, link_version="KIT_1", runpath=str(system))
    unversioned = library(system, USES_LIBC)
    info = read_elf(unversioned)
    assert info.version_defs == () and info.versym  # it uses libc's versioned symbols
    with on_host(kit) as report:
        assert_agrees_on_host(report, kit)
    assert report.met, report.rows
    as_json = to_json(report)
    validate_schema(as_json)
    assert as_json["programs"][0]["unversioned"][0]["versions"] == ["KIT_1"]  # type: ignore[index]
    _, found, status, _ = row(report, "libk.so.1 providing KIT_1")
    assert status == OK and "defines no symbol versions" in found
    done = run_app(kit)
    assert done.returncode == 0 and done.stdout == "started\n", done
    assert "no version information available" in done.stderr


def test_without_a_version_table_the_loader_stops(tmp_path: Path) -> None:
    """The same, but the library has no symbol version table at all (DT_VERSYM): binding a
    versioned reference to it fails an assertion in glibc's loader — it does not run."""
    kit = kit_with(tmp_path, link_version="KIT_1")
    bare = library(kit / "kit" / "lib", "int k(void) { return 0; }\n")
    assert not read_elf(bare).versym
    with on_host(kit) as report:
        pass
    # The trace stops at the assertion before its version listing: compare what it mapped.
    theirs = loader_verdict(HOST, str(kit / "kit" / "bin" / "app"))
    ours = our_verdict(report.resolutions[0], RootFS(HOST))
    assert (ours.mapped, ours.missing) == (theirs.mapped, theirs.missing)
    assert not report.met
    assert [(g.library, g.version) for g in report.resolutions[0].gaps] == [("libk.so.1", "KIT_1")]
    done = run_app(kit)
    assert done.returncode != 0 and "Inconsistency detected by ld.so" in done.stderr, done


def _weak_only(program: Path, library_name: str) -> None:
    """VER_FLG_WEAK on every version `program` needs from `library_name`, and on nothing else."""
    text = subprocess.run([tool("readelf"), "-V", "-W", str(program)], capture_output=True,
                          text=True, check=True).stdout
    section = text.split("Version needs section", 1)[1]
    offset = int(re.search(r"Offset: (0x[0-9a-f]+)", section)[1], 16)  # type: ignore[index]
    names = [n.library for n in read_elf(program).version_needs]
    data = bytearray(program.read_bytes())
    at = offset
    for name in names:
        _v, count, _file, aux, next_need = struct.unpack_from("<HHIII", data, at)
        aux_at = at + aux
        for _ in range(count):
            flags, next_aux = struct.unpack_from("<H", data, aux_at + 4)[0], \
                struct.unpack_from("<I", data, aux_at + 12)[0]
            if name == library_name:
                struct.pack_into("<H", data, aux_at + 4, flags | 0x2)
            if not next_aux:
                break
            aux_at += next_aux
        at += next_need
    program.write_bytes(bytes(data))


WEAK_APP = ("#include <stdio.h>\nextern int k(void) __attribute__((weak));\n"
            "int main(void) { puts(\"started\"); return k ? k() : 0; }\n")


@pytest.mark.parametrize("weak", [True, False])
def test_a_weak_version_need_is_not_required(tmp_path: Path, weak: bool) -> None:
    """app needs KIT_2 of libk.so.1, which defines KIT_1 only. A need marked VER_FLG_WEAK is
    not required: glibc's loader runs the program (it only reports the miss in verbose mode);
    the same need unmarked stops it."""
    system = tmp_path / "system"
    kit = kit_with(tmp_path, link_version="KIT_2", app=WEAK_APP, runpath=str(system))
    program = kit / "kit" / "bin" / "app"
    if weak:
        _weak_only(program, "libk.so.1")
        readelf = subprocess.run([tool("readelf"), "-V", "-W", str(program)],
                                 capture_output=True, text=True, check=True).stdout
        assert re.search(r"Name: KIT_2\s+Flags: WEAK", readelf), readelf
        assert re.search(r"Name: GLIBC_2\.34\s+Flags: none", readelf), readelf
    needs = {n.library: n for n in read_elf(program).version_needs}
    assert needs["libk.so.1"].weak == (("KIT_2",) if weak else ())
    assert needs["libc.so.6"].weak == ()
    library(system, USES_LIBC, version="KIT_1")
    with on_host(kit) as report:
        assert_agrees_on_host(report, kit)
    done = run_app(kit)
    floor = kit_floor([read_elf(program, "kit/bin/app")])
    if weak:
        assert report.met, report.rows
        assert done.returncode == 0 and done.stdout == "started\n", done
        assert dict(floor.versions_by_library)["libk.so.1"] == ()
    else:
        assert not report.met
        assert row(report, "libk.so.1 providing KIT_2")[2] == "too old"
        assert done.returncode != 0 and "version `KIT_2' not found" in done.stderr, done


# --------------------------------------------------------------------------- names


def test_the_programs_own_soname_satisfies_a_dependency(tmp_path: Path) -> None:
    """libk.so.1 needs libapp.so.1, which is the program itself (its DT_SONAME): the loader
    takes the program for it and looks no further."""
    build = tmp_path / "build"
    stub = library(build, "int app_hook(void) { return 0; }\n", soname="libapp.so.1")
    lib = tmp_path / "kit" / "lib"
    lib.mkdir(parents=True)
    (build / "k.c").write_text("int app_hook(void);\nint k(void) { return app_hook(); }\n")
    gcc("-shared", "-fPIC", "-Wl,-soname,libk.so.1", "k.c", "-L.", "-Wl,--no-as-needed",
        "-l:libapp.so.1", "-o", str(lib / "libk.so.1"), cwd=build)
    (tmp_path / "kit" / "bin").mkdir()
    (build / "app.c").write_text(APP + "int app_hook(void) { return 0; }\n")
    gcc("app.c", "-L", str(lib), "-l:libk.so.1", "-Wl,-soname,libapp.so.1", "-rdynamic",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib", "-Wl,-rpath-link," + str(build),
        "-o", str(tmp_path / "kit" / "bin" / "app"), cwd=build)
    stub.unlink()
    assert read_elf(tmp_path / "kit" / "bin" / "app").soname == "libapp.so.1"
    with on_host(tmp_path) as report:
        assert_agrees_on_host(report, tmp_path)
    assert report.met and not report.resolutions[0].missing, report.rows
    done = run_app(tmp_path)
    assert done.returncode == 0 and done.stdout == "started\n", done


def test_a_32_bit_library_in_a_64_bit_kit(tmp_path: Path) -> None:
    """kit/lib/libk.so.1 is ELFCLASS32: the loader skips it ("wrong ELF class: ELFCLASS32")
    and the program cannot start; verify says which file was skipped and why."""
    kit = kit_with(tmp_path, link_version=None)
    lib = kit / "kit" / "lib"
    (lib / "k.c").write_text("int k(void) { return 0; }\n")
    gcc("-m32", "-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libk.so.1", "k.c", "-o",
        "libk.so.1", cwd=lib)
    (lib / "k.c").unlink()
    assert read_elf(lib / "libk.so.1").elf_class == 32
    with on_host(kit) as report:
        assert_agrees_on_host(report, kit)
    assert not report.met
    _requirement, found, status, fix = row(report, "libk.so.1 (needed by kit/bin/app)")
    assert status == MISSING and "libk.so.1 (ELFCLASS32)" in found, found
    assert "apt" not in fix
    assert row(report, "kit/lib/libk.so.1 loadable")[2] == CANNOT_RUN
    as_json = to_json(report)
    validate_schema(as_json)
    skipped = as_json["programs"][0]["missing"][0]["skipped"]  # type: ignore[index]
    assert skipped == [f"{(kit / 'kit' / 'lib' / 'libk.so.1').resolve()} (ELFCLASS32)"]
    assert row(report, "x86-64 Linux")[0].startswith("x86-64 Linux, glibc")  # not x86-64/i386
    done = run_app(kit)
    assert done.returncode == 127 and "wrong ELF class: ELFCLASS32" in done.stderr, done


# --------------------------------------------------------------------------- $PLATFORM


def loaders_platform(root: Path = HOST) -> str:
    """What the loader expands $PLATFORM to: its own search-path trace for LD_LIBRARY_PATH."""
    command = ["/usr/bin/env", "-i", "LD_DEBUG=libs", "LD_LIBRARY_PATH=/ninfer-probe/$PLATFORM",
               LOADER, "--list", "/bin/true"]
    if root != HOST:
        command = [shutil.which("chroot") or "chroot", str(root), *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    match = re.search(r"search path=/ninfer-probe/([^/:\s]+)", done.stdout + done.stderr)
    assert match, done.stderr
    return match[1]


def test_platform_is_what_glibc_uses_on_this_cpu(tmp_path: Path) -> None:
    """$PLATFORM is glibc's name for this CPU ("haswell" on an Intel CPU with AVX2 and friends),
    not always x86_64; a kit whose RUNPATH uses it resolves as the loader resolves it."""
    assert glibc_platform() == loaders_platform()
    kit = kit_with(tmp_path, link_version=None, runpath="$ORIGIN/../lib/$PLATFORM")
    library(kit / "kit" / "lib" / loaders_platform(), "int k(void) { return 0; }\n")
    with on_host(kit) as report:
        assert_agrees_on_host(report, kit)
    assert report.met
    found = {f.name: f.path for f in report.resolutions[0].found}
    assert found["libk.so.1"].endswith(f"/kit/lib/{loaders_platform()}/libk.so.1")
    assert run_app(kit).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_platform_in_the_roots(roots: dict[str, Path], proc_mounted: None, suite: str) -> None:
    """Debian 12's glibc 2.36 and Debian 13's 2.41 name this CPU alike."""
    assert loaders_platform(roots[suite]) == glibc_platform()


def loaders_subdirs(root: Path = HOST) -> tuple[str, ...]:
    """The subfolders the loader tries in a search folder before the folder itself."""
    command = ["/usr/bin/env", "-i", "LD_DEBUG=libs", "LD_LIBRARY_PATH=/ninfer-probe",
               LOADER, "--list", "/bin/true"]
    if root != HOST:
        command = [shutil.which("chroot") or "chroot", str(root), *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    match = re.search(r"search path=(\S+)\s+\(LD_LIBRARY_PATH\)", done.stdout + done.stderr)
    assert match, done.stderr
    folders = match[1].split(":")
    assert folders[-1] == "/ninfer-probe"
    return tuple(folder.removeprefix("/ninfer-probe/") for folder in folders[:-1])


def test_hwcaps_subfolders_are_searched_as_the_loader_searches_them(tmp_path: Path) -> None:
    """glibc-hwcaps/x86-64-vN (glibc 2.33 on) and, up to 2.36, tls/haswell/x86_64 and their
    kin: tried in every search folder before the folder itself, in this order."""
    kit = kit_with(tmp_path, link_version=None)
    fs = RootFS(HOST)
    with open_kit(kit) as opened, open_target(opened.root) as target:
        assert target.setup.subdirs == loaders_subdirs()
    assert "glibc-hwcaps/x86-64-v2" in loaders_subdirs()  # any x86-64 CPU of this century
    library(kit / "kit" / "lib", "int k(void) { return 1; }\n")
    library(kit / "kit" / "lib" / "glibc-hwcaps" / "x86-64-v2", "int k(void) { return 0; }\n")
    with on_host(kit) as report:
        assert_agrees_on_host(report, kit)
    found = {f.name: fs.canonical(f.path) for f in report.resolutions[0].found}
    assert found["libk.so.1"] == str((kit / "kit" / "lib" / "glibc-hwcaps" / "x86-64-v2" /
                                      "libk.so.1").resolve())
    assert run_app(kit).returncode == 0  # the glibc-hwcaps copy returns 0, the other 1


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_hwcaps_subfolders_in_the_roots(roots: dict[str, Path], proc_mounted: None,
                                        suite: str) -> None:
    """Debian 12 (glibc 2.36) still tries the legacy subfolders, Debian 13 (2.41) no more."""
    from ninfer_kits.loader.facts import loader_setup

    assert loader_setup(RootFS(roots[suite])).subdirs == loaders_subdirs(roots[suite])


def test_platform_rule() -> None:
    intel = "vendor_id\t: GenuineIntel\nflags\t\t: fpu lm avx2 fma bmi1 bmi2 abm movbe popcnt\n"
    assert platform_of(intel) == "haswell"
    assert platform_of(intel.replace(" movbe", "")) == "x86_64"
    assert platform_of(intel.replace("GenuineIntel", "AuthenticAMD")) == "x86_64"
    assert platform_of(intel.replace("popcnt", "popcnt avx512cd avx512er avx512pf")) == \
        "xeon_phi"


# --------------------------------------------------------------------------- small roots


def mini_root(folder: Path, *, libc: bool = True, loader: bool = True) -> Path:
    """A root of this host's glibc alone: its loader and libc.so.6, and its os-release."""
    for real, inside in ((Path(LOADER).resolve(), "lib64/ld-linux-x86-64.so.2") if loader else
                         (None, ""),
                         (Path("/lib/x86_64-linux-gnu/libc.so.6").resolve(),
                          "lib/x86_64-linux-gnu/libc.so.6") if libc else (None, "")):
        if real is not None:
            (folder / inside).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(real, folder / inside)
    (folder / "etc").mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path("/etc/os-release").resolve(), folder / "etc" / "os-release")
    (folder / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    return folder


def ld_list(root: Path, program: str) -> subprocess.CompletedProcess[str]:
    """`chroot ROOT ld.so --list PROGRAM` (the small roots have no env to set a trace with)."""
    return subprocess.run([shutil.which("chroot") or "chroot", str(root), LOADER, "--list",
                           program], capture_output=True, text=True, check=False)


def test_a_missing_libc_gets_its_own_row(tmp_path: Path) -> None:
    kit = kit_with(tmp_path / "kit", link_version=None)
    library(kit / "kit" / "lib", "int k(void) { return 0; }\n")
    root = mini_root(tmp_path / "root", libc=False)
    with in_root(kit, root) as report:
        done = ld_list(root, "/opt/ninfer-kit/kit/bin/app")
    assert done.returncode == 127, done
    assert "libc.so.6: cannot open shared object file" in done.stderr, done
    assert [m.name for m in report.resolutions[0].missing] == ["libc.so.6"]
    assert not report.met
    _requirement, found, status, _ = row(report, "libc.so.6 (glibc's own library)")
    assert status == MISSING and found.startswith("not found")
    assert row(report, "x86-64 Linux")[2] == MISSING


def test_a_missing_loader_gets_its_own_row(tmp_path: Path) -> None:
    kit = kit_with(tmp_path / "kit", link_version=None)
    library(kit / "kit" / "lib", "int k(void) { return 0; }\n")
    root = mini_root(tmp_path / "root", loader=False)
    with in_root(kit, root) as report:
        done = subprocess.run([shutil.which("chroot") or "chroot", str(root),
                               "/opt/ninfer-kit/kit/bin/app"], capture_output=True, text=True,
                              check=False)
    assert done.returncode == 127 and "No such file or directory" in done.stderr, done
    assert not report.met
    _requirement, found, status, _ = row(report, "the dynamic loader /lib64/ld-linux-x86-64.so.2")
    assert status == MISSING and "not a glibc x86-64 system" in found


def test_libcuda_in_a_root_is_the_drivers(tmp_path: Path) -> None:
    """A program linking libcuda.so.1 itself: in a root or an image the NVIDIA container runtime
    brings it from the host's driver, so it is the driver's row there, not "missing"."""
    kit = tmp_path / "kit"
    build = kit / "build"
    library(build, "int cuInit(unsigned flags) { return (int)flags; }\n", soname="libcuda.so.1")
    (kit / "kit" / "bin").mkdir(parents=True)
    (build / "app.c").write_text("int cuInit(unsigned);\nint main(void) { return cuInit(0); }\n")
    gcc("app.c", "-L.", "-l:libcuda.so.1", "-o", str(kit / "kit" / "bin" / "app"), cwd=build)
    shutil.rmtree(build)
    root = mini_root(tmp_path / "root")
    with in_root(kit, root) as report:
        done = ld_list(root, "/opt/ninfer-kit/kit/bin/app")
    # the root alone has no driver: its loader stops there
    assert done.returncode == 127, done
    assert "libcuda.so.1: cannot open shared object file" in done.stderr, done
    assert not report.resolutions[0].missing
    assert [m.name for m in report.resolutions[0].from_driver] == ["libcuda.so.1"]
    assert not [r for r in report.rows if r.requirement.startswith("libcuda.so.1")], report.rows
    driver = row(report, "A driver providing libcuda.so.1")
    assert driver[2] == NOT_CHECKED and "supplied by the driver at run time" in driver[1]
    assert report.met
    as_json = to_json(report)
    validate_schema(as_json)
    assert as_json["programs"][0]["supplied_by_driver"] == ["libcuda.so.1"]  # type: ignore[index]
    # On this host (no driver here) it is missing, and its fix is the driver, not a package.
    with on_host(kit) as host_report:
        pass
    if not Path("/proc/driver/nvidia/version").exists():
        _, _, status, fix = row(host_report, "libcuda.so.1")
        assert status == MISSING and "NVIDIA driver" in fix and "apt" not in fix


def test_glibc_is_shown_by_its_release(tmp_path: Path) -> None:
    """A glibc release that adds no symbol adds no GLIBC_<release> version (no x86-64
    libc.so.6 defines GLIBC_2.19, 2.20 or 2.21): the row shows the release from libc's banner
    (what gnu_get_libc_version says), not the highest version defined. This host's real libc
    against `ldd --version`, then a libc.so.6 of "2.31" defining up to GLIBC_2.30, made here
    in a root of its own."""
    kit = kit_with(tmp_path / "kit", link_version=None)
    library(kit / "kit" / "lib", "int k(void) { return 0; }\n")
    with on_host(kit) as report:
        pass
    host_defs = read_elf(Path("/lib/x86_64-linux-gnu/libc.so.6")).version_defs
    assert "GLIBC_2.18" in host_defs and "GLIBC_2.21" not in host_defs
    ldd = subprocess.run(["ldd", "--version"], capture_output=True, text=True, check=True)
    release = re.search(r"(\d+\.\d+)\s*$", ldd.stdout.splitlines()[0])[1]  # type: ignore[index]
    assert row(report, "x86-64 Linux")[1].startswith(f"glibc {release} (")

    root = mini_root(tmp_path / "root", libc=False)
    libc_dir = root / "lib" / "x86_64-linux-gnu"
    libc_dir.mkdir(parents=True)
    nodes = " ".join(f"GLIBC_2.{minor} {{ global: f{minor}; }};" for minor in range(2, 31))
    (libc_dir / "v.map").write_text(nodes.replace("GLIBC_2.2 ", "GLIBC_2.2.5 ") + "\n")
    (libc_dir / "c.c").write_text(
        "const char banner[] = \"GNU C Library (test) stable release version 2.31.\\n\";\n"
        + "".join(f"int f{minor}(void) {{ return {minor}; }}\n" for minor in range(2, 31)))
    gcc("-shared", "-fPIC", "-nostdlib", "-Wl,--version-script=v.map", "-Wl,-soname,libc.so.6",
        "c.c", "-o", "libc.so.6", cwd=libc_dir)
    for scratch in ("v.map", "c.c"):
        (libc_dir / scratch).unlink()
    defined = read_elf(libc_dir / "libc.so.6").version_defs
    assert "GLIBC_2.30" in defined and "GLIBC_2.31" not in defined
    with in_root(kit, root) as report:
        pass
    found = row(report, "x86-64 Linux")[1]
    assert found.startswith("glibc 2.31 (/lib/x86_64-linux-gnu/libc.so.6)"), found


# --------------------------------------------------------------------------- fix lines


def test_a_fix_names_a_package_of_the_targets_distribution() -> None:
    """Ubuntu 24.04 has FFmpeg 6.1: libavformat.so.60, no libavformat59 package."""
    noble = system_of("ubuntu", ("debian",), "24.04", "Ubuntu 24.04.3 LTS", "debian")
    assert noble.name == "Ubuntu 24.04" and noble.distro is not None
    advice = Advice("ninfer-3090-sm86", portable=True)
    fix = fix_for("libavformat.so.59", noble, advice)
    assert "apt-get install libavformat59" not in fix
    assert fix.startswith("no package of Ubuntu 24.04 provides libavformat.so.59 "
                          "(it has FFmpeg 6.1: libavformat.so.60)"), fix
    assert "ninfer-kits fetch ninfer-3090-sm86 --portable" in fix
    assert fix_for("libavformat.so.60", noble) == \
        "install FFmpeg's libavformat: apt-get install libavformat60"
    assert fix_for("libswresample.so.4", noble).endswith("apt-get install libswresample4")
    assert fix_for("libcurl.so.4", noble).endswith("apt-get install libcurl4t64")
    assert fix_for("libssl.so.3", noble).endswith("apt-get install libssl3t64")
    jammy = system_of("ubuntu", ("debian",), "22.04", "Ubuntu 22.04.5 LTS", "debian")
    assert fix_for("libssl.so.3", jammy).endswith("apt-get install libssl3")
    assert fix_for("libcurl.so.4", jammy).endswith("apt-get install libcurl4")
    rocky = system_of("rocky", ("rhel", "centos", "fedora"), "9.4", "Rocky Linux 9.4", "redhat")
    assert rocky.name == "RHEL 9"
    fix = fix_for("libavformat.so.61", rocky)
    assert fix.startswith("no package of RHEL 9 provides libavformat.so.61 (it packages no "
                          "FFmpeg; EPEL 9's ffmpeg-free has FFmpeg 5.1)"), fix
    assert fix_for("libz.so.1", rocky) == "install zlib: dnf install zlib"
    arch = system_of("arch", (), "", "Arch Linux", "arch")
    assert fix_for("libavcodec.so.62", arch).endswith("pacman -S ffmpeg")
    # Every distribution's own FFmpeg sonames map to its own packages, one each.
    for distro in shipped_distros().distros:
        system = fixes.System(distro.name, "debian", distro)
        for soname in distro.ffmpeg.sonames:
            assert fix_for(soname, system).split()[-1] in distro.ffmpeg.packages


def test_an_unknown_distribution_is_said_to_be_unknown() -> None:
    mint = system_of("linuxmint", ("ubuntu", "debian"), "22", "Linux Mint 22", "debian")
    assert mint.distro is None
    fix = fix_for("libavformat.so.59", mint)
    assert fix.startswith("this tool has no package facts for Linux Mint 22: install what "
                          "provides libavformat.so.59 there (apt-file search "
                          "libavformat.so.59)"), fix
    assert "libavformat59" not in fix


def test_the_package_data_is_validated(tmp_path: Path) -> None:
    good = fixes.DATA_FILE.read_text()
    ids = {d.id for d in shipped_distros().distros}
    fixes._validate(parse(Path("x"), good), ids)
    bad_id = good.replace("debian-13 = \"zlib1g\"", "debian-14 = \"zlib1g\"")
    with pytest.raises(ConfigError, match=r"debian-14.*not a distribution of distros\.toml"):
        fixes._validate(parse(Path("x"), bad_id), ids)
    bad_name = good.replace("arch = \"zlib\"", "arch = \"Zlib Package\"")
    with pytest.raises(ConfigError, match="is not a package name"):
        fixes._validate(parse(Path("x"), bad_name), ids)
    with pytest.raises(ConfigError, match="unsupported schema"):
        fixes._validate(parse(Path("x"), good.replace("schema = 2", "schema = 1")), ids)


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["bookworm", "trixie"])
def test_fix_packages_exist_in_the_real_roots(roots: dict[str, Path], suite: str) -> None:
    """The package a fix names for Debian 12 and 13 is the one that ships the library there
    (dpkg's file lists in the root); for a soname the release lacks, none is named."""
    from ninfer_kits.loader.facts import os_release
    from ninfer_kits.verify.target import target_system

    root = roots[suite]
    owners: dict[str, str] = {}
    for listing in (root / "var" / "lib" / "dpkg" / "info").glob("*.list"):
        for line in listing.read_text().splitlines():
            owners.setdefault(line.rsplit("/", 1)[-1], listing.stem.split(":")[0])
    system = target_system(os_release(RootFS(root)))
    assert system.distro is not None and system.distro.codename == suite
    checked = 0
    for soname in ("libavformat.so.59", "libavformat.so.61", "libavcodec.so.59",
                   "libavcodec.so.61", "libcurl.so.4", "libz.so.1", "libstdc++.so.6",
                   "libgcc_s.so.1", "libssl.so.3"):
        fix = fix_for(soname, system)
        if soname in owners:
            assert fix.endswith(f"apt-get install {owners[soname]}"), (soname, fix)
            checked += 1
        elif soname.startswith("libav"):
            assert fix.startswith(f"no package of {system.name} provides {soname}"), fix
    assert checked >= 6, owners.keys() & {"libz.so.1", "libcurl.so.4"}
