#!/usr/bin/env python3
"""The build recipe: configure and compile one upstream tree for one CUDA arch.

Runs unchanged on the host (the local builder) and inside a toolchain container (the docker
builder), so it depends on nothing but the Python standard library (3.8+), CMake, Ninja and nvcc.

    python3 build/recipe.py --source SRC --build-dir BUILD --out OUT --arch 86 \
        --target ninfer=apps/ninfer --target ninfer-serve=apps/ninfer-serve \
        [--jobs N] [--cmake-option KEY=VALUE ...]

It writes OUT/kit/bin/<target> for every target and OUT/recipe.json, its report: what BUILDINFO
needs (tool versions, flags, job count, compile time), read back by
ninfer_kits.pipeline.recipe_report (REPORT_SCHEMA is the version both sides agree on). The log
goes to stdout, Ninja's `[n/m]` status included. Exit status: 0 done, 2 bad arguments, 3 a tool
is missing or does not answer, 4 configure failed, 5 compile failed, 6 a target was not produced,
7 the source could not be copied into the build tree.

Reproducibility policy (same tree + same toolchain → same bytes, whatever the folders or job count):
- nvcc `-objtemp`: temporaries are named after the object file, not nvcc's process id;
- nvcc `-Xcudafe --orig_src_path_name=<fixed>`: nvcc names each .cu module (and every kernel in
  an anonymous namespace) from a hash of the source's absolute path; a fixed name keeps that hash
  independent of the folder, while the file name and content still tell files apart;
- `-ffile-prefix-map` for the source and build folders, for host code and through nvcc;
- no timestamps: SOURCE_DATE_EPOCH is passed through for __DATE__/__TIME__, LC_ALL=C, TZ=UTC;
- build-id: `--build-id=sha1`, a hash of the linked content, so it is as reproducible as the rest;
- `-frandom-seed=<the source's path relative to the source root>` on every compile, added by this
  script acting as the compiler launcher (`recipe.py --compile-launcher`, set as
  CMAKE_<LANG>_COMPILER_LAUNCHER): with relocatable device code (`-rdc`, CUDA separable
  compilation) cudafe otherwise draws the internal namespace names of header intrinsics from a
  per-process number, and those names land in the shipped cubins. nvcc asks for a different seed
  per file; the relative path is one, and it does not depend on the folder the build runs in;
- relative paths on every compile line (the launcher rewrites the source and build folders):
  `-lineinfo` records source paths in the device code, beyond the reach of any prefix map, and
  nvcc's device compiler makes them absolute with the working folder it finds in $PWD, which the
  launcher sets to /proc/self/cwd.

Kept build tree (--source-from): the docker builder keeps each kit's build folder in a volume
and hands the source over in a separate folder; the recipe copies into --source only the files
whose content, mode or link target changed. Every file must end with the time the export gave it
(one fixed time): nvcc -lineinfo writes each source file's mtime into the device code (the
cubin's line table), so a file stamped "now" would make the kit differ from a fresh build's. Ninja
decides by mtime, so the changed files first get the current time, a dry run of Ninja names the
outputs they make stale (`-d explain`), those outputs are deleted, and only then do the files get
their own times back: a deleted output is rebuilt even if this build fails and the next one sees
no change. The build folder is kept only while the configure's inputs are unchanged (the
options, the CMake that runs, every CMake file of the source): otherwise it is emptied first,
because cached values (an `option()` default, a removed -D) would outlive the change. One build
holds a tree at a time (a lock file beside it).

Compiler cache (--ccache): C++20 targets on CMake >= 3.28 get module-scanning flags that ccache
refuses (`-fmodules-ts`), so CMAKE_CXX_SCAN_FOR_MODULES is OFF unless the source uses C++20
modules. The launcher counts every compile call, so calls ccache could not cache are reported
(`ccache_uncacheable`) beside its hits and misses.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# Kits ship the binaries of the build tree, whose default RUNPATH CMake pads with empty entries
# (room for `cmake --install` to rewrite it) — and the loader reads an empty entry as the current
# directory. The install RPATH made of the link directories (the CUDA toolkit's lib) has neither.
KIT_RPATH = {"CMAKE_BUILD_WITH_INSTALL_RPATH": "ON", "CMAKE_INSTALL_RPATH_USE_LINK_PATH": "ON"}
EXIT_BAD_ARGS, EXIT_TOOL, EXIT_CONFIGURE, EXIT_COMPILE, EXIT_TARGET = 2, 3, 4, 5, 6
EXIT_SOURCE = 7  # the source could not be copied into the build tree (--source-from)
LAUNCHER_FLAG = "--compile-launcher"
COMPILE_CALLS = ".ninfer-kits-compile-calls"  # one line per compile call, in the build folder
CONFIGURE_KEY = ".ninfer-kits-configure-key"  # what the kept CMakeCache.txt was configured from
TREE_LOCK = ".ninfer-kits-tree.lock"  # beside the build folder: one build per kept tree
CMAKE_INPUTS = re.compile(r"(^|/)(CMakeLists\.txt|CMakePresets\.json|CMakeUserPresets\.json|"
                          r"[^/]*\.cmake(\.in)?)$")
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c++", ".c")
MODULE_SUFFIXES = (".cppm", ".ixx", ".mpp", ".cxxm", ".c++m", ".ccm")
MODULE_DECLARATION = re.compile(rb"^[ \t]*(?:export[ \t]+)?(?:module|import)[ \t]+[A-Za-z_:<\"]",
                                re.MULTILINE)
GIB = 1 << 30
DEPS_FILE = "ninja-deps.txt"  # ninfer_kits.inspector.compiled_in.DEPS_FILE
# Its first two lines (ninfer_kits.inspector.compiled_in reads them): where relative paths are
# relative to, and the upstream's own files.
DEPS_BUILD, DEPS_SOURCE = "# build folder: ", "# source folder: "
REPORT_SCHEMA = 1  # ninfer_kits.pipeline.recipe_report.SCHEMA
PROBE_TIMEOUT = 60  # seconds for `tool --version` and ccache's statistics: a hung tool fails
MEMORY_PER_JOB = 2 * GIB  # nvcc on the upstreams' larger kernels peaks near 2 GiB per job


class RecipeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Configure and compile one tree for one arch.")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--arch", required=True, help="CMake form: 86, 89, 120a")
    parser.add_argument("--jobs", type=int, default=0, help="0: choose from cores and memory")
    parser.add_argument("--target", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--cmake-option", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--nvcc", default="", help="the CUDA compiler (default: $CUDACXX, "
                        "/usr/local/cuda/bin/nvcc, then PATH)")
    parser.add_argument("--source-from", type=Path, default=None, metavar="DIR",
                        help="copy DIR into --source first, rewriting only the files that "
                             "changed (a kept build tree then rebuilds only what changed)")
    parser.add_argument("--ccache", action="store_true",
                        help="compile through ccache (cache in $CCACHE_DIR) and report its stats")
    return parser.parse_args(argv)


def pairs(values: list[str], what: str) -> list[tuple[str, str]]:
    result = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise RecipeError(EXIT_BAD_ARGS, f"{what} must look like KEY=VALUE, got {value!r}")
        result.append((key, rest))
    return result


def find_tool(name: str, explicit: str = "") -> str:
    candidates = [explicit] if explicit else []
    if name == "nvcc":
        candidates += [os.environ.get("CUDACXX", ""), "/usr/local/cuda/bin/nvcc"]
    candidates.append(shutil.which(name) or "")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    hint = {"nvcc": "the CUDA toolkit (nvcc)", "cmake": "cmake (apt install cmake)",
            "ninja": "ninja (apt install ninja-build)"}[name]
    raise RecipeError(EXIT_TOOL, f"{name} not found: install {hint}")


def probe(command: list[str]) -> str:
    """A quick question to a tool (its version, its statistics): its stdout, or an error when it
    does not answer in PROBE_TIMEOUT seconds."""
    try:
        return subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=PROBE_TIMEOUT).stdout
    except subprocess.TimeoutExpired:
        raise RecipeError(EXIT_TOOL, f"{' '.join(command)} did not answer in {PROBE_TIMEOUT} s"
                          ) from None


def tool_version(command: list[str], pattern: str) -> str:
    output = probe(command)
    match = re.search(pattern, output)
    return match.group(1) if match else "unknown"


def choose_jobs(requested: int) -> int:
    if requested > 0:
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    available = GIB * 4
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        pass
    return max(1, min(cores or 1, available // MEMORY_PER_JOB))


# nvcc compresses the device code harder, SASS too (its default compresses PTX only): the
# example's ninfer 2.67 -> 0.72 MB and its tarball 21% smaller, with no slower start on an H200
# (scripts/startup-check.sh, build/README.md). Readers: inspector/payload.py (zstd).
SIZE_FLAGS = {"CMAKE_CUDA_FLAGS": "--compress-mode=size"}


def deterministic_flags(source: Path, build: Path) -> dict[str, str]:
    maps = [f"-ffile-prefix-map={source}=.", f"-ffile-prefix-map={build}=."]
    host = " ".join(maps)
    return {
        "CMAKE_C_FLAGS": host,
        "CMAKE_CXX_FLAGS": host,
        "CMAKE_CUDA_FLAGS": "-objtemp -Xcudafe --orig_src_path_name=ninfer-kits "
                            + " ".join(f"-Xcompiler={m}" for m in maps),
        "CMAKE_EXE_LINKER_FLAGS": "-Wl,--build-id=sha1",
        "CMAKE_SHARED_LINKER_FLAGS": "-Wl,--build-id=sha1",
    }


def run_streaming(command: list[str], env: dict[str, str], cwd: Path | None = None) -> int:
    print("+ " + " ".join(command), flush=True)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, cwd=cwd, text=True, errors="replace", bufsize=1)
    assert process.stdout is not None
    for line in process.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
    return process.wait()


def build_env() -> dict[str, str]:
    env = dict(os.environ, LC_ALL="C", TZ="UTC", NINJA_STATUS="[%f/%t] ")
    env.pop("MAKEFLAGS", None)
    return env


def compiler_ids(build: Path) -> dict[str, str]:
    """CMake's compiler id and version for C++ and CUDA, as it found them while configuring."""
    found = {}
    for language in ("CXX", "CUDA"):
        for path in sorted(build.glob(f"CMakeFiles/*/CMake{language}Compiler.cmake")):
            text = path.read_text(errors="replace")
            for field in ("COMPILER_ID", "COMPILER_VERSION"):
                match = re.search(rf'set\(CMAKE_{language}_{field} "([^"]*)"\)', text)
                if match:
                    found[f"{language.lower()}_{field.lower()}"] = match.group(1)
    return found


