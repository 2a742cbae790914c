"""Each kit tarball's SBOM (CycloneDX 1.6) and provenance (in-toto Statement v1, SLSA
Provenance v1): valid against the official CycloneDX schema and against our schema of the
specs, the same bytes for the same inputs, made again from the kit folder alone, accepted by
kitdir and published with the kit."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator
from packageurl import PackageURL
from referencing import Registry
from referencing.jsonschema import DRAFT7

from ninfer_kits.kit import attestations, buildinfo, flavours, kitdir
from ninfer_kits.release.checksums import read_sha256sums
from test_publish_support import (
    ASSET,
    TAG,
    bundled_library,
    cli,
    info_for,
    make_kit,
    matrix_file,
)
from unsigned import unsigned_matrix

from tools import ROOT

SLSA_SCHEMA = ROOT / "tests" / "data" / "schemas" / "slsa-provenance-v1.schema.json"
CDX_BASE = "http://cyclonedx.org/schema/"  # the bom schema's $id: its $refs resolve against it
STEM = ASSET.removesuffix(".tar.gz")
PORTABLE_STEM = flavours.PORTABLE.asset(ASSET).removesuffix(".tar.gz")


def _cdx_validator() -> Draft7Validator:
    """CycloneDX 1.6 as cyclonedx-python-lib ships it (offline), with the schemas it refers to."""
    res = files("cyclonedx.schema._res")

    def load(name: str) -> Any:
        return json.loads(res.joinpath(name).read_text(encoding="utf-8"))

    registry: Registry[Any] = Registry().with_resources(
        (CDX_BASE + name, DRAFT7.create_resource(load(name)))
        for name in ("spdx.SNAPSHOT.schema.json", "jsf-0.82.SNAPSHOT.schema.json",
                     "cryptography-defs.SNAPSHOT.schema.json"))
    return Draft7Validator(load("bom-1.6.SNAPSHOT.schema.json"), registry=registry,
                           format_checker=Draft7Validator.FORMAT_CHECKER)


CDX = _cdx_validator()
SLSA = Draft202012Validator(json.loads(SLSA_SCHEMA.read_text(encoding="utf-8")),
                            format_checker=Draft202012Validator.FORMAT_CHECKER)


def cdx_errors(document: Any) -> list[str]:
    """What is wrong with a CycloneDX 1.6 document. The shipped schema dropped `required:
    version` (and the $schema enum), so those two are checked here."""
    found = [f"{'/'.join(map(str, error.absolute_path))}: {error.message[:120]}"
             for error in CDX.iter_errors(document)]
    if not isinstance(document, dict) or document.get("version") != 1:
        found.append("version is not 1")
    if not isinstance(document, dict) or document.get("specVersion") != "1.6":
        found.append("specVersion is not 1.6")
    return found


def slsa_errors(document: Any) -> list[str]:
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message[:120]}"
            for error in SLSA.iter_errors(document)]


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def check_folder(kit: kitdir.KitDir) -> None:
    """Every tarball of the folder has both documents, listed in SHA256SUMS, valid, about that
    tarball."""
    sums = read_sha256sums(kit.path / kitdir.SHA256SUMS)
    assert sorted(name for name, _ in kit.attestations) == \
        sorted(kitdir.attestation_names(kit.tarballs))
    for name, listed in kit.attestations:
        assert sums[name] == listed == hashlib.sha256((kit.path / name).read_bytes()).hexdigest()
    for flavour in kit.flavours:
        stem = flavour.asset.removesuffix(".tar.gz")
        sbom = load_json(kit.path / f"{stem}.cdx.json")
        assert cdx_errors(sbom) == []
        assert sbom["metadata"]["component"]["hashes"] == [
            {"alg": "SHA-256", "content": flavour.sha256}]
        statement = load_json(kit.path / f"{stem}.intoto.json")
        assert slsa_errors(statement) == []
        assert statement["subject"] == [{"name": flavour.asset,
                                         "digest": {"sha256": flavour.sha256}}]
        assert statement["predicate"]["buildDefinition"]["externalParameters"]["upstream"][
            "revision"] == kit.info.revision


# --------------------------------------------------------------------------- the real kit


@pytest.mark.slow
def test_the_example_kits_documents_are_valid_and_made_again_from_the_folder(
        example_dist: Path) -> None:
    kit = kitdir.read_kit_dir(example_dist, built=True)
    assert kit.portable is not None
    check_folder(kit)
    portable = load_json(example_dist / f"{kit.portable.asset.removesuffix('.tar.gz')}.cdx.json")
    libraries = [part for part in portable["components"] if part["bom-ref"].startswith("kit/lib/")]
    assert libraries and all(part["purl"].startswith(("pkg:deb/debian/", "pkg:pypi/"))
                             and len(part["hashes"][0]["content"]) == 64 for part in libraries)
    plain = load_json(example_dist / f"{kit.asset.removesuffix('.tar.gz')}.cdx.json")
    vendored = {part["name"] for part in plain["components"]
                if part["bom-ref"].startswith("third_party/")}
    compiled = {part["name"]: part for part in plain["components"]
                if any(prop["name"] == "ninfer-kits:compiled_in"
                       for prop in part.get("properties", ()))}
    # CUB, in the example's top_k kernel: its package, its licence, the header it came from
    cccl = compiled["nvidia-cuda-cccl"]
    # one SPDX expression, each licence once (CUB's, Thrust's and libcu++'s parts ANDed)
    assert cccl["licenses"] == [
        {"expression": "Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"}]
    programs = [part for part in plain["components"] if part["bom-ref"].startswith("kit/bin/")]
    assert {part["name"] for part in programs} == {"ninfer", "ninfer-serve"}
    assert all(part["licenses"] == [{"license": {"id": "Apache-2.0"}}] for part in programs)
    ids = {entry.get("license", {}).get("id") or entry.get("expression")
           for part in libraries for entry in part["licenses"]}
    assert "GPL-2.0-or-later" in ids and "LicenseRef-NVIDIA-Proprietary" in ids
    assert any(prop["value"].endswith("cub/block/block_reduce.cuh")
               for prop in cccl["properties"])
    terms = {prop["value"] for part in compiled.values() for prop in part["properties"]
             if prop["name"] == "ninfer-kits:terms"}
    assert vendored == {path.split("/")[2] for path in kit.info.licenses
                        if path.startswith("kit/third_party/") and path not in terms} - {"README"}


# --------------------------------------------------------------------------- made by hand, cheap


@pytest.fixture(scope="module")
def attested(tmp_path_factory: pytest.TempPathFactory, program: Path) -> kitdir.KitDir:
    """A kit folder with a portable sibling, as `build` makes it with its documents."""
    return make_kit(tmp_path_factory.mktemp("attested") / "dist", program, portable=True,
                    attested=True)


def test_a_kits_documents_are_valid_and_the_same_for_the_same_inputs(
        attested: kitdir.KitDir, program: Path, tmp_path: Path) -> None:
    check_folder(attested)
    again = make_kit(tmp_path / "dist", program, portable=True, attested=True)
    for name, _ in attested.attestations:
        assert (again.path / name).read_bytes() == (attested.path / name).read_bytes()
    sbom = load_json(attested.path / f"{PORTABLE_STEM}.cdx.json")
    library = next(part for part in sbom["components"]
                   if part["bom-ref"] == "kit/lib/libbundled.so.1")
    assert library["purl"] == "pkg:deb/debian/libbundled1@1.0-1?arch=amd64"
    assert library["hashes"] == [{"alg": "SHA-256",
                                  "content": hashlib.sha256(bundled_library()).hexdigest()}]
    assert sbom["metadata"]["timestamp"] == "2023-11-14T22:13:20Z"  # SOURCE_DATE_EPOCH


def test_another_input_gives_other_documents(attested: kitdir.KitDir) -> None:
    subject = attestations.Subject(asset=ASSET, sha256=attested.sha256)
    texts = {"LICENSE": b"Apache License 2.0 (test)\n", "NOTICE": b"test notice\n"}
    one = attestations.documents(subject, info_for(), texts)
    other = attestations.documents(subject, info_for(revision="1" * 40), texts)
    assert one.keys() == other.keys() and all(one[name] != other[name] for name in one)


def test_compiled_in_packages_are_components(attested: kitdir.KitDir) -> None:
    row = attestations.CompiledIn(package="nvidia_cuda_cccl", version="13.0.85",
                                  licence="BSD-3-Clause", manager="wheel",
                                  files=("cub/block/block_merge_sort.cuh",))
    texts = {"LICENSE": b"x\n", "NOTICE": b"y\n"}
    sbom = attestations.sbom(attestations.Subject(asset=ASSET, sha256=attested.sha256),
                             info_for(), texts, (row,))
    assert cdx_errors(sbom) == []
    part = next(part for part in sbom["components"] if part["name"] == "nvidia_cuda_cccl")
    assert part["purl"] == "pkg:pypi/nvidia-cuda-cccl@13.0.85"
    kit = next(dep for dep in sbom["dependencies"] if dep["ref"] == "kit")
    assert part["bom-ref"] in kit["dependsOn"]


@pytest.mark.parametrize(("package", "version", "manager"), [
    ("libavcodec61", "7:7.1.5-0+deb13u1", "dpkg"),
    ("libx264-164", "2:0.164.3108+git31e19f9-2+b1", "dpkg"),
    ("libstdc++6", "14.2.0-19", "dpkg"),
    ("nvidia-cuda-runtime-cu13", "13.0.96", "wheel"),
])
def test_purls_read_back_with_the_reference_parser(package: str, version: str,
                                                   manager: str) -> None:
    purl = PackageURL.from_string(attestations._package_purl(package, version, manager))
    assert (purl.name, purl.version) == (package, version)
    assert (purl.type, purl.namespace) == (("deb", "debian") if manager == "dpkg"
                                           else ("pypi", None))


Mutation = Callable[[Any], None]
CDX_BROKEN: dict[str, Mutation] = {
    "no version": lambda doc: doc.pop("version"),
    "spec 1.5": lambda doc: doc.update(specVersion="1.5"),
    "hash alg in lower case": lambda doc: doc["metadata"]["component"]["hashes"][0].update(
        alg="sha256"),
    "hash not hex": lambda doc: doc["metadata"]["component"]["hashes"][0].update(content="xyz"),
    "unknown key": lambda doc: doc.update(extra=1),
    "component without a name": lambda doc: doc["components"][0].pop("name"),
    "licence id not SPDX": lambda doc: doc["components"][0].update(
        licenses=[{"license": {"id": "BSD-3"}}]),
}
SLSA_BROKEN: dict[str, Mutation] = {
    "no builder id": lambda doc: doc["predicate"]["runDetails"]["builder"].pop("id"),
    "no buildType": lambda doc: doc["predicate"]["buildDefinition"].pop("buildType"),
    "misspelt buildType": lambda doc: doc["predicate"]["buildDefinition"].update(
        buildtype=doc["predicate"]["buildDefinition"].pop("buildType")),
    "subject without a digest": lambda doc: doc["subject"][0].pop("digest"),
    "no subject": lambda doc: doc.update(subject=[]),
    "short sha256": lambda doc: doc["subject"][0]["digest"].update(sha256="abc"),
    "statement v0.1": lambda doc: doc.update(_type="https://in-toto.io/Statement/v0.1"),
    "other predicate": lambda doc: doc.update(predicateType="https://slsa.dev/provenance/v0.2"),
}


@pytest.mark.parametrize("broken", sorted(CDX_BROKEN))
def test_a_broken_sbom_is_refused(attested: kitdir.KitDir, broken: str) -> None:
    document = load_json(attested.path / f"{PORTABLE_STEM}.cdx.json")
    assert cdx_errors(document) == []
    changed = copy.deepcopy(document)
    CDX_BROKEN[broken](changed)
    assert cdx_errors(changed), broken


@pytest.mark.parametrize("broken", sorted(SLSA_BROKEN))
def test_a_broken_provenance_is_refused(attested: kitdir.KitDir, broken: str) -> None:
    document = load_json(attested.path / f"{STEM}.intoto.json")
    assert slsa_errors(document) == []
    changed = copy.deepcopy(document)
    SLSA_BROKEN[broken](changed)
    assert slsa_errors(changed), broken


# --------------------------------------------------------------------------- the kit folder


def copy_folder(kit: kitdir.KitDir, tmp_path: Path) -> Path:
    return Path(shutil.copytree(kit.path, tmp_path / TAG))


def test_a_built_folder_with_one_document_missing_is_refused(attested: kitdir.KitDir,
                                                              tmp_path: Path) -> None:
    folder = copy_folder(attested, tmp_path)
    (folder / f"{PORTABLE_STEM}.intoto.json").unlink()
    missing = re.escape(f"{PORTABLE_STEM}.intoto.json missing")
    with pytest.raises(kitdir.KitDirInvalid, match=missing):
        kitdir.read_kit_dir(folder, built=True)
    # a release may lack it, as it may lack a tarball: SHA256SUMS still lists it
    assert kitdir.read_kit_dir(folder).attestations != ()


def test_a_tampered_document_is_refused(attested: kitdir.KitDir, tmp_path: Path) -> None:
    folder = copy_folder(attested, tmp_path)
    with (folder / f"{STEM}.cdx.json").open("a") as handle:
        handle.write(" ")
    with pytest.raises(kitdir.KitDirInvalid, match=rf"{STEM}\.cdx\.json does not match"):
        kitdir.read_kit_dir(folder)


def test_a_document_of_another_tarball_is_refused(attested: kitdir.KitDir,
                                                  tmp_path: Path) -> None:
    folder = copy_folder(attested, tmp_path)
    (folder / "another-kit.cdx.json").write_text("{}")
    stray = re.escape("another-kit.cdx.json, which is not part")
    with pytest.raises(kitdir.KitDirInvalid, match=stray):
        kitdir.read_kit_dir(folder)


def test_a_kit_built_before_the_documents_still_reads(kit: kitdir.KitDir) -> None:
    again = kitdir.read_kit_dir(kit.path, built=True)
    assert again.attestations == () and again.verified


def test_the_documents_are_published_with_the_kit(attested: kitdir.KitDir,
                                                  tmp_path: Path) -> None:
    done = cli("publish", attested.path, "--to", "local", "--out", tmp_path / "out", "--matrix",
               matrix_file(tmp_path, portable=True), "--cache-dir", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    release = kitdir.read_kit_dir(tmp_path / "out" / TAG)
    assert release.attestations == attested.attestations
    assert buildinfo.read(release.buildinfo_path) == attested.info
    # fetch takes the tarball, not the documents: its DEST is a release of the kit all the same
    dest = tmp_path / "box"
    done = cli("fetch", TAG, "--from", tmp_path / "out", "--dest", dest, "--matrix",
               unsigned_matrix())  # published unsigned: the test has no signing key
    assert done.returncode in (0, 4), done.stderr  # verify's verdict: no NVIDIA driver here
    assert "checked   SHA256SUMS ok" in done.stderr
    fetched = kitdir.read_kit_dir(dest)
    assert fetched.attestations == () and fetched.verified
