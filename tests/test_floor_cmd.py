"""`ninfer-kits floor KIT`: the distributions file checked against real Debian 11, 12 and 13 roots,
the answers for the example kit and for crafted kits whose needs are set by version scripts, and
the validation of the distributions file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput, ConfigError
from ninfer_kits.inspector.elf import is_elf, read_elf
from ninfer_kits.inspector.floor import SymbolVersion
from ninfer_kits.kit import buildinfo
from ninfer_kits.loader.facts import os_release
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.platforms.distros import DATA_FILE, Distro, load_distros, shipped_distros

from tools import tool

SUITES = {"bullseye": "debian-11", "bookworm": "debian-12", "trixie": "debian-13"}
ALL = ("ubuntu-20-04", "ubuntu-22-04", "ubuntu-24-04", "ubuntu-26-04", "debian-11", "debian-12",
       "debian-13", "rhel-8", "rocky-8", "almalinux-8", "rhel-9", "rhel-10", "fedora-44", "arch")
# glibc's own libraries: glibc 2.31 defined no new version in libc.so.6 (Debian 11's stops at
# GLIBC_2.30), only in libm.so.6 and libpthread.so.0, so a release's glibc is the highest of them.
GLIBC_LIBRARIES = ("libc.so.6", "libm.so.6", "libpthread.so.0")
# The releases whose glibc is older than Debian 12's 2.34 (and libstdc++ older than GCC 11's).
OLDER = {"ubuntu-20-04", "debian-11", "rhel-8", "rocky-8", "almalinux-8"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "floor", *args],
                          capture_output=True, text=True, check=False)


def answers(stdout: str) -> dict[str, str]:
    """`{"debian-13": "yes", ...}` from floor's JSON."""
    return {d["id"]: d["answer"] for d in json.loads(stdout)["distributions"]}


def lines(stdout: str) -> dict[str, str]:
    """Each distribution's answer line, by name."""
    found = {}
    for line in stdout.splitlines():
        name, sep, _ = line.partition(": ")
        if sep and not line.startswith(" ") and name in {d.name for d in shipped_distros().distros}:
            found[name] = line
    return found


# --------------------------------------------------------------------------- the facts, checked


def test_the_shipped_file_loads_with_every_distribution() -> None:
    known = shipped_distros()
    assert tuple(d.id for d in known.distros) == ALL
    assert known.arch == "x86-64" and known.path == DATA_FILE
    for distro in known.distros:
        for table in (distro.glibc, distro.libstdcxx, distro.ffmpeg, distro.libcurl, distro.cuda):
            assert table.provenance.source.strip()


def _highest(names: tuple[str, ...], prefix: str) -> str:
    numbers = [SymbolVersion.parse(n).number for n in names
               if SymbolVersion.parse(n).prefix == prefix]
    return ".".join(map(str, max(numbers)))


def _dpkg(root: Path) -> dict[str, str]:
    """Installed package → version, from the root's dpkg status."""
    installed, package = {}, ""
    for line in (root / "var" / "lib" / "dpkg" / "status").read_text().splitlines():
        if line.startswith("Package: "):
            package = line.split(": ", 1)[1]
        elif line.startswith("Version: "):
            installed[package] = line.split(": ", 1)[1]
    return installed


def _upstream(version: str) -> str:
    """`7:5.1.9-0+deb12u1` → `5.1.9`."""
    return version.split(":", 1)[-1].rsplit("-", 1)[0]


@pytest.mark.parametrize("suite", [
    pytest.param("bullseye", marks=pytest.mark.prepared("verify-root:bullseye")),
    *(pytest.param(suite, marks=pytest.mark.prepared("verify-roots"))
      for suite in ("bookworm", "trixie"))])
