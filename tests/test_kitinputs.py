"""ninfer_kits.kitinputs: one hash of everything that makes a kit, part by part; deterministic
and free of this machine's paths; carried by BUILDINFO's `inputs` line (written by the build)
and by the ledger's `inputs` and [input_parts] (copied by publish), and read back."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput
from ninfer_kits.kit import buildinfo
from ninfer_kits.matrix import load_matrix
from ninfer_kits.matrix.inputs import PARTS, cache_key, changed_parts, copied_files, kit_inputs
from ninfer_kits.publish.stores.local import LocalStore
from ninfer_kits.release import ledger
from test_buildinfo_local import _buildinfo
from test_publish_support import (
    TAG,
    Captured,
    compile_program,
    info_for,
    load,
    make_kit,
    matrix_file,
    publish,
)

from tools import ROOT

MATRIX = """
schema = 1

[upstreams.up]
repository = "o/up"
url = "https://github.com/o/up.git"
branch = "main"
archs = ["sm_86", "sm_89"]
min_cuda = "13.0"
licenses = ["LICENSE"]
cmake_options = { CMAKE_BUILD_TYPE = "Release" }
targets = { "ninfer" = "apps/ninfer" }

[toolchains.tc]
dockerfile = "docker/tc.Dockerfile"
base_image = "debian:trixie"
cuda = "13.0.88"
build_args = { CUDA_WHEELS = "13.0" }
runtime_dockerfile = "docker/tc.Dockerfile"
runtime_base_image = "debian:trixie-slim"

[kits.up-sm86]
upstream = "up"
arch = "sm_86"
toolchain = "tc"
card = "RTX 3090"
tag = "up-{arch_id}-{rev8}"
asset = "up-{rev12}-{arch_id}.tar.gz"

