"""verify checks symbol names, not only versions: every strong undefined symbol of the kit's
files must be defined by a library of the program's scope, as LD_BIND_NOW=1 binds it. Each
layout is compiled here and the real loader asked the same question (its trace with LD_WARN and
LD_BIND_NOW lists every symbol it cannot bind, as `ldd -r` does). Then the reader of dynamic
symbols against pyelftools, and the words of the rows: a library not installed, a library of
another build, a kit's own files named by their place in the kit."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tarfile
from pathlib import Path

import pytest

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.elfsymbols import dynamic_symbols_buffer, read_dynamic_symbols
from ninfer_kits.verify.report import ANOTHER_BUILD, MISSING, NOT_INSTALLED, OK, to_json
from test_verify import cli, gcc, in_root, row, validate_schema
from test_verify_exact import APP, kit_with, ld_list, library, mini_root, on_host, run_app
from test_verify_loader import LOADER

from oracles import dynamic_symbols
from tools import ROOT

UNDEFINED = re.compile(r"^undefined symbol: (?P<name>[^,\s]+)(?:, version (?P<version>\S+))?"
                       r"\t\((?P<object>[^)]*)\)$", re.MULTILINE)
CALLS_TWO = "int k(void);\nint k2(void);\nint main(void) { return k() + k2(); }\n"
BOTH = "int k(void) { return 0; }\nint k2(void) { return 0; }\n"
ONLY_K = "int k(void) { return 0; }\n"


def loader_unbound(program: Path) -> set[tuple[str, str]]:
    """(name, version) of every symbol this host's loader cannot bind for `program`: its trace
    mode with LD_WARN and LD_BIND_NOW relocates every object and says so for each."""
    done = subprocess.run(["/usr/bin/env", "-i", "LD_TRACE_LOADED_OBJECTS=1", "LD_WARN=yes",
                           "LD_BIND_NOW=yes", LOADER, str(program)], capture_output=True,
                          text=True, check=False)
    return {(m["name"], m["version"] or "") for m in UNDEFINED.finditer(done.stdout + done.stderr)}


def ours_unbound(report: object) -> set[tuple[str, str]]:
    return {(u.name, u.version) for res in report.resolutions  # type: ignore[attr-defined]
            for u in res.unbound}


def two_function_kit(folder: Path, *, version: str | None, kit_has: str,
                     app: str = CALLS_TWO) -> Path:
    """kit/bin/app linked against a libk.so.1 defining k and k2 (in `version`, or without
    versions); the kit's own kit/lib/libk.so.1 is built from `kit_has`."""
    build = folder / "build"
    library(build, BOTH, version=version)
    (folder / "kit" / "bin").mkdir(parents=True)
    (build / "app.c").write_text(app)
    gcc("app.c", "-L.", "-l:libk.so.1", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib",
        "-o", str(folder / "kit" / "bin" / "app"), cwd=build)
    library(folder / "kit" / "lib", kit_has, version=version)
    shutil.rmtree(build)
    return folder


# --------------------------------------------------------------------------- the check


@pytest.mark.parametrize("version", ["KIT_1", None])
def test_a_function_the_library_lacks_is_named(tmp_path: Path, version: str | None) -> None:
    """The library has the right name and version table but not k2, which the program calls:
    versions alone pass, the loader stops ("symbol lookup error"). verify names the symbol, the
    file that needs it and the libraries searched."""
    kit = two_function_kit(tmp_path, version=version, kit_has=ONLY_K)
    with on_host(kit) as report:
        pass
    program = kit / "kit" / "bin" / "app"
    assert ours_unbound(report) == loader_unbound(program) == {("k2", version or "")}
    assert not report.met and report.exit_code == 4
    named = "k2@KIT_1 of libk.so.1" if version else "k2"
    requirement, found, status, fix = row(report, f"symbol {named}, needed by kit/bin/app")
    assert status == MISSING
    if version:
        assert found.startswith("not defined by libk.so.1 at kit/lib nor by any other library")
        assert "the kit's own kit/lib/libk.so.1 lacks symbol k2@KIT_1" in fix, fix
    assert "searched kit/bin/app, /lib64/ld-linux-x86-64.so.2, kit/lib/libk.so.1, " in found
    assert str(tmp_path) not in found + fix + requirement
    as_json = to_json(report)
    validate_schema(as_json)
    unbound = as_json["programs"][0]["unbound_symbols"]  # type: ignore[index]
    assert [(u["name"], u["version"], u["needed_by"]) for u in unbound] == [
        ("k2", version or "", "kit/bin/app")]
    assert as_json["programs"][0]["loads"] is False  # type: ignore[index]
    done = run_app(kit)
    assert done.returncode == 127 and "undefined symbol: k2" in done.stderr, done