def ccache_path() -> str:
    ccache = shutil.which("ccache")
    if ccache is None:
        raise RecipeError(EXIT_TOOL, "ccache not found: install ccache or build without --ccache")
    return ccache


def compile_calls(build: Path) -> int:
    try:
        with open(build / COMPILE_CALLS, encoding="utf-8") as calls:
            return sum(1 for _ in calls)
    except FileNotFoundError:
        return 0


def ccache_counters() -> dict[str, int]:
    """ccache's counters as they stand (`--print-stats`: a few ms; zeroing them takes 50 ms and
    would clobber another build's counts in the same cache)."""
    counters: dict[str, int] = {}
    for line in probe([ccache_path(), "--print-stats"]).splitlines():
        key, _, value = line.partition("\t")
        if value.strip().isdigit():
            counters[key] = int(value)
    return counters


def ccache_stats(before: dict[str, int] | None, calls: int) -> dict[str, object]:
    """Hits and misses of this build (the counters now, less `before`), and the compile calls
    ccache could not cache at all: every call the launcher saw that was neither."""
    if before is None:
        return {}
    after = ccache_counters()

    def grew(key: str) -> int:
        return after.get(key, 0) - before.get(key, 0)

    hits = grew("direct_cache_hit") + grew("preprocessed_cache_hit")
    misses = grew("cache_miss")
    rate = f"{100 * hits / calls:.1f}%" if calls else "n/a (no compile calls)"
    return {"ccache_calls": calls, "ccache_hits": hits, "ccache_misses": misses,
            "ccache_uncacheable": max(0, calls - hits - misses), "ccache_hit_rate": rate}


