"""Pins without a registry: image references as the engine reads them, pins in matrix.toml, the
recipe key that says a pin is stale, `toolchain stale`, `--write`'s rewrite of the matrix, and
every bad pin or prefix as one message with exit 2. (The registry itself: test_registry.py.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ninfer_kits.config.toml_text import loads, with_keys
from ninfer_kits.matrix import load_matrix
from ninfer_kits.matrix.inputs import kit_inputs
from ninfer_kits.oci.reference import DEFAULT_REGISTRY, parse_pin, parse_reference
from ninfer_kits.pipeline.images import ImageRecipe
from ninfer_kits.pipeline.toolchain_pins import stale_pins

ROOT = Path(__file__).resolve().parents[1]
DIGEST = "sha256:" + "ab" * 32


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "ninfer_kits", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("text", "registry", "repository", "tag", "digest"), [
    ("ghcr.io/owner/ninfer-kits-toolchain-x:0123abcd@" + DIGEST, "ghcr.io",
     "ghcr.io/owner/ninfer-kits-toolchain-x", "0123abcd", DIGEST),
    ("127.0.0.1:5000/ns/image", "127.0.0.1:5000", "127.0.0.1:5000/ns/image", "", ""),
    ("localhost/x@" + DIGEST, "localhost", "localhost/x", "", DIGEST),
    ("nvidia/cuda:13.1.2-devel-ubuntu24.04", DEFAULT_REGISTRY, "nvidia/cuda",
     "13.1.2-devel-ubuntu24.04", ""),
    ("ninfer-kits/debian-trixie-base:local", DEFAULT_REGISTRY,
     "ninfer-kits/debian-trixie-base", "local", ""),
    ("[::1]:5000/a/b:t", "[::1]:5000", "[::1]:5000/a/b", "t", ""),
])
def test_a_reference_reads_as_the_engine_reads_it(text: str, registry: str, repository: str,
                                                  tag: str, digest: str) -> None:
    reference = parse_reference(text)
    assert (reference.registry, reference.repository, reference.tag, reference.digest) == \
        (registry, repository, tag, digest)
    assert reference.text() == text


@pytest.mark.parametrize(("text", "says"), [
    ("", "not an image reference"),
    ("a b", "not an image reference"),
    ("x\x1b[31m", "not an image reference"),
    ("Upper/case", "not a repository name"),
    ("x@sha256:abc", "is not sha256:<64"),
    ("x@md5:" + "a" * 32, "is not sha256:<64"),
    ("x:-tag", "is not a tag"),
    ("x:" + "t" * 129, "is not a tag"),
    ("host.io:99999999/x", "not a host[:port]"),
    ("a" * 256, "longer than 255"),
    ("x//y", "not a repository name"),
])
def test_a_bad_reference_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_reference(text)
    assert says in str(raised.value)
    assert "\x1b" not in str(raised.value)


def test_a_pin_must_name_a_digest() -> None:
    assert parse_pin("ghcr.io/o/x@" + DIGEST).by_digest() == "ghcr.io/o/x@" + DIGEST
    with pytest.raises(ValueError, match="names no digest"):
        parse_pin("ghcr.io/o/x:latest")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_reference_or_a_value_error(text: str) -> None:
    try:
        reference = parse_reference(text)
    except ValueError as error:
        assert str(error).isprintable()
    else:  # what reads back is the text itself, nothing lost or added
        assert reference.text() == text


# ------------------------------------------------------------------------- pins in the matrix


@pytest.fixture
def matrix_copy(tmp_path: Path) -> Path:
    """The project's matrix.toml beside its dockerfiles/ (a pin's recipe key reads them)."""
    shutil.copytree(ROOT / "dockerfiles", tmp_path / "dockerfiles")
    shutil.copy(ROOT / "matrix.toml", tmp_path / "matrix.toml")
    shutil.copy(ROOT / "allowed_signers", tmp_path / "allowed_signers")
    return tmp_path / "matrix.toml"


def _pin(matrix: Path, toolchain: str, key: str, value: str) -> None:
    text = matrix.read_text(encoding="utf-8")
    matrix.write_text(with_keys(text, f"toolchains.{toolchain}", [(key, value)]),
                      encoding="utf-8")


@pytest.mark.parametrize(("key", "value", "says"), [
    ("image", "ghcr.io/o/x:latest", "names no digest"),
    ("runtime_image", "ghcr.io/o/x@sha256:12", "is not sha256:<64"),
    ("base_image", "Bad Image", "invalid image"),
])
def test_a_bad_pin_in_the_matrix_names_file_line_and_key(matrix_copy: Path, key: str,
                                                          value: str, says: str) -> None:
    _pin(matrix_copy, "trixie-cuda130", key, value)
    done = cli("matrix", "--matrix", matrix_copy)
    assert done.returncode == 2, done.stderr
    assert "matrix.toml" in done.stderr and key in done.stderr and says in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("prefix", "says"), [
    ("someone/images", "names no registry host"),
    ("ghcr.io/Owner", "not a repository name"),
])
def test_a_registry_prefix_must_name_a_registry(matrix_copy: Path, prefix: str,
                                                says: str) -> None:
    text = matrix_copy.read_text(encoding="utf-8")
    matrix_copy.write_text(with_keys(text, "registry", [("prefix", prefix)]), encoding="utf-8")
    done = cli("matrix", "--matrix", matrix_copy)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    pushed = cli("toolchain", "push", "trixie-cuda130", "--matrix", ROOT / "matrix.toml",
                 "--to", prefix)
    assert pushed.returncode == 2 and says in pushed.stderr, pushed.stderr


def test_push_without_a_prefix_says_where_to_give_one(matrix_copy: Path) -> None:
    text = matrix_copy.read_text(encoding="utf-8")
    matrix_copy.write_text(re.sub(r"\n\[registry\]\nprefix = [^\n]*\n", "\n", text),
                           encoding="utf-8")
    assert load_matrix(matrix_copy).registry is None
    done = cli("toolchain", "push", "trixie-cuda130", "--matrix", matrix_copy)
    assert done.returncode == 2
    assert "--to" in done.stderr and "[registry]" in done.stderr and not done.stdout


def test_stale_names_every_unpinned_image_and_then_only_the_changed_recipe(
        matrix_copy: Path) -> None:
    matrix = load_matrix(matrix_copy)
    used = {kit.toolchain.id for kit in matrix.kits.values()}
    before = stale_pins(matrix.kits.values())
    assert {(item.toolchain, item.key) for item in before} == \
        {(toolchain, key) for toolchain in used for key in ("image", "runtime_image")}
    toolchain = matrix.toolchain("trixie-cuda130")
    for key, recipe in (("image", ImageRecipe.toolchain_image(toolchain)),
                        ("runtime_image", ImageRecipe.runtime_image(toolchain))):
        _pin(matrix_copy, "trixie-cuda130", key,
             f"127.0.0.1:5000/ns/x:{recipe.recipe_key()}@{DIGEST}")
    pinned = cli("toolchain", "stale", "--json", "--matrix", matrix_copy)
    assert pinned.returncode == 0, pinned.stderr
    listed = json.loads(pinned.stdout)["stale"]
    assert "trixie-cuda130" not in {item["toolchain"] for item in listed}
    # an edit of what the toolchain image copies makes its pin stale, not the runtime's
    (matrix_copy.parent / "dockerfiles/context/cuda-wheels/extra").write_text("x\n")
    changed = cli("toolchain", "stale", "--matrix", matrix_copy)
    ours = [line for line in changed.stdout.splitlines() if line.startswith("trixie-cuda130")]
    assert ours and all("image the recipe changed since the pin was made" in line
                        for line in ours), changed.stdout


def test_a_pin_is_part_of_the_kits_inputs_and_none_leaves_them_as_they_were(
        matrix_copy: Path) -> None:
    before = kit_inputs(load_matrix(matrix_copy).kit("example"), "0" * 40)
    _pin(matrix_copy, "trixie-cuda130", "image", f"127.0.0.1:5000/ns/x@{DIGEST}")
    after = kit_inputs(load_matrix(matrix_copy).kit("example"), "0" * 40)
    assert after.parts["toolchain"] != before.parts["toolchain"]
    assert {name for name in before.parts if before.parts[name] != after.parts[name]} == \
        {"toolchain"}
    unpinned = kit_inputs(load_matrix(ROOT / "matrix.toml").kit("example"), "0" * 40)
    assert unpinned.parts["toolchain"] == before.parts["toolchain"]
    # pinned, the Dockerfile's later edits are not the kit's input: the pinned image is
    (matrix_copy.parent / "dockerfiles/toolchain-wheels-debian.Dockerfile").write_text("# new\n")
    edited = kit_inputs(load_matrix(matrix_copy).kit("example"), "0" * 40)
    assert edited.parts["toolchain"] == after.parts["toolchain"]


def test_writing_keys_keeps_the_rest_of_the_file_and_reads_back() -> None:
    text = ('# head\n[a]\nx = 1\nlist = [\n  "p",\n  "q",\n]\n\n# about b\n[b]\nimage = "old"\n'
            'y = 2\n')
    changed = with_keys(text, "a", [("image", 'new"\\'), ("x", "one")])
    assert loads(changed)["a"] == {"x": "one", "list": ["p", "q"], "image": 'new"\\'}
    assert loads(changed)["b"] == {"image": "old", "y": 2}
    assert changed.startswith("# head\n[a]\n") and "# about b\n[b]\n" in changed
    replaced = with_keys(text, "b", [("image", "new")])
    assert replaced.replace('image = "new"', 'image = "old"') == text


@pytest.mark.parametrize("args", [
    ("--toolchain-image", "ghcr.io/o/x:latest", "--builder", "docker"),
    ("--toolchain-image", "ghcr.io/o/x@" + DIGEST),
])
def test_build_toolchain_image_needs_a_pin_and_the_docker_builder(tmp_path: Path,
                                                                  args: tuple[str, ...]) -> None:
    done = cli("build", "example", "--matrix", ROOT / "matrix.toml", "--dist", tmp_path / "d",
               "--cache-dir", tmp_path / "c", *args)
    assert done.returncode == 2, done.stderr
    assert "--toolchain-image" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "d").exists() or not any((tmp_path / "d").iterdir())