def test_debian_facts_agree_with_the_real_root(request: pytest.FixtureRequest,
                                               suite: str) -> None:
    """The Debian rows of distros.toml against a debootstrapped root of that release (verify's
    bookworm and trixie roots, and the bullseye one of `old_roots`): the version definitions of
    glibc's libraries, libstdc++.so.6, libgcc_s.so.1 and libcurl.so.4, the FFmpeg sonames in
    /usr/lib/x86_64-linux-gnu, and the packages in its dpkg status."""
    roots: dict[str, Path] = request.getfixturevalue("old_roots" if suite == "bullseye"
                                                     else "roots")
    root, distro = roots[suite], shipped_distros().get(SUITES[suite])
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    release = os_release(RootFS(root))
    assert (release.id, release.version_id) == (distro.os_id, distro.version_id)

    glibc = [name for library in GLIBC_LIBRARIES
             for name in read_elf((lib / library).resolve()).version_defs]
    assert _highest(tuple(glibc), "GLIBC") == distro.glibc.version

    libstdcxx_path = (lib / "libstdc++.so.6").resolve()
    libstdcxx = read_elf(libstdcxx_path)
    assert _highest(libstdcxx.version_defs, "GLIBCXX") == distro.libstdcxx.glibcxx
    assert _highest(libstdcxx.version_defs, "CXXABI") == distro.libstdcxx.cxxabi
    # The rule the Ubuntu rows rest on: libstdc++.so.6.0.N defines up to GLIBCXX_3.4.N.
    assert libstdcxx_path.name == f"libstdc++.so.6.0.{distro.libstdcxx.glibcxx.split('.')[-1]}"
    # And the one behind the libgcc_s check: GCC N's libgcc_s defines at most GCC_N.0.0 (GCC 12's
    # and 14's that one; GCC 10's stops at GCC_7.0.0).
    libgcc = read_elf((lib / "libgcc_s.so.1").resolve())
    assert int(_highest(libgcc.version_defs, "GCC").split(".")[0]) \
        <= int(distro.libstdcxx.gcc.split(".")[0])

    sonames = {read_elf(path.resolve()).soname for path in lib.iterdir()
               if re.fullmatch(r"lib(avformat|avcodec|avutil|swscale|swresample)\.so\.[0-9]+",
                               path.name)}
    assert sonames == set(distro.ffmpeg.sonames)
    curl = read_elf((lib / distro.libcurl.soname).resolve())
    assert curl.soname == distro.libcurl.soname
    assert tuple(v for v in curl.version_defs if SymbolVersion.parse(v).number) \
        == distro.libcurl.versions

    installed = _dpkg(root)
    assert _upstream(installed["libc6"]).startswith(distro.glibc.version)
    assert _upstream(installed[distro.libstdcxx.package]).startswith(distro.libstdcxx.gcc + ".")
    assert distro.libcurl.package in installed
    for package in distro.ffmpeg.packages.split():
        assert package in installed, package
        assert _upstream(installed[package]).startswith(distro.ffmpeg.version + ".")
    # What the test confirms, the file may mark as checked; and it does.
    for table in (distro.glibc, distro.libstdcxx, distro.ffmpeg, distro.libcurl):
        assert table.provenance.checked, table


# --------------------------------------------------------------------------- the example kit


def _host_debian() -> Distro:
    release = os_release(RootFS(Path("/")))
    for distro in shipped_distros().distros:
        if (distro.os_id, distro.version_id) == (release.id, release.version_id) \
                and distro.id.startswith("debian-"):
            return distro
    pytest.skip(f"the example kit's floor is this host's; expectations are written for Debian "
                f"12 and 13 hosts, not {release.pretty_name or 'this one'}")
    raise AssertionError