def launch_compiler(argv: list[str]) -> int:
    """`recipe.py --compile-launcher SOURCE_ROOT BUILD_ROOT [ccache] -- COMPILER ARGS...`: run one
    compile with a per-file -frandom-seed, through ccache when named, and count the call."""
    separator = argv.index("--")
    roots, command = argv[:separator], argv[separator + 1:]
    source_root, build_root, *cache = roots
    seed = random_seed(command, Path(source_root), Path(build_root))
    with open(Path(build_root) / COMPILE_CALLS, "a", encoding="utf-8") as calls:
        calls.write(f"{seed}\n")
    full = [*cache, *relative_paths(command, [source_root, build_root]), f"-frandom-seed={seed}"]
    # nvcc's device compiler joins relative paths to the working folder it reads from $PWD
    # (when that names the same folder) before asking the system: /proc/self/cwd is the same
    # folder in every build, so the recorded paths are too.
    return subprocess.call(full, env=dict(os.environ, PWD="/proc/self/cwd"))


def relative_paths(command: list[str], roots: list[str]) -> list[str]:
    """Every mention of the source and build folders, relative to the compile's folder.

    With -lineinfo, nvcc writes the paths of the sources and headers it compiled into the device
    code, and no prefix map reaches there; given relative paths, it writes those. The compile
    runs in the build folder, so they depend only on where the source sits beside it."""
    cwd = os.getcwd()
    patterns = [(re.compile(re.escape(os.path.abspath(root)) + r"(?=/|=|;|$)"),
                 os.path.relpath(root, cwd)) for root in sorted(roots, key=len, reverse=True)]
    rewritten = []
    for argument in command[1:]:
        for pattern, relative in patterns:
            argument = pattern.sub(relative, argument)
        rewritten.append(argument)
    return [command[0], *rewritten]


