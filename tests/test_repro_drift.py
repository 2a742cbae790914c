"""repro.drift on BUILDINFO.txt texts: the kit compared with and the rebuild, as the docker and
local builders write them (a pinned toolchain, one built on the engine, a kit made before
pins), and the sentence that names what of the build environment differs; and what `repro
--against` takes from a kit folder (repro.against: the revision, a pin from a registry the
matrix names) and refuses, through the CLI too. No builds: the functions read BuildInfo values
and matrix files, and each CLI run stops before its build."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ninfer_kits.commands.repro_cmd import outcome
from ninfer_kits.errors import BadInput
from ninfer_kits.kit import buildinfo
from ninfer_kits.matrix import load_matrix
from ninfer_kits.oci.reference import parse_pin
from ninfer_kits.release import reproduction
from ninfer_kits.repro import against, drift
from ninfer_kits.repro.drift import name_drift
from ninfer_kits.repro.model import DIFFERS, EXPECTED, Cause, Comparison, MemberDiff, Side

from tools import ROOT

BASE = "ninfer-kits/debian-trixie-base:local"
BASE_ID = "sha256:" + "b1" * 32
OTHER_BASE_ID = "sha256:" + "b2" * 32
IMAGE = "ninfer-kits/toolchain-trixie-cuda130:0123456789abcdef@sha256:" + "a1" * 32
REBUILT = "ninfer-kits/toolchain-trixie-cuda130:fedcba9876543210@sha256:" + "a2" * 32
PIN = ("127.0.0.1:5000/ns/ninfer-kits-toolchain-trixie-cuda130:0123456789abcdef@sha256:"
       + "c1" * 32)
UNPINNED = "none (not pinned: built on this engine)"

# A docker builder's published BUILDINFO.txt, its run keys below the marker; {run} is replaced.
DOCKER_KIT = f"""\
# BUILDINFO.txt: how this kit was built (ninfer-kits; README.md documents each key).
format: 1
kit: example
card: any sm_86 GPU (example engine)
upstream: ninfer-kits/example-engine
upstream_url: examples/engine
tracked_ref: main
revision: 9899488d0123456789abcdef0123456789abcdef
version: 0.3.0
arch: sm_86
cuda_version: 13.0.88
host_compiler: GNU 14.2.0
cmake_version: 3.31.6
cmake_options: -DCMAKE_BUILD_TYPE=Release
builder: docker
toolchain: trixie-cuda130
base_image: {BASE}
source_date_epoch: 1700000000
pipeline_version: 0.1.0
recipe: {"e" * 64}
python_version: 3.11.2
zlib_version: libdeflate 1.26 (deflate 0.9.0), level 6, 1 MiB gzip members, each with its length
glibc_floor: 2.34
sonames: libc.so.6
runpath: none
sass: sm_86
ptx: none
license: LICENSE
{buildinfo.RUN_MARKER}
run.jobs: 2
run.pipeline_revision: {"0" * 40}
{{run}}"""


def kit(*, image: str = IMAGE, base_id: str = BASE_ID, pin: str | None = None,
        replace: tuple[tuple[str, str], ...] = ()) -> buildinfo.BuildInfo:
    """A docker kit's BUILDINFO.txt read back: `pin` None is a kit built before pins (no
    run.toolchain_image line); `replace` swaps lines above the marker."""
    run = [f"run.base_image_digest: {base_id}", f"run.image: {image}"]
    if pin is not None:
        run.append(f"run.toolchain_image: {pin}")
    text = DOCKER_KIT.replace("{run}", "\n".join(run) + "\n")
    for old, new in replace:
        assert old in text
        text = text.replace(old, new)
    return buildinfo.parse(text, "BUILDINFO.txt")


def test_an_unpinned_image_made_again_from_a_new_base_names_the_base_and_the_way_out() -> None:
    """Issue 40's case: the kit was built months ago in an image made on its engine; this
    rebuild's engine made the image again, from a base debootstrapped again (another ID)."""
    found = name_drift(kit(pin=UNPINNED), kit(image=REBUILT, base_id=OTHER_BASE_ID,
                                               pin=UNPINNED))
    assert found.differs
    first = found.findings[0]
    assert first.kind == drift.TOOLCHAIN_IMAGE
    assert first.detail == (
        f"the toolchain image differs: the kit was built in {IMAGE} (base {BASE} = {BASE_ID}), "
        f"this rebuild in {REBUILT} (base {BASE} = {OTHER_BASE_ID}): the base image {BASE} "
        f"changed since (made again: another ID); pin the toolchain by digest (`ninfer-kits "
        f"toolchain push trixie-cuda130`, docs/reproducibility.md) to reproduce across time")
    assert (first.a, first.b) == (IMAGE, REBUILT)
    assert found.headline == first.summary == (
        f"the toolchain image differs: the base image {BASE} changed since (made again: another "
        f"ID); pin the toolchain by digest (`ninfer-kits toolchain push trixie-cuda130`, "
        f"docs/reproducibility.md) to reproduce across time")
    assert [item.kind for item in found.findings] == [drift.TOOLCHAIN_IMAGE]