@pytest.mark.slow
def test_the_example_kit_runs_only_on_the_debian_it_was_built_on(example_dist: Path) -> None:
    """Built here, the example links this host's FFmpeg, which no other known distribution has:
    every other answer is no, for its FFmpeg sonames (and, on the releases older than Debian 12's
    glibc 2.34 and GCC 12, for those too); the CUDA runtime comes from NVIDIA, but where NVIDIA's
    repository records no CUDA 13 (Ubuntu 20.04, Debian 11)."""
    host = _host_debian()
    done = cli(str(example_dist), "--json")
    assert done.returncode == 0, done.stderr
    assert answers(done.stdout) == {d: "yes" if d == host.id else "no" for d in ALL}
    report = json.loads(done.stdout)
    assert report["schema_version"] == 1 and report["checked"].startswith("SHA256SUMS ok")
    minor = buildinfo.read(example_dist / "BUILDINFO.txt").cuda_version.split(".")[1]
    for entry in report["distributions"]:
        if entry["answer"] == "no":
            failed = [r["requirement"] for r in entry["requirements"] if r["status"] == "not met"]
            ffmpeg = [r for r in failed if r.startswith(host.ffmpeg.sonames[0])]
            others = [r for r in failed if r not in ffmpeg]
            assert ffmpeg, entry
            if host.id == "debian-12":
                assert all(r.startswith(("glibc ≥", "libstdc++.so.6 providing"))
                           for r in others), entry
                assert bool(others) == (entry["id"] in OLDER), entry
        runtime = entry["cuda_runtime"][0]
        assert runtime["soname"] == "libcudart.so.13"
        if entry["id"] in ("ubuntu-20-04", "debian-11"):
            assert runtime["how"] == "not known", entry
        elif entry["id"] != "arch":
            assert (runtime["how"], runtime["package"]) == ("nvidia", f"cuda-cudart-13-{minor}")

    text = cli(str(example_dist))
    assert text.returncode == 0, text.stderr
    by_name = lines(text.stdout)
    assert by_name[host.name] == f"{host.name}: yes"
    assert f"  CUDA runtime: from NVIDIA's repository (cuda-cudart-13-{minor}; repository " \
           f"{host.cuda.nvidia_repo})" in text.stdout
    if host.id == "debian-12":
        assert by_name["Ubuntu 24.04"] == (
            "Ubuntu 24.04: no — libavformat.so.59, libavcodec.so.59, libavutil.so.57, "
            "libswscale.so.6 (FFmpeg 5.x); it has libavformat.so.60, libavcodec.so.60, "
            "libavutil.so.58, libswscale.so.7 (FFmpeg 6.1)")
        assert by_name["RHEL 9"].endswith(
            "RHEL 9 packages no FFmpeg; EPEL 9's ffmpeg-free has FFmpeg 5.1 with these sonames")


# --------------------------------------------------------------------------- crafted kits