def random_seed(command: list[str], source_root: Path, build_root: Path) -> str:
    """The compiled file's path relative to the source root (or the build folder, for
    generated sources): different for every file, the same in every folder."""
    source = compiled_source(command)
    if source is None:
        return "none"
    absolute = Path(os.path.abspath(source))
    for root, prefix in ((source_root, ""), (build_root, "build/")):
        try:
            return prefix + absolute.relative_to(os.path.abspath(root)).as_posix()
        except ValueError:
            continue
    return absolute.name


def compiled_source(command: list[str]) -> str | None:
    """The file after -c (CMake's compile rules put it there), else the last source argument."""
    if "-c" in command:
        following = command.index("-c") + 1
        if following < len(command) and command[following].endswith(SOURCE_SUFFIXES):
            return command[following]
    candidates = [arg for arg in command[1:] if arg.endswith(SOURCE_SUFFIXES)
                  and not arg.startswith("-")]
    return candidates[-1] if candidates else None


def uses_cxx_modules(source: Path) -> bool:
    """Whether the tree declares or imports C++20 modules (then CMake must scan for them)."""
    for path in source.rglob("*"):
        if path.suffix in MODULE_SUFFIXES:
            return True
        scanned = path.suffix in (*SOURCE_SUFFIXES, ".h", ".hpp", ".cuh") and path.is_file()
        if scanned and MODULE_DECLARATION.search(path.read_bytes()):
            return True
    return False


def sync_tree(incoming: Path, dest: Path) -> list[str]:
    """Make `dest` hold exactly what `incoming` holds, rewriting only the entries whose content,
    mode, mtime or link target differ (those get the current time until restore_times, the
    rest keep theirs); entries `incoming` lacks are removed. Returns the relative paths it
    wrote or removed."""
    changed = []
    wanted = set()
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        remove(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for folder, folders, files in os.walk(incoming):
        relative_folder = Path(folder).relative_to(incoming)
        for name in sorted(folders + files):
            relative = relative_folder / name
            wanted.add(relative)
            source, target = incoming / relative, dest / relative
            if source.is_dir() and not source.is_symlink():
                if target.is_symlink() or (target.exists() and not target.is_dir()):
                    remove(target)
                if not target.is_dir():
                    target.mkdir()
                    changed.append(relative.as_posix())
            elif not same_entry(source, target):
                replace_entry(source, target)
                changed.append(relative.as_posix())
        folders[:] = [name for name in folders if not (Path(folder) / name).is_symlink()]
    for folder, folders, files in os.walk(dest, topdown=False):
        relative_folder = Path(folder).relative_to(dest)
        for name in folders + files:
            relative = relative_folder / name
            if relative not in wanted:
                remove(dest / relative)
                changed.append(relative.as_posix())
    return sorted(changed)


def restore_times(incoming: Path, dest: Path, changed: list[str]) -> None:
    """The changed entries get the times they have in `incoming` (the export's)."""
    for relative in changed:
        source, target = incoming / relative, dest / relative
        if source.exists() and not source.is_symlink() and target.exists():
            stat = source.stat()
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))