def test_a_kit_built_before_pins_reads_as_not_pinned() -> None:
    """No run.toolchain_image line at all: the same as `none (not pinned: …)`."""
    older, pinned_none = kit(), kit(pin=UNPINNED)
    assert drift.recorded_pin(older) is None and drift.recorded_pin(pinned_none) is None
    rebuild = kit(image=REBUILT, base_id=OTHER_BASE_ID, pin=UNPINNED)
    assert name_drift(older, rebuild) == name_drift(pinned_none, rebuild)


def test_the_same_base_and_another_tag_is_a_changed_recipe() -> None:
    found = name_drift(kit(), kit(image=REBUILT))
    assert "the toolchain's recipe changed since (another tag" in found.headline


def test_the_same_tag_built_again_is_the_archive_of_another_day() -> None:
    again = IMAGE.rpartition("@")[0] + "@sha256:" + "a3" * 32
    found = name_drift(kit(), kit(image=again))
    assert found.findings[0].kind == drift.TOOLCHAIN_IMAGE
    assert "built again from the same recipe and base" in found.headline
    assert "Debian's archive and PyPI, on another day" in found.headline


def test_the_same_pin_says_the_difference_is_not_the_toolchain() -> None:
    """Both built in the recorded pin (repro --against passed it on): the images' local names
    and IDs on the two engines may differ; the pin is what they ran in."""
    found = name_drift(kit(pin=PIN), kit(image=REBUILT, base_id=OTHER_BASE_ID, pin=PIN))
    assert not found.differs
    assert [item.kind for item in found.findings] == [drift.SAME_TOOLCHAIN]
    assert found.headline.startswith(f"the toolchain image is the same on both sides ({PIN}): "
                                     f"what differs is not the toolchain")


def test_the_same_unpinned_image_says_the_difference_is_not_the_toolchain() -> None:
    found = name_drift(kit(pin=UNPINNED), kit(pin=UNPINNED))
    assert not found.differs
    assert found.headline.startswith(f"the toolchain image is the same on both sides ({IMAGE}, "
                                     f"not pinned)")


def test_a_pinned_kit_rebuilt_elsewhere_names_both_and_the_pin() -> None:
    found = name_drift(kit(pin=PIN), kit(image=REBUILT, pin=UNPINNED))
    first = found.findings[0]
    assert (first.kind, first.a, first.b) == (drift.TOOLCHAIN_IMAGE, PIN, REBUILT)
    assert f"the kit was built in {PIN} (base {BASE} = {BASE_ID})" in first.detail
    assert "--builder docker builds in the recorded pin" in first.detail


def test_an_unpinned_kit_cannot_be_rebuilt_in_its_image() -> None:
    found = name_drift(kit(pin=UNPINNED), kit(image=REBUILT, pin=PIN))
    assert "was never pushed (not pinned): no rebuild can run in it again" in found.headline


def test_compilers_that_differ_are_named_with_both_versions() -> None:
    """A newer GCC point release in the image: the image and the compilers both differ, the
    image first (what to act on), then the versions."""
    newer = kit(image=REBUILT, base_id=OTHER_BASE_ID,
                replace=(("host_compiler: GNU 14.2.0", "host_compiler: GNU 14.2.1"),))
    found = name_drift(kit(), newer)
    assert [item.kind for item in found.findings] == [drift.TOOLCHAIN_IMAGE, drift.COMPILERS]
    compilers = found.findings[1]
    assert compilers.detail == ("the compilers differ: host compiler GNU 14.2.0 (kit) against "
                                "GNU 14.2.1 (rebuild)")
    assert (compilers.a, compilers.b) == ("host compiler GNU 14.2.0", "host compiler GNU 14.2.1")


def test_a_local_rebuild_of_a_docker_kit_names_the_builder() -> None:
    local = kit(replace=(("builder: docker", "builder: local"), ("toolchain: trixie-cuda130",
                                                                 "toolchain: host"),
                         ("cuda_version: 13.0.88", "cuda_version: 13.1.115")))
    found = name_drift(kit(pin=PIN), local)
    assert [item.kind for item in found.findings] == [drift.BUILDER, drift.COMPILERS]
    assert found.headline.startswith(
        "the builder differs: the kit was built by the docker builder (toolchain "
        "trixie-cuda130), this rebuild by the local builder (the build machine's own "
        "compilers); rebuild with --builder docker")
    assert "CUDA 13.0.88 (kit) against 13.1.115 (rebuild)" in found.findings[1].detail