def _gcc(*args: str | Path, cwd: Path) -> None:
    done = subprocess.run([tool("gcc"), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr


def _stub(folder: Path, soname: str, nodes: dict[str, str]) -> str:
    """A shared library `soname` whose version node NODE defines the function nodes[NODE]:
    whatever links against it needs those versions, as a program does from the real one."""
    source, script = folder / f"{soname}.c", folder / f"{soname}.map"
    source.write_text("".join(f"int {symbol}(void) {{ return 0; }}\n"
                              for symbol in nodes.values()))
    last = list(nodes)[-1]
    script.write_text("".join(f"{node} {{ global: {symbol};{' local: *;' * (node == last)} }};\n"
                              for node, symbol in nodes.items()))
    _gcc("-shared", "-fPIC", "-nostdlib", f"-Wl,-soname,{soname}",
         f"-Wl,--version-script={script.name}", source.name, "-o", soname, cwd=folder)
    return soname


def crafted_kit(folder: Path, stubs: dict[str, dict[str, str]]) -> Path:
    """kit/bin/app (a real program of this host) and kit/lib/libneeds.so.1, which calls every
    stub function: its needs are the stubs' sonames and version nodes, nothing else."""
    made = folder / "stubs"
    made.mkdir(parents=True)
    for soname, nodes in stubs.items():
        _stub(made, soname, nodes)
    symbols = [symbol for nodes in stubs.values() for symbol in nodes.values()]
    (made / "needs.c").write_text("".join(f"int {s}(void);\n" for s in symbols)
                                  + "int needs(void) { return "
                                  + " + ".join(f"{s}()" for s in symbols) + "; }\n")
    lib, bin_dir = folder / "kit" / "lib", folder / "kit" / "bin"
    lib.mkdir(parents=True)
    bin_dir.mkdir()
    _gcc("-shared", "-fPIC", "-nostdlib", "-Wl,--no-as-needed", "-Wl,-soname,libneeds.so.1",
         "needs.c", "-o", lib / "libneeds.so.1", "-L.",
         *(f"-l:{soname}" for soname in stubs), cwd=made)
    (made / "app.c").write_text("int main(void) { return 0; }\n")
    _gcc("app.c", "-o", bin_dir / "app", cwd=made)
    shutil.rmtree(made)
    return folder


FFMPEG7 = {"libavformat.so.61": {"LIBAVFORMAT_61": "avformat_stub"},
           "libavcodec.so.61": {"LIBAVCODEC_61": "avcodec_stub"},
           "libavutil.so.59": {"LIBAVUTIL_59": "avutil_stub"},
           "libswscale.so.8": {"LIBSWSCALE_8": "swscale_stub"}}
CURL = {"libcurl.so.4": {"CURL_OPENSSL_4": "curl_stub"}}
CUDART13 = {"libcudart.so.13": {"libcudart.so.13": "cudart_stub"}}


@pytest.mark.slow
def test_a_kit_of_debian_13_needs(tmp_path: Path) -> None:
    """glibc 2.38, GCC 13.2's libstdc++ and FFmpeg 7: only Debian 13 has all of it."""
    kit = crafted_kit(tmp_path / "trixie-like", {
        "libc.so.6": {"GLIBC_2.38": "glibc_stub"},
        "libstdc++.so.6": {"GLIBCXX_3.4.32": "glibcxx_stub", "CXXABI_1.3.14": "cxxabi_stub"},
        **FFMPEG7, **CURL, **CUDART13})
    done = cli(str(kit), "--json")
    assert done.returncode == 0, done.stderr
    assert answers(done.stdout) == {d: "yes" if d == "debian-13" else "no" for d in ALL}
    assert json.loads(done.stdout)["checked"] == (
        "an unpacked kit: kit/ not checked file by file: no kit/MANIFEST.json (a kit packed "
        "before kits listed their files)")

    by_name = lines(cli(str(kit)).stdout)
    assert by_name["Debian 13"] == "Debian 13: yes"
    assert by_name["Ubuntu 24.04"] == (
        "Ubuntu 24.04: no — libavformat.so.61, libavcodec.so.61, libavutil.so.59, "
        "libswscale.so.8 (FFmpeg 7.x); it has libavformat.so.60, libavcodec.so.60, "
        "libavutil.so.58, libswscale.so.7 (FFmpeg 6.1)")
    assert by_name["RHEL 9"].startswith(
        "RHEL 9: no — glibc 2.34 < 2.38; GLIBCXX_3.4.32 (GCC 13.2 or newer); it has "
        "GLIBCXX_3.4.29 (GCC 11.5); CXXABI_1.3.14 (GCC 13.1 or newer); it has CXXABI_1.3.13 "
        "(GCC 11.5); libavformat.so.61, libavcodec.so.61, libavutil.so.59, libswscale.so.8 "
        "(FFmpeg 7.x); RHEL 9 packages no FFmpeg; EPEL 9's ffmpeg-free has FFmpeg 5.1: ")
    assert by_name["RHEL 10"] == (
        "RHEL 10: no — libavformat.so.61, libavcodec.so.61, libavutil.so.59, libswscale.so.8 "
        "(FFmpeg 7.x); RHEL 10 packages no FFmpeg; EPEL 10's ffmpeg-free has FFmpeg 7.1 with "
        "these sonames")
    assert by_name["Debian 12"].startswith("Debian 12: no — glibc 2.36 < 2.38; GLIBCXX_3.4.32")

    # The same kit as an archive: read through the hardened reader, the same answers.
    archive = tmp_path / "kit.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(kit / "kit", arcname="kit")
    from_archive = cli(str(archive), "--json")
    assert from_archive.returncode == 0, from_archive.stderr
    assert answers(from_archive.stdout) == answers(done.stdout)


@pytest.mark.slow
def test_a_kit_of_older_needs(tmp_path: Path) -> None:
    """glibc 2.34 and GCC 12's libstdc++, no FFmpeg: yes where the facts say so (naming the
    unchecked ones it rests on), no on RHEL 9 (GCC 11), not known where the symbol versions
    of libcurl are not known."""
    kit = crafted_kit(tmp_path / "older", {
        "libc.so.6": {"GLIBC_2.34": "glibc_stub"},
        "libstdc++.so.6": {"GLIBCXX_3.4.30": "glibcxx_stub"},
        **CURL, **CUDART13})
    done = cli(str(kit), "--json")
    assert done.returncode == 0, done.stderr
    assert answers(done.stdout) == {
        "ubuntu-20-04": "no", "ubuntu-22-04": "yes", "ubuntu-24-04": "yes", "ubuntu-26-04": "yes",
        "debian-11": "no", "debian-12": "yes", "debian-13": "yes", "rhel-8": "no", "rocky-8": "no",
        "almalinux-8": "no", "rhel-9": "no", "rhel-10": "not known", "fedora-44": "not known",
        "arch": "not known"}
    by_id = {d["id"]: d for d in json.loads(done.stdout)["distributions"]}
    assert by_id["ubuntu-24-04"]["unchecked"] == ["libcurl.versions"]
    assert by_id["debian-12"]["unchecked"] == []
    assert by_id["arch"]["cuda_runtime"][0]["how"] == "distribution"

    by_name = lines(cli(str(kit)).stdout)
    assert by_name["Debian 12"] == "Debian 12: yes"
    assert by_name["Ubuntu 24.04"] == (
        "Ubuntu 24.04: yes (rests on unchecked facts: libcurl.versions)")
    assert by_name["RHEL 9"] == (
        "RHEL 9: no — GLIBCXX_3.4.30 (GCC 12.1 or newer); it has GLIBCXX_3.4.29 (GCC 11.5)")
    assert by_name["Fedora 44"] == (
        "Fedora 44: not known — whether its libcurl.so.4 defines CURL_OPENSSL_4 is not known "
        "here")
    # The RHEL 8 rebuilds are answered each by name, with RHEL 8's glibc and libstdc++.
    for name in ("RHEL 8", "Rocky Linux 8", "AlmaLinux 8"):
        assert by_name[name] == (
            f"{name}: no — glibc 2.28 < 2.34; GLIBCXX_3.4.30 (GCC 12.1 or newer); it has "
            f"GLIBCXX_3.4.25 (GCC 8.5)"), by_name[name]
    assert by_name["Ubuntu 20.04"].startswith("Ubuntu 20.04: no — glibc 2.31 < 2.34; "
                                              "GLIBCXX_3.4.30 (GCC 12.1 or newer); it has "
                                              "GLIBCXX_3.4.28 (GCC 10.5)")


# --------------------------------------------------------------------------- bad input


def test_bad_kits_exit_2(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a kit\n")
    empty = tmp_path / "empty"
    (empty / "kit" / "bin").mkdir(parents=True)
    for args, needle in (((str(notes),), "not a kit archive"),
                         ((str(tmp_path / "absent"),), "no such file or folder"),
                         ((str(empty),), "kit/bin/ holds no program"),
                         ((str(empty), "--facts", str(tmp_path / "none.toml")),
                          "no such distributions file")):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert needle in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


SHIPPED = DATA_FILE.read_text(encoding="utf-8")


def broken(tmp_path: Path, old: str, new: str, *, count: int = 1) -> Path:
    assert old in SHIPPED, old
    path = tmp_path / "distros.toml"
    path.write_text(SHIPPED.replace(old, new, count), encoding="utf-8")
    return path


def _line_of(path: Path, needle: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), start=1)
                if needle in line)


GLIBC_22 = '[distros.ubuntu-22-04.glibc]\nversion = "2.35"'
CASES = [
    # (old, new, table, key, message, the text of the line the error names)
    ("schema = 1", "schema = 2", "", "schema", "unsupported schema 2", "schema = 2"),
    ("schema = 1", 'schema = "1"', "", "schema", "expected an integer", 'schema = "1"'),
    (GLIBC_22, GLIBC_22.replace("2.35", "2.x"), "distros.ubuntu-22-04.glibc", "version",
     "'2.x' is not of the form", 'version = "2.x"'),
    (GLIBC_22, GLIBC_22.replace("version", "verison"), "distros.ubuntu-22-04.glibc", "verison",
     "unknown key 'verison'; did you mean 'version'?", "verison ="),
    ('gcc = "12.3"\nglibcxx = "3.4.30"', 'gcc = "12.3"\nglibcxx = "3.4.31"',
     "distros.ubuntu-22-04.libstdcxx", "glibcxx",
     "GLIBCXX_3.4.31 disagrees with GCC 12.3: runtime_facts.toml says GCC 12.3 provides up to "
     "3.4.30", 'glibcxx = "3.4.31"'),
    ('gcc = "11.5"\nglibcxx = "3.4.29"\ncxxabi = "1.3.13"',
     'gcc = "11.5"\nglibcxx = "3.4.29"\ncxxabi = "1.3.14"', "distros.rhel-9.libstdcxx",
     "cxxabi", "CXXABI_1.3.14 disagrees with GCC 11.5", 'cxxabi = "1.3.14"'),
    ('"libswscale.so.5", "libswresample.so.3"', '"libswscale.so.6", "libswresample.so.3"',
     "distros.ubuntu-20-04.ffmpeg", "sonames", "FFmpeg 4.2's sonames are", "libswscale.so.6"),
    ('"libswscale.so.5", "libswresample.so.3"', '"libswscale.so.5"',
     "distros.ubuntu-20-04.ffmpeg", "sonames",
     "must name each of avformat, avcodec, avutil, swscale, swresample once", "libswscale.so.5"),
    ("version = \"2.35\"\nchecked = true", "version = \"2.35\"\nchecked = \"yes\"",
     "distros.ubuntu-22-04.glibc", "checked", "expected a boolean, got a string",
     'checked = "yes"'),
    ("version = \"2.35\"\nchecked = true", "version = \"2.35\"\nchecked = true\n"
     "unchecked = [\"version\"]", "distros.ubuntu-22-04.glibc", "unchecked",
     "names unchecked keys, but checked = true", 'unchecked = ["version"]'),
    ('unchecked = ["gcc"]', 'unchecked = ["compiler"]', "distros.ubuntu-22-04.libstdcxx",
     "unchecked", "names 'compiler', which is not a fact of this table", "compiler"),
    ('source = "packages.ubuntu.com jammy libc6', 'sourc = "packages.ubuntu.com jammy libc6',
     "distros.ubuntu-22-04.glibc", "sourc", "unknown key 'sourc'", "sourc ="),
    ("nvidia_majors = [13]", 'nvidia_majors = ["13"]', "distros.ubuntu-22-04.cuda",
     "nvidia_majors", "expected an array of positive integers", 'nvidia_majors = ["13"]'),
    ('image = "ubuntu22.04"\nimage_since = "13.0"', 'image = ""\nimage_since = "13.0"',
     "distros.ubuntu-22-04.cuda", "image_since", "image and image_since go together",
     'image_since = "13.0"'),
    ("rolling = true\nas_of = 2026-02-11", "rolling = true", "distros.arch", "as_of",
     "a rolling distribution needs as_of", "[distros.arch]"),
    ("released = 2022-04-21", 'released = "2022-04-21"', "distros.ubuntu-22-04", "released",
     "expected a date (YYYY-MM-DD, unquoted), got a string", 'released = "2022-04-21"'),
    ("[distros.ubuntu-22-04]", "[distros.Ubuntu_22]", "distros", "Ubuntu_22",
     "invalid name 'Ubuntu_22'", "[distros.Ubuntu_22]"),
]


@pytest.mark.parametrize(("old", "new", "table", "key", "message", "at"), CASES,
                         ids=[f"{c[2] or 'top'}.{c[3]}:{i}" for i, c in enumerate(CASES)])
def test_a_broken_distributions_file_names_file_line_table_and_key(
        tmp_path: Path, old: str, new: str, table: str, key: str, message: str,
        at: str) -> None:
    path = broken(tmp_path, old, new)
    with pytest.raises(ConfigError) as caught:
        load_distros(path)
    error = caught.value
    assert error.where.file == path
    assert error.where.table == table and error.where.key == key, str(error)
    assert message in error.detail, str(error)
    assert error.where.line == _line_of(path, at), str(error)


def test_broken_toml_and_a_file_that_is_not_there(tmp_path: Path) -> None:
    path = broken(tmp_path, 'arch = "x86-64"', 'arch = "x86-64')
    with pytest.raises(ConfigError) as caught:
        load_distros(path)
    assert "invalid TOML" in str(caught.value) and caught.value.where.line == _line_of(
        path, 'arch = "x86-64')
    with pytest.raises(BadInput, match="no such distributions file"):
        load_distros(tmp_path / "absent.toml")


def test_a_broken_facts_file_given_to_the_command_exits_2(tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    (kit / "kit" / "bin").mkdir(parents=True)
    program = next(p for p in (Path("/bin/true"), Path("/usr/bin/true")) if p.exists())
    shutil.copy2(program, kit / "kit" / "bin" / "true")
    assert is_elf(kit / "kit" / "bin" / "true")
    path = broken(tmp_path, "schema = 1", "schema = 9")
    done = cli(str(kit), "--facts", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{path}:" in done.stderr and "key 'schema': unsupported schema 9" in done.stderr
    assert cli(str(kit)).returncode == 0