STALE = re.compile(r"^ninja explain: output (.+) older than most recent input (.+) "
                   r"\(-?\d+ vs -?\d+\)$")


def delete_stale_outputs(ninja: str, build: Path, names: list[str], changed: list[Path],
                         env: dict[str, str]) -> list[str]:
    """Delete the outputs Ninja finds older than one of the `changed` files (absolute paths,
    stamped now): a dry run with `-d explain` names them. Returns what it deleted."""
    wanted = {os.path.normpath(path) for path in changed}
    done = subprocess.run([ninja, "-C", str(build), "-n", "-d", "explain", *names],
                          capture_output=True, text=True, errors="replace", env=env,
                          check=False)
    deleted = []
    for line in (done.stderr + done.stdout).splitlines():
        match = STALE.match(line)
        if match and os.path.normpath(build / match.group(2)) in wanted:
            output = build / match.group(1)
            if output.is_file() or output.is_symlink():
                output.unlink()
                deleted.append(match.group(1))
    return deleted


def same_entry(source: Path, target: Path) -> bool:
    """The same link target, or the same content, mode and mtime: nvcc -lineinfo records a
    source file's mtime in the device code, so a file whose time alone differs (a tree an
    interrupted build left, or one an older export stamped otherwise) is rewritten too."""
    if source.is_symlink() or target.is_symlink():
        return (source.is_symlink() and target.is_symlink()
                and os.readlink(source) == os.readlink(target))
    if not target.is_file():
        return False
    a, b = source.stat(), target.stat()
    if (a.st_size, a.st_mode & 0o7777, a.st_mtime_ns) != (b.st_size, b.st_mode & 0o7777,
                                                          b.st_mtime_ns):
        return False
    with open(source, "rb") as one, open(target, "rb") as other:
        while True:
            block = one.read(1 << 20)
            if block != other.read(1 << 20):
                return False
            if not block:
                return True