def test_a_system_library_of_another_build_lacks_a_function(tmp_path: Path) -> None:
    """The target's libk.so.1 has the right version table but not k2: another build than the
    one the kit was linked against. The row names it where it is in the target."""
    kit = tmp_path / "kit"
    build = tmp_path / "build"
    library(build, BOTH, version="KIT_1")
    (kit / "kit" / "bin").mkdir(parents=True)
    (build / "app.c").write_text(CALLS_TWO)
    gcc("app.c", "-L.", "-l:libk.so.1", "-o", str(kit / "kit" / "bin" / "app"), cwd=build)
    root = mini_root(tmp_path / "root")
    library(root / "lib" / "x86_64-linux-gnu", ONLY_K, version="KIT_1")
    with in_root(kit, root) as report:
        done = subprocess.run([shutil.which("chroot") or "chroot", str(root),
                               "/opt/ninfer-kit/kit/bin/app"], capture_output=True, text=True,
                              check=False)
    assert done.returncode == 127, done
    assert "symbol lookup error" in done.stderr and "undefined symbol: k2, version KIT_1" in \
        done.stderr, done.stderr
    assert ours_unbound(report) == {("k2", "KIT_1")}
    _, found, status, fix = row(report, "symbol k2@KIT_1 of libk.so.1, needed by kit/bin/app")
    assert status == MISSING
    assert found.startswith("not defined by libk.so.1 at /lib/x86_64-linux-gnu nor by any "
                            "other library the program loads (searched kit/bin/app, "), found
    assert fix.startswith("the kit was linked against a build of libk.so.1 that defines symbol "
                          "k2@KIT_1, and "), fix


def test_a_symbol_another_library_of_the_scope_defines_binds(tmp_path: Path) -> None:
    """Unversioned, k2 may come from any library of the global scope: here libj.so.1, which
    libk.so.1 needs (a dependency of a dependency), defines it. The program runs."""
    kit = two_function_kit(tmp_path, version=None, kit_has=ONLY_K)
    lib = kit / "kit" / "lib"
    library(lib, "int k2(void) { return 0; }\n", soname="libj.so.1")
    (lib / "libk.so.1").unlink()
    library(lib, ONLY_K, extra=("-L.", "-Wl,--no-as-needed", "-l:libj.so.1",
                                "-Wl,--enable-new-dtags,-rpath,$ORIGIN"))
    with on_host(kit) as report:
        pass
    assert ours_unbound(report) == loader_unbound(kit / "kit" / "bin" / "app") == set()
    assert report.met, report.rows
    assert run_app(kit).returncode == 0


def test_a_weak_reference_may_stay_unbound(tmp_path: Path) -> None:
    weak = ("int k(void);\nextern int k2(void) __attribute__((weak));\n"
            "int main(void) { return k() + (k2 ? k2() : 0); }\n")
    kit = two_function_kit(tmp_path, version="KIT_1", kit_has=ONLY_K, app=weak)
    with on_host(kit) as report:
        pass
    assert ours_unbound(report) == loader_unbound(kit / "kit" / "bin" / "app") == set()
    assert report.met and run_app(kit).returncode == 0