def test_two_local_builds_with_the_same_compilers_point_elsewhere() -> None:
    local = (("builder: docker", "builder: local"), ("toolchain: trixie-cuda130",
                                                     "toolchain: host"))
    found = name_drift(kit(replace=local), kit(replace=local, image=REBUILT))
    assert not found.differs
    assert found.headline.startswith("both built with the build machine's own compilers")
    # a local kit built before `toolchain: host` names the matrix toolchain: still no image
    older = kit(replace=(("builder: docker", "builder: local"),))
    assert name_drift(older, kit(replace=local)).findings == found.findings


def test_another_matrix_toolchain_is_named() -> None:
    moved = kit(replace=(("toolchain: trixie-cuda130", "toolchain: bullseye-sysroot-cuda130"),),
                image=REBUILT)
    found = name_drift(kit(), moved)
    assert found.findings[0].kind == drift.TOOLCHAIN
    assert "built with trixie-cuda130, this rebuild with bullseye-sysroot-cuda130" in \
        found.headline


def test_a_tarballs_own_copy_records_no_image() -> None:
    """The BUILDINFO.txt inside a tarball has no run keys: nothing to name the image by."""
    inside = buildinfo.parse(buildinfo.render(kit(pin=PIN), with_run=False))
    found = name_drift(inside, kit(pin=PIN))
    assert [item.kind for item in found.findings] == [drift.UNRECORDED]
    assert not found.differs


def test_another_recipe_or_compressor_is_named() -> None:
    """A kit built by another ninfer-kits checkout: its recipe and its packer are named, with
    the commit the kit records, after the toolchain (which is the same here)."""
    older = kit(pin=PIN, replace=((f"recipe: {'e' * 64}", f"recipe: {'f' * 64}"),
                                  ("zlib_version: libdeflate 1.26", "zlib_version: zlib 1.3.1")))
    found = name_drift(older, kit(pin=PIN))
    assert [item.kind for item in found.findings] == [drift.RECIPE, drift.PACKER,
                                                      drift.SAME_TOOLCHAIN]
    assert found.findings[0].detail == (
        f"the recipe differs: build/recipe.py sha256 {'f' * 64} (kit, ninfer-kits {'0' * 40}) "
        f"against {'e' * 64} (rebuild, ninfer-kits {'0' * 40}); rebuild from the ninfer-kits "
        f"commit the kit records")
    assert found.headline.startswith("the recipe differs (build/recipe.py)")
    assert found.findings[1].detail.startswith("the tarballs were packed by another "
                                               "compressor: zlib 1.3.1 (deflate 0.9.0)")


def test_inputs_that_differ_are_named_by_part() -> None:
    """A kit made from another matrix.toml: BUILDINFO's `inputs` parts say which of it (here
    the toolchain's recipe and the CMake options), though the image is the same pin."""
    digest = "sha256:" + "0" * 64
    parts = ("revision=1111111111111111 cmake_options=2222222222222222 "
             "toolchain=3333333333333333 recipe=4444444444444444")
    theirs = kit(pin=PIN, replace=(("license: LICENSE", f"license: LICENSE\ninputs: {digest} "
                                                        f"{parts}"),))
    ours = kit(pin=PIN, replace=(("license: LICENSE", "license: LICENSE\ninputs: " + digest
                                  + " " + parts.replace("2222", "2223").replace("3333", "3334")),))
    found = name_drift(theirs, ours)
    assert [item.kind for item in found.findings] == [drift.INPUTS, drift.SAME_TOOLCHAIN]
    assert found.findings[0].a == "cmake_options, toolchain"
    assert found.headline == ("the inputs differ: cmake_options, toolchain; rebuild from the "
                              "ninfer-kits commit the kit records")
    assert "the toolchain's recipe (Dockerfile, context, base, arguments, CUDA, pin)" in \
        found.findings[0].detail
    # the revision is a finding of its own, named by both commits, first
    other = kit(pin=PIN, replace=(("revision: 9899488d0123456789abcdef0123456789abcdef",
                                   "revision: " + "a" * 40),))
    moved = name_drift(theirs, other)
    assert [item.kind for item in moved.findings] == [drift.REVISION, drift.SAME_TOOLCHAIN]
    assert moved.headline == ("the upstream revision differs: the kit was built from "
                              "9899488d0123456789abcdef0123456789abcdef, this rebuild from "
                              f"{'a' * 40}; without --revision, repro --against builds the kit's")
    # a kit built before `inputs` (no parts) names none
    assert [item.kind for item in name_drift(kit(pin=PIN), ours).findings] == \
        [drift.SAME_TOOLCHAIN]