def replace_entry(source: Path, target: Path) -> None:
    """`target` becomes a copy of `source` in one rename (a file or a symlink)."""
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    partial = target.with_name(f".{target.name}.ninfer-kits-partial")
    if partial.is_symlink() or partial.exists():
        partial.unlink()
    if source.is_symlink():
        os.symlink(os.readlink(source), partial)
    else:
        shutil.copyfile(source, partial)
        os.chmod(partial, source.stat().st_mode & 0o7777)
    os.replace(partial, target)


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def hold_tree(build_dir: Path) -> object:
    """An exclusive lock on the build tree (released when the process ends), waited for when
    another build holds it."""
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    lock = open(build_dir.parent / TREE_LOCK, "a")  # noqa: SIM115 - held until the process ends
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"recipe: waiting for another build of {build_dir}", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def configure_key(defines: list[str], cmake: str, source: Path) -> str:
    """A hash of everything the configure reads besides the source's code: the -D options, the
    CMake that runs, and every CMake file of the source."""
    digest = hashlib.sha256("\0".join([cmake, *defines]).encode())
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if CMAKE_INPUTS.search(relative) and path.is_file():
            digest.update(f"\0{relative}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def keep_or_empty(build: Path, key: str) -> bool:
    """Keep the build folder when it was configured from `key`; else empty it, as a fresh
    configure needs (CMake's own --fresh also drops CMakeFiles/, where the objects are). True
    when kept."""
    recorded = build / CONFIGURE_KEY
    if recorded.is_file() and recorded.read_text().strip() == key:
        return True
    if build.exists():
        shutil.rmtree(build)
    return False


def compiler_launchers(args: argparse.Namespace) -> dict[str, str]:
    launcher = [sys.executable, str(Path(__file__).resolve()), LAUNCHER_FLAG,
                str(args.source.resolve()), str(args.build_dir.resolve()),
                *([ccache_path()] if args.ccache else []), "--"]
    joined = ";".join(launcher)
    return {f"CMAKE_{lang}_COMPILER_LAUNCHER": joined for lang in ("C", "CXX", "CUDA")}


def configure(args: argparse.Namespace, nvcc: str, cmake: str, env: dict[str, str]
              ) -> tuple[list[str], bool]:
    """CMake's configure; the options given (as BUILDINFO records them) and whether the build
    folder was kept from an earlier build."""
    # The upstream's options may override the Release default; the arch is always ours.
    scan = {} if uses_cxx_modules(args.source) else {"CMAKE_CXX_SCAN_FOR_MODULES": "OFF"}
    options = {"CMAKE_BUILD_TYPE": "Release", **KIT_RPATH, **scan,
               **dict(pairs(args.cmake_option, "--cmake-option")),
               "CMAKE_CUDA_ARCHITECTURES": args.arch}
    merged = dict(options, CMAKE_CUDA_COMPILER=nvcc, **compiler_launchers(args))
    for key, value in SIZE_FLAGS.items():  # first: nvcc takes the last, so a given mode wins
        merged[key] = f"{value} {merged[key]}" if key in merged else value
    for key, value in deterministic_flags(args.source.resolve(), args.build_dir.resolve()).items():
        merged[key] = f"{merged[key]} {value}" if key in merged else value
    defines = [f"-D{key}={value}" for key, value in merged.items()]
    cache_key = configure_key(defines, cmake, args.source)
    kept = keep_or_empty(args.build_dir, cache_key)
    print(f"recipe: {'the kept build folder' if kept else 'a fresh build folder'}", flush=True)
    command = [cmake, "-S", str(args.source), "-B", str(args.build_dir), "-G", "Ninja", *defines]
    if run_streaming(command, env) != 0:
        (args.build_dir / CONFIGURE_KEY).unlink(missing_ok=True)
        raise RecipeError(EXIT_CONFIGURE, "cmake configure failed (see the log above)")
    (args.build_dir / CONFIGURE_KEY).write_text(cache_key + "\n")
    return [f"-D{key}={value}" for key, value in options.items()], kept


def prepare_kept_tree(args: argparse.Namespace, ninja: str, env: dict[str, str],
                      targets: list[tuple[str, str]], changed: list[str], kept: bool) -> None:
    """What a kept build folder needs before Ninja runs: the outputs the changed files make
    stale deleted, then the changed files' own times back (see the module's docstring)."""
    if kept and changed:
        names = [name for name, _ in targets]
        stale = delete_stale_outputs(ninja, args.build_dir, names,
                                     [args.source.resolve() / path for path in changed], env)
        print(f"recipe: {len(stale)} outputs made stale by the changed source", flush=True)
    restore_times(args.source_from, args.source, changed)


def compile_targets(args: argparse.Namespace, cmake: str, jobs: int, env: dict[str, str],
                    targets: list[tuple[str, str]]) -> None:
    names = [name for name, _ in targets]
    command = [cmake, "--build", str(args.build_dir), "--target", *names, "--", f"-j{jobs}"]
    if run_streaming(command, env) != 0:
        raise RecipeError(EXIT_COMPILE, "compile failed (see the log above)")


def copy_targets(args: argparse.Namespace, targets: list[tuple[str, str]]) -> None:
    bin_dir = args.out / "kit" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, relative in targets:
        produced = args.build_dir / relative
        if not produced.is_file():
            raise RecipeError(EXIT_TARGET, f"target {name} did not produce {relative}")
        shutil.copyfile(produced, bin_dir / name)
        os.chmod(bin_dir / name, 0o755)


def clear_products(out: Path) -> None:
    """An output folder reused from an earlier build holds none of that build's products."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / "kit").exists():
        shutil.rmtree(out / "kit")
    (out / "recipe.json").unlink(missing_ok=True)
    (out / DEPS_FILE).unlink(missing_ok=True)


def write_deps(ninja: str, build: Path, source: Path, out: Path, env: dict[str, str]) -> None:
    """OUT/ninja-deps.txt: every header each object was compiled from, as the compilers' depfiles
    told Ninja (`ninja -t deps`), run here because only here do its paths mean what they say
    (the container's, for the docker builder). The pipeline reads it for the licences of the
    headers compiled in (ninfer_kits.inspector.compiled_in): the files outside the upstream's
    tree. Every object's list, not only the targets' (a kept tree may hold more): a superset."""
    done = subprocess.run([ninja, "-C", str(build), "-t", "deps"], env=env, check=False,
                          capture_output=True, text=True, errors="surrogateescape")
    if done.returncode != 0:
        raise RecipeError(EXIT_COMPILE, f"ninja -t deps failed: {done.stderr.strip()[-500:]}")
    temporary = out / f".{DEPS_FILE}.tmp"
    head = f"{DEPS_BUILD}{build.resolve()}\n{DEPS_SOURCE}{source.resolve()}\n"
    temporary.write_text(head + done.stdout, encoding="utf-8",
                         errors="surrogateescape")
    temporary.replace(out / DEPS_FILE)


def write_report(out: Path, report: dict[str, object]) -> None:
    temporary = out / ".recipe.json.tmp"
    temporary.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(out / "recipe.json")


def main(argv: list[str]) -> int:
    if argv[:1] == [LAUNCHER_FLAG]:
        return launch_compiler(argv[1:])
    args = parse_args(argv)
    try:
        targets = pairs(args.target, "--target")
        if not targets:
            raise RecipeError(EXIT_BAD_ARGS, "give at least one --target NAME=PATH")
        nvcc, cmake, ninja = find_tool("nvcc", args.nvcc), find_tool("cmake"), find_tool("ninja")
        jobs = choose_jobs(args.jobs)
        env = build_env()
        changed: list[str] | None = None  # unknown: the source was not synced
        if args.source_from is not None:
            tree_lock = hold_tree(args.build_dir)  # noqa: F841 - held while this process runs
            try:
                changed = sync_tree(args.source_from, args.source)
            except OSError as error:
                raise RecipeError(EXIT_SOURCE, f"copying {args.source_from} into {args.source} "
                                  f"failed: {error}") from None
            print(f"recipe: {len(changed)} source entries changed since this tree's last build",
                  flush=True)
        clear_products(args.out)
        counters_before = ccache_counters() if args.ccache else None
        (args.build_dir / COMPILE_CALLS).unlink(missing_ok=True)
        started = time.monotonic()
        options, kept = configure(args, nvcc, cmake, env)
        if changed is not None:
            prepare_kept_tree(args, ninja, env, targets, changed, kept)
        configured = time.monotonic()
        compile_targets(args, cmake, jobs, env, targets)
        copy_targets(args, targets)
        write_deps(ninja, args.build_dir, args.source, args.out, env)
        finished = time.monotonic()
        report: dict[str, object] = {
            "schema": REPORT_SCHEMA,
            "arch": args.arch,
            "jobs": jobs,
            "build_folder": (f"kept ({len(changed)} source entries changed)"
                             if kept and changed is not None else "kept" if kept else "fresh"),
            "configure_seconds": round(configured - started, 1),
            "build_seconds": round(finished - configured, 1),
            "compile_seconds": round(finished - started, 1),
            "cmake_version": tool_version([cmake, "--version"], r"cmake version (\S+)"),
            "ninja_version": tool_version([ninja, "--version"], r"(\S+)"),
            "nvcc_version": tool_version([nvcc, "--version"], r"release \S+ V(\S+)"),
            "cmake_options": options,
            "deterministic_flags": {
                **deterministic_flags(Path("<source>"), Path("<build>")),
                "per_file": "-frandom-seed=<source path relative to the source root>"},
            "targets": [name for name, _ in targets],
            **compiler_ids(args.build_dir),
            **ccache_stats(counters_before, compile_calls(args.build_dir)),
        }
        write_report(args.out, report)
        print(f"recipe: built {', '.join(name for name, _ in targets)} for {args.arch} "
              f"in {report['compile_seconds']} s with {jobs} jobs", flush=True)
        return 0
    except RecipeError as error:
        print(f"recipe: error: {error}", file=sys.stderr, flush=True)
        return error.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