def test_a_kit_library_needs_what_the_program_defines(tmp_path: Path) -> None:
    """A kit library's undefined symbols are checked too; the program's own exported
    definitions (-rdynamic) are in the scope, first."""
    build = tmp_path / "build"
    lib = tmp_path / "kit" / "lib"
    library(lib, "int app_hook(void);\nint missing_too(void);\n"
                 "int k(void) { return app_hook() + missing_too(); }\n")
    (tmp_path / "kit" / "bin").mkdir(parents=True)
    build.mkdir()
    (build / "app.c").write_text(APP + "int app_hook(void) { return 0; }\n")
    gcc("app.c", "-L", str(lib), "-l:libk.so.1", "-rdynamic", "-Wl,--allow-shlib-undefined",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib", "-o",
        str(tmp_path / "kit" / "bin" / "app"), cwd=build)
    with on_host(tmp_path) as report:
        pass
    assert ours_unbound(report) == loader_unbound(tmp_path / "kit" / "bin" / "app") == {
        ("missing_too", "")}
    _, _, status, _ = row(report, "symbol missing_too, needed by kit/lib/libk.so.1")
    assert status == MISSING


# --------------------------------------------------------------------------- the reader


def _hidden_version_library(folder: Path) -> Path:
    """k@KIT_1 (hidden: not the default) and k@@KIT_2, and an unversioned-default global."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "h.c").write_text(
        "int k_old(void) { return 1; }\nint k_new(void) { return 2; }\n"
        "__asm__(\".symver k_old,k@KIT_1\");\n__asm__(\".symver k_new,k@@KIT_2\");\n"
        "__thread int tls_value;\n")
    (folder / "h.map").write_text("KIT_1 { global: k; tls_value; };\nKIT_2 { global: k; } "
                                  "KIT_1;\n")
    gcc("-shared", "-fPIC", "-Wl,--version-script=h.map", "-Wl,-soname,libh.so.1", "h.c",
        "-o", "libh.so.1", cwd=folder)
    return folder / "libh.so.1"


def _reader_cases(tmp_path: Path) -> list[Path]:
    host = [Path(p) for p in ("/lib/x86_64-linux-gnu/libc.so.6", LOADER, "/usr/bin/ls",
                              "/usr/lib/x86_64-linux-gnu/libstdc++.so.6")]
    made = [_hidden_version_library(tmp_path / "hidden")]
    for style in ("sysv", "gnu", "both"):
        made.append(library(tmp_path / style, BOTH, version="KIT_1", soname=f"lib{style}.so.1",
                            extra=(f"-Wl,--hash-style={style}",)))
    (tmp_path / "m32").mkdir()
    (tmp_path / "m32" / "k.c").write_text(BOTH)
    gcc("-m32", "-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libm32.so.1", "k.c", "-o",
        "libm32.so.1", cwd=tmp_path / "m32")
    made.append(tmp_path / "m32" / "libm32.so.1")
    return [*host, *made]


def test_the_reader_agrees_with_pyelftools(tmp_path: Path) -> None:
    """Defined names with their versions and strong references, for glibc's libc and loader,
    a program, libstdc++, a library with a hidden (non-default) version and TLS, one of each
    hash style (DT_HASH alone, DT_GNU_HASH alone, both) and a 32-bit one."""
    for path in _reader_cases(tmp_path):
        ours = read_dynamic_symbols(path)
        theirs = dynamic_symbols(path)
        assert {n: {d.version for d in ds} for n, ds in ours.defined.items()} == \
            theirs.defined, path
        assert {(r.name, r.version) for r in ours.needed} == theirs.needed, path
        fresh = read_dynamic_symbols(path)  # through its hash table, before any full read
        for name, versions in theirs.defined.items():
            assert {d.version for d in fresh.lookup(name)} == versions, (path, name)
        assert fresh.lookup("ninfer_kits_defines_no_such_symbol") == ()
    hidden = read_dynamic_symbols(tmp_path / "hidden" / "libh.so.1").defined["k"]
    assert {(d.version, d.hidden) for d in hidden} == {("KIT_1", True), ("KIT_2", False)}


def test_the_reader_reads_what_the_loader_reads_without_section_headers(
        tmp_path: Path) -> None:
    """e_shoff = 0: the program headers alone, as the loader; the same answer."""
    original = read_dynamic_symbols(Path("/usr/bin/ls"))
    data = bytearray(Path("/usr/bin/ls").read_bytes())
    struct.pack_into("<QHHH", data, 0x28, 0, 0, 0, 0)  # e_shoff; and shentsize, shnum, shstrndx
    struct.pack_into("<H", data, 0x3A, 0)
    struct.pack_into("<HH", data, 0x3C, 0, 0)
    stripped = dynamic_symbols_buffer(bytes(data), "ls")
    assert stripped.defined == original.defined and stripped.needed == original.needed
    assert stripped.lookup("optarg") == original.lookup("optarg") != ()


@pytest.mark.parametrize("damage", ["symbol count", "names", "gnu chain"])
def test_a_hostile_symbol_table_is_one_clear_error(tmp_path: Path, damage: str) -> None:
    """Counts and offsets the file states are checked against its segments first."""
    path = library(tmp_path / "lib", BOTH, version="KIT_1",
                   extra=("-Wl,--hash-style=sysv",) if damage == "symbol count" else ())
    data = bytearray(path.read_bytes())
    text = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True,
                          check=True).stdout
    # [Nr] Name Type Address Off Size: where each section is in the file
    offsets, sizes = {}, {}
    for match in re.finditer(r"\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)\s",
                             text):
        offsets[match[1]], sizes[match[1]] = int(match[2], 16), int(match[3], 16)
    if damage == "symbol count":
        struct.pack_into("<I", data, offsets[".hash"] + 4, 0x7FFFFFFF)
    elif damage == "names":
        dynsym = offsets[".dynsym"]
        for index in range(1, sizes[".dynsym"] // 24):
            struct.pack_into("<I", data, dynsym + 24 * index, 0x7FFFFFF0)
    else:
        at = offsets[".gnu.hash"]
        buckets, _symoffset, bloom, _shift = struct.unpack_from("<IIII", data, at)
        chains = at + 16 + 8 * bloom + 4 * buckets
        end = len(data)
        for position in range(chains, min(end, chains + 4096), 4):
            struct.pack_into("<I", data, position, 0)  # no chain ever ends
    with pytest.raises(NotAnElf, match=r"^bad: corrupt or truncated ELF file \(") as raised:
        symbols = dynamic_symbols_buffer(bytes(data), "bad")  # read, then used
        for name in ("k", "k2", "absent"):
            symbols.lookup(name)
        assert (symbols.needed, symbols.defined) == ((), {})  # never reached
    assert {"symbol count": "dynamic symbol table", "names": "symbol name",
            "gnu chain": "DT_GNU_HASH chain"}[damage] in str(raised.value), raised.value


# --------------------------------------------------------------------------- the words


def _stub(folder: Path, soname: str, version: str, source: str = ONLY_K) -> Path:
    return library(folder, source, version=version, soname=soname)


def test_a_library_not_installed_is_not_blamed_on_the_cuda_runpath(tmp_path: Path) -> None:
    """The kit's RUNPATH names the build machine's toolkit, absent in the root: the CUDA
    runtime's row may say so, FFmpeg's may not — it is simply not installed there."""
    build = tmp_path / "build"
    _stub(build, "libcudart.so.13", "libcudart.so.13")
    _stub(build, "libavformat.so.59", "LIBAVFORMAT_59", "int avformat_version(void) "
          "{ return 59; }\n")
    kit = tmp_path / "kit"
    (kit / "kit" / "bin").mkdir(parents=True)
    (build / "app.c").write_text("int k(void);\nint avformat_version(void);\n"
                                 "int main(void) { return k() + avformat_version(); }\n")
    gcc("app.c", "-L.", "-l:libcudart.so.13", "-l:libavformat.so.59",
        "-Wl,--enable-new-dtags,-rpath,/usr/local/cuda-13.0/lib", "-o",
        str(kit / "kit" / "bin" / "app"), cwd=build)
    root = mini_root(tmp_path / "root")
    with in_root(kit, root) as report:
        done = ld_list(root, "/opt/ninfer-kit/kit/bin/app")
    assert done.returncode == 127 and "libcudart.so.13: cannot open" in done.stderr, done
    _, found, status, _ = row(report, "libavformat.so.59")
    assert status == MISSING
    assert found == ("not found: not installed here (not in ld.so.cache nor in the system "
                     "folders)"), found
    assert "RUNPATH" not in found
    _, found, status, _ = row(report, "CUDA 13 runtime — libcudart.so.13")
    assert status == MISSING and found.startswith("not found: not installed here")
    assert found.endswith("; the kit's RUNPATH /usr/local/cuda-13.0/lib does not exist here "
                          "either"), found


def test_a_library_of_another_build_is_not_too_old(tmp_path: Path) -> None:
    """libcurl.so.4 built with GnuTLS defines CURL_GNUTLS_3; the kit was linked against one
    built with OpenSSL (CURL_OPENSSL_4): a newer GnuTLS build would not help."""
    build = tmp_path / "build"
    _stub(build, "libcurl.so.4", "CURL_OPENSSL_4", "int curl_easy_init(void) { return 0; }\n")
    kit = tmp_path / "kit"
    (kit / "kit" / "bin").mkdir(parents=True)
    (build / "app.c").write_text("int curl_easy_init(void);\n"
                                 "int main(void) { return curl_easy_init(); }\n")
    gcc("app.c", "-L.", "-l:libcurl.so.4", "-o", str(kit / "kit" / "bin" / "app"), cwd=build)
    root = mini_root(tmp_path / "root")
    _stub(root / "lib" / "x86_64-linux-gnu", "libcurl.so.4", "CURL_GNUTLS_3",
          "int curl_easy_init(void) { return 0; }\n")
    with in_root(kit, root) as report:
        done = ld_list(root, "/opt/ninfer-kit/kit/bin/app")
    assert "version `CURL_OPENSSL_4' not found" in done.stderr, done
    _, found, status, fix = row(report, "libcurl.so.4 providing CURL_OPENSSL_4")
    assert status == ANOTHER_BUILD, (found, status)
    assert found == ("another build of libcurl.so.4 at /lib/x86_64-linux-gnu: it provides "
                     "CURL_GNUTLS_3, not CURL_OPENSSL_4"), found
    assert "older" not in fix and "a build of libcurl.so.4 that provides CURL_OPENSSL_4" in fix
    assert not report.met and report.exit_code == 4
    validate_schema(to_json(report))


def test_a_hand_made_kits_rows_name_its_files_in_the_kit(tmp_path: Path) -> None:
    """In a root the kit is looked at as if at /opt/ninfer-kit; from an archive it is read in
    a private folder that is gone once verify ends: neither is where the kit is. Its files are
    named by their place in the kit, as its programs are."""
    kit = kit_with(tmp_path / "made", link_version="KIT_2")
    library(kit / "kit" / "lib", "int k(void) { return 0; }\n", version="KIT_1")
    archive = tmp_path / "made.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(kit / "kit", "kit")
    root = mini_root(tmp_path / "root")
    for args in ((str(kit),), (str(kit), "--root", str(root)), (str(archive),)):
        done = cli(*args)
        assert done.returncode == 4, done.stdout + done.stderr
        line = next(x for x in done.stdout.splitlines() if "libk.so.1 providing KIT_2" in x)
        assert "libk.so.1 at kit/lib provides up to KIT_1" in line and ANOTHER_BUILD in line
        assert "/opt/ninfer-kit" not in done.stdout and "ninfer-kits-verify-" not in done.stdout
        assert "the kit's own kit/lib/libk.so.1 lacks the version KIT_2" in done.stdout
        assert "Debian" not in line


def test_a_found_kit_library_is_named_in_the_kit(tmp_path: Path) -> None:
    kit = two_function_kit(tmp_path / "k", version="KIT_1", kit_has=BOTH)
    root = mini_root(tmp_path / "root")
    with in_root(kit, root) as report:
        pass
    assert report.met, report.rows
    assert all("/opt/ninfer-kit" not in r.found for r in report.rows), report.rows
    assert row(report, "x86-64 Linux")[2] == OK


# --------------------------------------------------------------------------- the page

PAGE = ROOT / "docs" / "verify.md"


def page_text() -> str:
    """docs/verify.md with its lines joined: a quotation may wrap."""
    return " ".join(PAGE.read_text(encoding="utf-8").split())


def test_the_page_quotes_the_words_verify_prints(tmp_path: Path) -> None:
    """The words docs/verify.md quotes are the rows' own: not installed, another build, no
    version table (the one choice stricter than the loader), the symbol check's JSON key."""
    kit = kit_with(tmp_path, link_version="KIT_1")
    library(kit / "kit" / "lib", "int k(void) { return 0; }\n")  # no version table at all
    with on_host(kit) as report:
        pass
    found = row(report, "libk.so.1 providing KIT_1")[1]
    no_table = found.split(" has no symbol version table", 1)[1]
    text = page_text()
    assert "has no symbol version table" + no_table in text, no_table
    assert NOT_INSTALLED in text and f'"{ANOTHER_BUILD}"' in text
    assert "`unbound_symbols`" in text
    schema = (ROOT / "src" / "ninfer_kits" / "data" / "verify.schema.json").read_text()
    assert '"unbound_symbols"' in schema and f'"{ANOTHER_BUILD}"' in schema
    assert "test_without_a_version_table_the_loader_stops" in text


