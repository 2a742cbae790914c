"""The recipe's kept build tree (--source-from): the source is synced by content, so that Ninja
rebuilds only what changed, and the build folder is kept only while the configure's inputs are
unchanged. The docker builder's incremental rebuild against a real engine is in test_docker.py.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tools import ROOT, missing


@pytest.fixture(scope="module")
def recipe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recipe_under_test", ROOT / "build/recipe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_tree(root: Path, files: dict[str, str], mode: int = 0o644) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
    return root


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    """Every entry: its content (or link target) and its mode."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[relative] = ("-> " + os.readlink(path), 0)
        elif path.is_file():
            found[relative] = (path.read_text(), path.stat().st_mode & 0o7777)
        else:
            found[relative] = ("<dir>", 0)
    return found


EXPORTED = 315_532_800  # the one time every exported file carries (pipeline.source)


def stamp(root: Path, when: int = EXPORTED) -> None:
    """Give every file one old time, as the export does (and a rewrite is plain to see)."""
    for path in root.rglob("*"):
        if not path.is_symlink():
            os.utime(path, (when, when))


def test_sync_rewrites_only_what_changed(recipe: ModuleType, tmp_path: Path) -> None:
    files = {"CMakeLists.txt": "project(x)\n", "src/a.cu": "a\n", "src/b.cu": "b\n",
             "src/d.cu": "d\n", "include/c.h": "c\n", "old/gone.cu": "gone\n"}
    dest = make_tree(tmp_path / "dest", files)
    stamp(dest)
    incoming = make_tree(tmp_path / "incoming", {
        **{name: text for name, text in files.items() if not name.startswith("old/")},
        "src/a.cu": "a changed\n", "src/new.cu": "new\n"})
    (incoming / "include/c.h").chmod(0o755)  # a mode change alone is a change
    (incoming / "link.h").symlink_to("include/c.h")
    stamp(incoming)
    # A time change alone is a change: nvcc -lineinfo writes the mtime into the device code.
    os.utime(incoming / "src/d.cu", (EXPORTED + 60, EXPORTED + 60))

    changed = recipe.sync_tree(incoming, dest)

    assert changed == ["include/c.h", "link.h", "old", "old/gone.cu", "src/a.cu", "src/d.cu",
                       "src/new.cu"]
    assert snapshot(dest) == snapshot(incoming)
    for unchanged in ("CMakeLists.txt", "src/b.cu"):
        assert (dest / unchanged).stat().st_mtime == EXPORTED, unchanged
    assert (dest / "src/a.cu").stat().st_mtime > EXPORTED + 60  # "now", until restored
    recipe.restore_times(incoming, dest, changed)
    assert (dest / "src/a.cu").stat().st_mtime == EXPORTED
    assert (dest / "src/d.cu").stat().st_mtime == EXPORTED + 60
    assert recipe.sync_tree(incoming, dest) == []  # a second sync finds nothing to do


def test_sync_replaces_an_entry_whose_kind_changed(recipe: ModuleType, tmp_path: Path) -> None:
    dest = make_tree(tmp_path / "dest", {"x/inner.h": "folder before\n", "y": "file before\n"})
    (dest / "z").symlink_to("y")
    incoming = make_tree(tmp_path / "incoming", {"x": "a file now\n", "y/inner.h": "folder\n",
                                                  "z": "a file, not a link\n"})
    recipe.sync_tree(incoming, dest)
    assert snapshot(dest) == snapshot(incoming)


def test_sync_into_a_missing_folder_copies_everything(recipe: ModuleType, tmp_path: Path) -> None:
    incoming = make_tree(tmp_path / "incoming", {"a": "1\n", "deep/er/b": "2\n"})
    assert recipe.sync_tree(incoming, tmp_path / "new" / "source") == [
        "a", "deep", "deep/er", "deep/er/b"]
    assert snapshot(tmp_path / "new" / "source") == snapshot(incoming)