def test_text_and_json_carry_every_finding() -> None:
    found = name_drift(kit(), kit(image=REBUILT, replace=(("cmake_version: 3.31.6",
                                                           "cmake_version: 3.31.7"),)))
    lines = drift.render(found).splitlines()
    assert len(lines) == 2 and all(line.startswith("drift: ") for line in lines)
    document = drift.to_json(found)
    assert document["differs"] is True
    assert [item["kind"] for item in document["findings"]] == [drift.TOOLCHAIN_IMAGE,
                                                              drift.COMPILERS]
    assert document["findings"][1]["b"] == "CMake 3.31.7"


def comparison(*members: MemberDiff) -> Comparison:
    return Comparison(a="kit", b="rebuild", layout="kit-folder", members=members, same=10)


def test_a_record_opens_with_the_drift_then_the_files() -> None:
    """What --record writes (REPRODUCTION.json's result, summary, differences), from a
    comparison and the drift, as made and read back by ninfer_kits.release.reproduction."""
    binary = MemberDiff(path="kit/bin/ninfer", kind="elf", status=DIFFERS, a=Side("file"),
                        b=Side("file"), causes=(Cause("string", "a string differs"),))
    run_facts = MemberDiff(path="BUILDINFO.txt", kind="text", status=EXPECTED, a=Side("file"),
                           b=Side("file"), causes=(Cause("run-facts", "", expected=True),))
    found = name_drift(kit(pin=UNPINNED), kit(image=REBUILT, base_id=OTHER_BASE_ID,
                                               pin=UNPINNED))
    result, summary, differences = outcome(comparison(binary, run_facts), found)
    assert result == reproduction.DIFFERS
    assert summary == f"{found.headline}; 1 file(s) differ: kit/bin/ninfer: differs (string)"
    assert differences == [f"drift: {found.findings[0].detail}",
                           "kit/bin/ninfer: differs (string)"]
    record = reproduction.make(kit="example", tag="t", compared={"a.tar.gz": "0" * 64},
                               result=result, summary=summary, differences=differences,
                               run="a test")
    assert record.summary.startswith("the toolchain image differs: the base image")
    assert "NOT reproduced" in record.words() and "changed since" in record.words()
    # identical: the drift is not said; no drift known: the files alone
    assert outcome(comparison(run_facts), found) == (reproduction.IDENTICAL, "identical bytes",
                                                     [])
    assert outcome(comparison(binary), None) == (
        reproduction.DIFFERS, "1 file(s) differ: kit/bin/ninfer: differs (string)",
        ["kit/bin/ninfer: differs (string)"])


# --- what repro --against takes from the kit folder (repro.against), and the CLI before a build

PREFIX = "127.0.0.1:5000/ns"


REGISTRY = '[registry]\nprefix = "ghcr.io/ninfer-kits"\n'  # the project's, in matrix.toml