def test_the_page_names_the_docker_built_examples_ffmpeg() -> None:
    """`--builder docker` builds the example in its toolchain, trixie-cuda130 (Debian 13):
    the FFmpeg sonames the page names for that kit are Debian 13's."""
    from ninfer_kits.matrix.load import load_matrix
    from ninfer_kits.platforms.distros import shipped_distros

    matrix = load_matrix(ROOT / "matrix.toml")
    toolchain = matrix.kit("example").toolchain.id
    assert toolchain == "trixie-cuda130"
    trixie = next(d for d in shipped_distros().distros if d.codename == "trixie")
    sentence = page_text().split(f"`{toolchain}` (Debian 13)", 1)[1].split(" glibc ", 1)[0]
    assert trixie.ffmpeg.version.startswith("7.1") and "FFmpeg 7.1" in sentence, sentence
    for soname in trixie.ffmpeg.sonames:
        if soname.split(".so")[0] in ("libavformat", "libavcodec", "libavutil", "libswscale"):
            assert f"`{soname}`" in sentence, (soname, sentence)


@pytest.mark.slow
def test_the_page_describes_the_example_kit_as_the_local_builder_makes_it(
        example_dist: Path) -> None:
    """The sonames and glibc floor the page gives for `ninfer-kits build example` here (the
    local builder on Debian 12) are the built kit's own, from its BUILDINFO.txt."""
    info = (example_dist / "BUILDINFO.txt").read_text()
    sonames = re.search(r"^sonames: (.*)$", info, re.MULTILINE)[1].split(", ")  # type: ignore[index]
    floor = re.search(r"^glibc_floor: (.*)$", info, re.MULTILINE)[1]  # type: ignore[index]
    release = (Path("/etc/os-release").read_text())
    assert 'VERSION_ID="12"' in release  # the page's words are for Debian 12's local builder
    sentence = page_text().split("on Debian 12 (this project's machines)", 1)[1].split(
        "`ninfer-kits build example --builder docker`", 1)[0]
    ffmpeg = [s for s in sonames if s.startswith(("libavformat", "libavcodec", "libavutil",
                                                  "libswscale"))]
    assert len(ffmpeg) == 4 and all(f"`{s}`" in sentence for s in ffmpeg), (ffmpeg, sentence)
    assert f"glibc ≥ {floor}" in sentence, (floor, sentence)