def test_the_build_folder_is_kept_only_for_the_same_configure(recipe: ModuleType,
                                                               tmp_path: Path) -> None:
    """A changed option, CMake, or CMake file of the source empties the build folder: cached
    values (an option() default, a -D no longer given) would outlive the change."""
    source = make_tree(tmp_path / "source", {"CMakeLists.txt": "option(FAST \"\" OFF)\n",
                                             "cmake/deps.cmake": "# deps\n", "src/k.cu": "k\n"})
    build = tmp_path / "build"
    defines = ["-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CUDA_ARCHITECTURES=86"]
    key = recipe.configure_key(defines, "/usr/bin/cmake", source)
    assert not recipe.keep_or_empty(build, key)  # nothing to keep yet
    build.mkdir()
    (build / "kernel.o").write_text("object")
    (build / recipe.CONFIGURE_KEY).write_text(key + "\n")
    assert recipe.keep_or_empty(build, key) and (build / "kernel.o").is_file()

    (source / "src/k.cu").write_text("k changed\n")  # code is Ninja's business, not configure's
    assert recipe.configure_key(defines, "/usr/bin/cmake", source) == key
    changes = [
        recipe.configure_key([*defines, "-DFOO=1"], "/usr/bin/cmake", source),
        recipe.configure_key(defines, "/opt/cmake-4/bin/cmake", source),
    ]
    (source / "cmake/deps.cmake").write_text("# deps, changed\n")
    changes.append(recipe.configure_key(defines, "/usr/bin/cmake", source))
    (source / "cmake/deps.cmake").write_text("# deps\n")
    (source / "CMakeLists.txt").write_text("option(FAST \"\" ON)\n")
    changes.append(recipe.configure_key(defines, "/usr/bin/cmake", source))
    assert len({key, *changes}) == 5
    assert not recipe.keep_or_empty(build, changes[-1]) and not build.exists()


def test_a_second_build_of_a_tree_waits_for_the_first(recipe: ModuleType, tmp_path: Path) -> None:
    build = tmp_path / "tree" / "cmake"
    held = recipe.hold_tree(build)
    waiter = subprocess.Popen(
        [sys.executable, "-c", "import sys, importlib.util as u; s = u.spec_from_file_location("
         "'r', sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m); "
         "m.hold_tree(__import__('pathlib').Path(sys.argv[2])); print('got it', flush=True)",
         str(ROOT / "build/recipe.py"), str(build)],
        stdout=subprocess.PIPE, text=True)
    assert waiter.stdout is not None
    first = waiter.stdout.readline()
    assert first.startswith("recipe: waiting for another build of"), first
    held.close()
    assert waiter.stdout.readline() == "got it\n"
    assert waiter.wait(timeout=30) == 0


def test_outputs_made_stale_by_a_changed_file_are_deleted(recipe: ModuleType,
                                                          tmp_path: Path) -> None:
    """Ninja itself, in a dry run, names what a changed file makes stale; those outputs go, so
    that they are rebuilt even after the file gets its older time back."""
    ninja = shutil.which("ninja")
    if ninja is None:
        missing("ninja (apt install ninja-build)")
    source = make_tree(tmp_path / "source", {"a.txt": "a\n", "b.txt": "b\n"})
    build = tmp_path / "build"
    build.mkdir()
    (build / "build.ninja").write_text(
        "rule copy\n  command = cp $in $out\n"
        f"build a.out: copy {source}/a.txt\nbuild b.out: copy ../source/b.txt\n"
        "build all: phony a.out b.out\n")
    env = dict(os.environ)
    assert subprocess.run([ninja, "-C", str(build), "all"], capture_output=True).returncode == 0
    later = max((build / name).stat().st_mtime for name in ("a.out", "b.out")) + 5
    for name in ("a.txt", "b.txt"):
        os.utime(source / name, (later, later))  # as the sync stamps a changed file
        assert recipe.delete_stale_outputs(ninja, build, ["all"], [source / name], env) == [
            name.replace(".txt", ".out")]
    assert not (build / "a.out").exists() and not (build / "b.out").exists()
    assert recipe.delete_stale_outputs(ninja, build, ["all"], [source / "a.txt"], env) == []