def matrix_with(folder: Path, registry: str | None = REGISTRY) -> Path:
    """The project's matrix.toml (and allowed_signers beside it) in `folder`, its [registry]
    table replaced by `registry` (None: none)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "allowed_signers", folder / "allowed_signers")
    text = (ROOT / "matrix.toml").read_text()
    assert REGISTRY in text
    matrix = folder / "matrix.toml"
    matrix.write_text(text.replace(REGISTRY, registry or ""))
    return matrix


def kit_folder(place: Path, info: buildinfo.BuildInfo) -> Path:
    """A folder holding the BUILDINFO.txt repro reads (what it compares comes after the build)."""
    place.mkdir(parents=True)
    (place / "BUILDINFO.txt").write_text(buildinfo.render(info))
    return place


def test_the_revision_and_the_pin_a_kit_folder_records_are_read(tmp_path: Path) -> None:
    folder = kit_folder(tmp_path / "kit", kit(pin=PIN))
    recorded = against.read_recorded(folder, "example")
    assert recorded is not None
    assert (recorded.revision, recorded.pin) == ("9899488d0123456789abcdef0123456789abcdef", PIN)
    # the tarball of that folder reads the BUILDINFO.txt beside it; one alone records nothing
    tarball = folder / "example.tar.gz"
    tarball.write_bytes(b"")
    assert against.read_recorded(tarball, "example") == recorded
    alone = tmp_path / "alone.tar.gz"
    alone.write_bytes(b"")
    assert against.read_recorded(alone, "example") is None


def test_a_pin_of_a_repository_the_matrix_pins_is_taken_without_a_registry_table(
        tmp_path: Path) -> None:
    other = "registry.example:443/team/toolchain:0123456789abcdef@sha256:" + "d4" * 32
    matrix_file = matrix_with(tmp_path / "m", registry=None)
    matrix_file.write_text(matrix_file.read_text().replace(
        '[toolchains.trixie-cuda130]\n',
        f'[toolchains.trixie-cuda130]\nimage = "{other.replace("d4" * 32, "d5" * 32)}"\n', 1))
    matrix = load_matrix(matrix_file)
    assert matrix.registry is None
    folder = kit_folder(tmp_path / "kit", kit(pin=other))
    assert against.check_trusted(other, matrix, folder / "BUILDINFO.txt") == parse_pin(other)


def test_a_pin_from_elsewhere_is_refused_naming_it_and_the_way_to_run_it(tmp_path: Path) -> None:
    """A kit folder comes from outside: the image it names is not run unless the matrix names
    its repository, or the user passes it."""
    matrix = load_matrix(matrix_with(tmp_path, f'[registry]\nprefix = "{PREFIX}"\n'))
    elsewhere = "evil.example/ns/ninfer-kits-toolchain-trixie-cuda130:0123@sha256:" + "e5" * 32
    source = kit_folder(tmp_path / "kit", kit(pin=elsewhere)) / "BUILDINFO.txt"
    with pytest.raises(BadInput) as refused:
        against.check_trusted(elsewhere, matrix, source)
    message = str(refused.value)
    assert f"the kit was built in {elsewhere}" in message
    assert f"[registry] prefix: {PREFIX}" in message
    assert f"`repro --toolchain-image {elsewhere}` runs it, if you trust it" in message
    # a prefix is a whole path: 127.0.0.1:5000/nsx/… is not under 127.0.0.1:5000/ns
    with pytest.raises(BadInput):
        against.check_trusted(PIN.replace("/ns/", "/nsx/"), matrix, source)
    assert against.check_trusted(PIN, matrix, source) == parse_pin(PIN)


def test_another_kit_or_a_revision_that_is_no_commit_is_refused(tmp_path: Path) -> None:
    folder = kit_folder(tmp_path / "kit", kit())
    with pytest.raises(BadInput, match="describes a kit of 'example', not of 'ninfer-sm120a'"):
        against.read_recorded(folder, "ninfer-sm120a")
    short = kit(replace=(("revision: 9899488d0123456789abcdef0123456789abcdef",
                          "revision: 9899488d"),))
    with pytest.raises(BadInput, match="revision '9899488d' is not a commit SHA"):
        against.read_recorded(kit_folder(tmp_path / "short", short), "example")
    assert against.read_recorded(folder, "example") == against.Recorded(
        source=folder / "BUILDINFO.txt", info=kit(), revision=kit().revision, pin=None)


def repro(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "repro", "example", *args],
                          capture_output=True, text=True, check=False, cwd=cwd)


def test_repro_refuses_a_foreign_pin_or_a_bad_toolchain_image_before_any_build(
        tmp_path: Path) -> None:
    """The CLI, as a user runs it: exit 2, the message on the last line, no traceback, nothing
    built. The foreign pin is refused where it would be used: the docker builder's rebuild."""
    matrix = matrix_with(tmp_path / "m", f'[registry]\nprefix = "{PREFIX}"\n')
    elsewhere = "evil.example/ns/toolchain:1@sha256:" + "e5" * 32
    folder = kit_folder(tmp_path / "kit", kit(pin=elsewhere))
    work = tmp_path / "w"
    runs = {
        "foreign": repro("--matrix", str(matrix), "--builder", "docker", "--against",
                         str(folder), "--work", str(work), cwd=tmp_path),
        "local": repro("--matrix", str(matrix), "--toolchain-image", PIN, cwd=tmp_path),
        "no pin": repro("--matrix", str(matrix), "--builder", "docker", "--toolchain-image",
                        "127.0.0.1:5000/ns/toolchain:1", cwd=tmp_path),
    }
    for name, done in runs.items():
        assert done.returncode == 2, (name, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stderr.splitlines()[-1].startswith("ninfer-kits: error: "), done.stderr
    assert f"the kit was built in {elsewhere}" in runs["foreign"].stderr.splitlines()[-1]
    assert "--toolchain-image needs --builder docker" in runs["local"].stderr
    assert "it names no digest" in runs["no pin"].stderr
    assert not work.exists()