def _page_rows(command: str) -> list[tuple[str, str, str]]:
    block = PAGE.read_text(encoding="utf-8").split(f"$ {command}\n", 1)[1].split("```", 1)[0]
    return _table_rows(block)


def _table_rows(text: str) -> list[tuple[str, str, str]]:
    rows = []
    for line in text.splitlines():
        cells = [" ".join(c.split()) for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and cells[0] != "Requirement":
            rows.append((cells[0], cells[1], cells[2]))
    return rows


@pytest.mark.slow
def test_the_pages_example_table_is_what_verify_prints(
        example_dist: Path, roots: dict[str, Path]) -> None:
    """The table docs/verify.md shows for the example kit in a Debian 13 root, row by row."""
    done = cli(str(example_dist), "--root", str(roots["trixie"]))
    assert done.returncode == 4, done.stderr
    shown = _page_rows("ninfer-kits verify dist/example-v0.3.0-linux-sm86 --root "
                       "/srv/roots/trixie")
    assert shown and _table_rows(done.stdout) == shown, done.stdout


@pytest.mark.slow
def test_the_check_agrees_with_the_loader_on_this_machines_libraries() -> None:
    """Every shared library of /usr/lib/x86_64-linux-gnu that loads here, each checked whole
    (all its own references) and asked of the loader's trace with LD_BIND_NOW: the same unbound
    symbols, none more, none fewer (some of them have some: libthread_db, libtheoraenc, …,
    which the programs using them define). About 10 s."""
    from ninfer_kits.inspector.elf import is_elf
    from ninfer_kits.loader.facts import loader_setup
    from ninfer_kits.loader.resolve import Resolver
    from ninfer_kits.loader.rootfs import RootFS

    resolver = Resolver(loader_setup(RootFS(Path("/"))), check_symbols=lambda path: True)
    cases, with_unbound, disagreements = 0, 0, []
    for path in sorted(Path("/usr/lib/x86_64-linux-gnu").iterdir()):
        if not path.is_file() or path.is_symlink() or not is_elf(path):
            continue
        info = resolver.info(str(path))
        if info is None or not info.needed:
            continue
        resolution = resolver.resolve(str(path))
        if resolution.missing or resolution.gaps or resolution.interpreter_missing:
            continue  # the symbols of what does not load are not the question here
        theirs = loader_unbound(path)
        ours = {(u.name, u.version) for u in resolution.unbound}
        cases += 1
        with_unbound += bool(theirs)
        if ours != theirs:
            disagreements.append(f"{path}: loader only {sorted(theirs - ours)[:5]}, ours only "
                                 f"{sorted(ours - theirs)[:5]}")
    assert cases >= 100 and with_unbound >= 3, (cases, with_unbound)
    assert not disagreements, "\n".join(disagreements[:20])


@pytest.mark.slow
@pytest.mark.parametrize(("source", "target"), [("trixie", "bookworm"), ("bookworm", "trixie")])
def test_the_check_agrees_with_the_loader_across_debian_releases(
        roots: dict[str, Path], proc_mounted: None, source: str, target: str) -> None:
    """Every program and library of one Debian release that loads in the other's root (its
    names and versions all found), every symbol of each checked: the same unbound symbols as
    that root's loader traces with LD_BIND_NOW (seen: 195 and 399 cases, 13 and 5 of them with
    unbound symbols). About 6 s each."""
    from ninfer_kits.loader.facts import loader_setup
    from ninfer_kits.loader.resolve import Resolver
    from ninfer_kits.loader.rootfs import RootFS
    from test_verify_loader import TRACE_ENV, probes

    root = roots[target]
    resolver = Resolver(loader_setup(RootFS(root)), check_symbols=lambda path: True)
    probe = root / "opt" / "probe"
    shutil.rmtree(probe, ignore_errors=True)
    probe.mkdir(parents=True)
    cases, with_unbound, disagreements = 0, 0, []
    try:
        for index, path in enumerate(probes(roots[source])):
            name = f"/opt/probe/{index:04d}-{path.name}"
            shutil.copy2(path, root / name.lstrip("/"))
            info = resolver.info(name)
            if info is None or (not info.needed and info.interpreter is None):
                continue
            resolution = resolver.resolve(name)
            if resolution.missing or resolution.gaps or resolution.interpreter_missing:
                continue
            done = subprocess.run([shutil.which("chroot") or "chroot", str(root),
                                   "/usr/bin/env", "-i", *TRACE_ENV, LOADER, name],
                                  capture_output=True, text=True, check=False)
            theirs = {(m["name"], m["version"] or "")
                      for m in UNDEFINED.finditer(done.stdout + done.stderr)}
            ours = {(u.name, u.version) for u in resolution.unbound}
            cases += 1
            with_unbound += bool(theirs)
            if ours != theirs:
                disagreements.append(f"{path.name}: loader only {sorted(theirs - ours)[:4]}, "
                                     f"ours only {sorted(ours - theirs)[:4]}")
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    assert cases >= 100 and with_unbound >= 3, (cases, with_unbound)
    assert not disagreements, "\n".join(disagreements[:20])