[kits.up-sm89]
upstream = "up"
arch = "sm_89"
toolchain = "tc"
card = "RTX 4090"
tag = "up-{arch_id}-{rev8}"
asset = "up-{rev12}-{arch_id}.tar.gz"
"""
DOCKERFILE = ("ARG BASE_IMAGE\nFROM ${BASE_IMAGE} AS build\nCOPY host-ca.crt /etc/ca.crt\n"
              "COPY --chmod=644 setup.sh \\\n  /setup.sh\nFROM build\nCOPY --from=build /a /b\n")
REV = "a" * 40


def project(folder: Path) -> Path:
    (folder / "docker").mkdir(parents=True)
    (folder / "docker" / "tc.Dockerfile").write_text(DOCKERFILE)
    (folder / "docker" / "setup.sh").write_text("echo one\n")
    (folder / "matrix.toml").write_text(MATRIX)
    return folder / "matrix.toml"


def inputs_of(path: Path, kit: str = "up-sm86", revision: str = REV) -> dict[str, str]:
    return dict(kit_inputs(load_matrix(path).kit(kit), revision).parts)


def test_the_same_inputs_in_another_folder_hash_the_same(tmp_path: Path) -> None:
    """Deterministic and free of this machine: a copy of the project elsewhere, read twice,
    gives the same digest; the other arch of the same upstream does not."""
    first, second = project(tmp_path / "one"), project(tmp_path / "elsewhere" / "two")
    one = kit_inputs(load_matrix(first).kit("up-sm86"), REV)
    assert one == kit_inputs(load_matrix(second).kit("up-sm86"), REV)
    assert one.digest.startswith("sha256:") and len(one.digest) == 71
    assert tuple(one.parts) == PARTS
    other = kit_inputs(load_matrix(first).kit("up-sm89"), REV)
    assert changed_parts(dict(other.parts), one) == ("arch", "kit")


@pytest.mark.parametrize(("edit", "parts"), [
    (lambda f: (f / "docker" / "setup.sh").write_text("echo two\n"), ("toolchain", "runtime")),
    (lambda f: (f / "docker" / "tc.Dockerfile").write_text(DOCKERFILE + "RUN true\n"),
     ("toolchain", "runtime")),
    (lambda f: _sub(f, 'cuda = "13.0.88"', 'cuda = "13.0.99"'), ("toolchain",)),
    (lambda f: _sub(f, 'base_image = "debian:trixie"', 'base_image = "debian:sid"'),
     ("toolchain",)),
    (lambda f: _sub(f, '{ CUDA_WHEELS = "13.0" }', '{ CUDA_WHEELS = "13.1" }'), ("toolchain",)),
    (lambda f: _sub(f, 'runtime_base_image = "debian:trixie-slim"',
                    'runtime_base_image = "debian:sid-slim"'), ("runtime",)),
    (lambda f: _sub(f, '"Release" }', '"Release", GGML_X = "ON" }'), ("cmake_options",)),
    (lambda f: _sub(f, 'licenses = ["LICENSE"]', 'licenses = ["LICENSE", "NOTICE"]'),
     ("licenses",)),
    (lambda f: _sub(f, 'branch = "main"', 'branch = "next"'), ("upstream",)),
    (lambda f: _sub(f, 'card = "RTX 3090"', 'card = "RTX 3090 Ti"'), ("kit",)),
    (lambda f: (f / "docker" / "host-ca.crt").write_text("this machine's CAs"), ()),
])
def test_each_input_changes_its_part_and_nothing_else(tmp_path: Path, edit: object,
                                                      parts: tuple[str, ...]) -> None:
    path = project(tmp_path)
    before = inputs_of(path)
    edit(tmp_path)  # type: ignore[operator]
    after = kit_inputs(load_matrix(path).kit("up-sm86"), REV)
    assert changed_parts(before, after) == parts
    assert (after.digest == kit_inputs(load_matrix(project(tmp_path / "x")).kit("up-sm86"),
                                       REV).digest) == (not parts)


def test_the_revision_and_the_recipe_are_parts(tmp_path: Path) -> None:
    path = project(tmp_path)
    kit = load_matrix(path).kit("up-sm86")
    now = kit_inputs(kit, REV)
    assert changed_parts(now.parts, kit_inputs(kit, "b" * 40)) == ("revision",)
    assert changed_parts(now.parts, kit_inputs(kit, REV, recipe="0" * 64)) == ("recipe",)
    assert kit_inputs(kit, REV.upper()) == now  # a SHA is one whatever its case
    key = cache_key(kit, now)
    assert key == f"ccache-up-sm86-tc-{now.parts['toolchain'][:16]}"


def _sub(folder: Path, old: str, new: str) -> None:
    path = folder / "matrix.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_copied_files_are_those_of_the_build_context() -> None:
    text = ('COPY a.txt b.txt /dst/\nADD --chown=1:1 c.tar /x\nCOPY ["d e.txt", "/y"]\n'
            "COPY --from=stage /f /g\nADD https://example.com/h /h\nCOPY host-ca.crt /ca\n"
            "copy --chmod=644 \\\n  i.sh /i.sh\nRUN cp j k\n")
    assert copied_files(text) == {"a.txt", "b.txt", "c.tar", "d e.txt", "i.sh"}


def test_buildinfo_carries_the_inputs_on_one_line_beside_recipe(tmp_path: Path) -> None:
    """make_buildinfo writes the kit's inputs; the line reads back; older files without it read
    as "unknown"; a damaged one is refused naming the key."""
    info = _buildinfo(tmp_path, "local")
    expected = kit_inputs(load_matrix(ROOT / "matrix.toml").kit("example"), "0" * 40,
                          recipe="2" * 64)
    assert info.inputs == expected.digest and info.input_parts == expected.short_parts()
    text = buildinfo.render(info)
    line = next(item for item in text.splitlines() if item.startswith("inputs: "))
    assert line == "inputs: " + " ".join(
        [expected.digest, *(f"{name}={part[:16]}" for name, part in expected.parts.items())])
    assert f"recipe: {'2' * 64}\n{line}\n" in text
    assert buildinfo.parse(text) == info
    older = buildinfo.parse(text.replace(line + "\n", ""))
    assert (older.inputs, older.input_parts) == ("unknown", ())
    assert "inputs" not in buildinfo.render(older)
    with pytest.raises(BadInput, match="inputs"):
        buildinfo.parse(text.replace(line, line + " arch=zz"))
    with pytest.raises(BadInput, match="inputs"):
        buildinfo.render(dataclasses.replace(info, inputs="sha256:xyz"))


def _entry(**changes: object) -> ledger.LedgerEntry:
    entry = ledger.LedgerEntry(
        tag="t", kit="k", card="c", upstream="o/up", upstream_url="u", revision=REV,
        version="", arch="sm_86", cuda_version="13.0", toolchain="tc", asset="a.tar.gz",
        published_at=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        stores=(ledger.LedgerStore(name="local", location="/x"),),
        assets=(ledger.LedgerAsset(name="a.tar.gz", size=1, sha256="0" * 64, sha1="0" * 40,
                                   urls=(("local", "file:///x"),)),), floor=())
    return dataclasses.replace(entry, **changes)  # type: ignore[arg-type]


def test_the_ledger_records_the_inputs_and_their_parts(tmp_path: Path) -> None:
    inputs = kit_inputs(load_matrix(ROOT / "matrix.toml").kit("example"), REV)
    entry = _entry(inputs=inputs.digest, input_parts=inputs.short_parts())
    path = tmp_path / "t.toml"
    ledger.write(path, entry)
    text = path.read_text()
    assert f'\ninputs = "{inputs.digest}"\n' in text
    assert "\n[input_parts]\n" in text
    for name, part in inputs.short_parts():
        assert f'\n{name} = "{part}"\n' in text
    assert ledger.read(path) == entry
    old = _entry()  # written before inputs: neither key, and it reads so
    ledger.write(path, old)
    assert "inputs" not in path.read_text() and ledger.read(path).inputs is None
    head, tail = ledger.render(old).split("published_at", 1)
    for before, table, message in (
            ('inputs = "sha256:12"\n', "", "inputs is not"),
            (f'inputs = "sha256:{"0" * 64}"\n', '\n[input_parts]\nx = "no"\n', "input_parts.x"),
            ("", f'\n[input_parts]\nx = "{"0" * 16}"\n', "without inputs")):
        with pytest.raises(BadInput, match=message):
            ledger.parse(head + before + "published_at" + tail + table, "t.toml")


def test_publish_copies_the_inputs_from_buildinfo_into_the_ledger(tmp_path: Path) -> None:
    """publish writes what BUILDINFO says (and nothing when it says nothing: an older kit)."""
    program = compile_program(tmp_path)
    matrix = load(matrix_file(tmp_path))
    made = kit_inputs(matrix.kit("example"), info_for().revision)
    info = dataclasses.replace(info_for(), inputs=made.digest, input_parts=made.short_parts())
    kit = make_kit(tmp_path / "dist", program, info=info)
    publish(kit.path, matrix, [LocalStore(tmp_path / "out")], tmp_path, Captured().reporter)
    entry = ledger.read(tmp_path / "releases" / f"{TAG}.toml")
    assert (entry.inputs, entry.input_parts) == (made.digest, made.short_parts())
    older = make_kit(tmp_path / "old" / "dist", program)
    publish(older.path, matrix, [LocalStore(tmp_path / "old" / "out")], tmp_path / "old",
            Captured().reporter)
    entry = ledger.read(tmp_path / "old" / "releases" / f"{TAG}.toml")
    assert (entry.inputs, entry.input_parts) == (None, ())
