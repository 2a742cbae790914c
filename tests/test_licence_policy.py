"""The licence gate (issue 39 item 2): SPDX expressions, the policy file
(data/licence_policy.toml) validated on load, the judge on each case, the SBOM's SPDX licences
and programs, and publish refusing a forbidden kit for a GitHub store (the local GitHub server,
real HTTP) while warning for a folder; floor and verify show the verdict as one line."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest

from github_server import GitHubServer
from ninfer_kits.errors import ConfigError
from ninfer_kits.kit import attestations, kitdir, licence_policy, spdx
from ninfer_kits.kit.licence_policy import (
    ALLOWED,
    FORBIDDEN,
    UNKNOWN,
    Component,
    LicenceForbidden,
    judge,
    load_policy,
)
from ninfer_kits.matrix import GitHubTarget
from ninfer_kits.pipeline import copyleft
from ninfer_kits.pipeline.bundled_licences import bundled_licences, write_bundled_licences
from ninfer_kits.pipeline.compiled_in import load_table
from ninfer_kits.pipeline.provenance import Origin
from ninfer_kits.pipeline.repair import Bundled
from ninfer_kits.stores.b2 import B2Target
from test_attestations import cdx_errors, load_json
from test_publish_support import (
    PORTABLE,
    TAG,
    Captured,
    Library,
    b2_simulator,
    b2_store,
    cli,
    github_store,
    info_for,
    load,
    make_kit,
    matrix_file,
    publish,
)

from tools import ROOT

APACHE = (ROOT / "examples" / "engine" / "LICENSE").read_text()
GPL_FFMPEG = Library("libavcodec.so.61", "libavcodec61 7:7.1.5-0+deb13u1 (dpkg)", "ffmpeg",
                     "GPL-2.0-or-later")
LGPL_FFMPEG = Library("libavcodec.so.61", "ffmpeg 7.1.2 (built)", "ffmpeg", "LGPL-2.1-or-later")
CUDART = Library("libcudart.so.13", "nvidia-cuda-runtime 13.0.96 (wheel)", "nvidia-cuda-runtime",
                 "LicenseRef-NVIDIA-Proprietary", "NVIDIA CUDA Toolkit End User License Agreement")
ZLIB = Library("libz.so.1", "zlib1g 1:1.3.dfsg+really1.3.1-1+b1 (dpkg)", "zlib", "Zlib")
PORTABLE_STEM = PORTABLE.removesuffix(".tar.gz")


# --------------------------------------------------------------------------- SPDX expressions


@pytest.mark.parametrize(("text", "written"), [
    ("Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause AND Apache-2.0 WITH "
     "LLVM-exception", "Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"),
    ("MIT OR (Apache-2.0 OR MIT)", "Apache-2.0 OR MIT"),
    ("(GPL-2.0-or-later OR MIT) AND ISC", "(GPL-2.0-or-later OR MIT) AND ISC"),
    ("GPL-3.0-or-later WITH GCC-exception-3.1", "GPL-3.0-or-later WITH GCC-exception-3.1"),
    ("LicenseRef-NVIDIA-Proprietary", "LicenseRef-NVIDIA-Proprietary"),
])
def test_an_expression_is_written_in_one_form(text: str, written: str) -> None:
    assert spdx.normalise(text) == written


@pytest.mark.parametrize("text", ["GPL-2+ or MIT", "MIT AND", "(MIT", "MIT WITH", "", "a/b",
                                  "MIT OR OR ISC", "Expat, GPL-2+"])
def test_what_is_no_expression_is_refused(text: str) -> None:
    with pytest.raises(spdx.NotAnExpression, match=r"SPDX licence expression|empty"):
        spdx.parse(text)


def test_ccccl_parts_make_one_deduplicated_expression() -> None:
    """What the issue saw: CCCL's licence read as a repeated AND-list."""
    parts = [part.licence for part in load_table().parts if part.package == "nvidia-cuda-cccl"]
    assert spdx.all_of(parts) == "Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"


# --------------------------------------------------------------------------- the policy file


def test_the_shipped_policy_classifies_every_licence_the_project_names() -> None:
    policy = load_policy()
    named = [row.licence for row in copyleft.load_verdicts().rows]
    named += [part.licence for part in load_table().parts]
    named += [rule.licence for rule in policy.texts]
    for expression in named:
        for licence in spdx.licences(spdx.parse(expression)):
            assert policy.class_of(licence.id) is not None, (expression, licence.id)


def test_the_fixes_name_toolchains_of_the_matrix() -> None:
    toolchains = tomllib.loads((ROOT / "matrix.toml").read_text())["toolchains"]
    for fix in load_policy().fixes:
        assert fix.toolchains and set(fix.toolchains) <= set(toolchains), fix.toolchains


GOOD = (ROOT / "src" / "ninfer_kits" / "data" / "licence_policy.toml").read_text()


@pytest.mark.parametrize(("change", "key", "says"), [
    (("schema = 1", "schema = 2"), "schema", "unsupported schema 2"),
    (('classes = ["strong-copyleft", "proprietary-redistributable"]',
      'classes = ["strong-copyleft", "closed"]'), "classes", "'closed' is not a class"),
    (('"LicenseRef-NVIDIA-Proprietary"]', '"LicenseRef-NVIDIA-Proprietary", "MIT"]'),
     "licences", "MIT is in class permissive already"),
    (('"GCC-exception-3.1" = "weak-copyleft"', '"GCC-exception-3.1" = "weak"'),
     "GCC-exception-3.1", "'weak' is not a class"),
    (("rank = 1\n", "rank = 1\ncolour = 3\n"), "colour", "unknown key"),
    (('licence = "Apache-2.0"\nphrases', 'licence = "Apache 2"\nphrases'), "licence",
     "not an SPDX licence expression"),
    (("fix = \"build the kit in a portable toolchain ({toolchains})",
      "fix = \"build the kit in a portable toolchain ({tools})"), "fix", "only {toolchains}"),
])
def test_a_bad_policy_is_refused_naming_file_line_and_key(
        tmp_path: Path, change: tuple[str, str], key: str, says: str) -> None:
    assert change[0] in GOOD
    path = tmp_path / "policy.toml"
    text = GOOD.replace(change[0], change[1], 1)
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_policy(path)
    message = str(raised.value)
    assert str(path) in message and key in message and says in message, message
    assert re.search(r":[0-9]+", message), message  # the line


# --------------------------------------------------------------------------- the judge


def _part(name: str, licence: str | None, ref: str = "") -> Component:
    return Component(ref=ref or f"kit/lib/{name}.so", name=name, version="1", licence=licence,
                     words="" if licence else "GPL-2+, LGPL-2.1+")


def test_gpl_beside_proprietary_is_forbidden_naming_components_licences_and_fix() -> None:
    verdict = judge("kit.tar.gz", [
        _part("libavcodec61", "GPL-2.0-or-later"), _part("libx264-164", "GPL-2.0-or-later"),
        _part("nvidia-cuda-runtime", "LicenseRef-NVIDIA-Proprietary"),
        _part("zlib1g", "Zlib"), _part("ninfer", "Apache-2.0", ref="kit/bin/ninfer")])
    assert verdict.status == FORBIDDEN
    (conflict,) = verdict.conflicts
    copyleft_side, proprietary_side = conflict.sides
    assert {c.name for c in copyleft_side} == {"libavcodec61", "libx264-164"}
    assert [c.name for c in proprietary_side] == ["nvidia-cuda-runtime"]
    details = verdict.details()
    assert "kit/lib/libavcodec61.so (GPL-2.0-or-later)" in details
    assert "LicenseRef-NVIDIA-Proprietary" in details
    assert "bullseye-sysroot-cuda130 or bullseye-sysroot-cuda131" in details
    assert "without --enable-gpl" in details
    assert "must NOT be distributed" in verdict.line()


def test_lgpl_shared_libraries_beside_proprietary_are_allowed() -> None:
    verdict = judge("kit.tar.gz", [
        _part("ffmpeg", "LGPL-2.1-or-later"),
        _part("libstdc++6", "GPL-3.0-or-later WITH GCC-exception-3.1"),
        _part("libgnutls30", "LGPL-3.0-or-later OR GPL-2.0-or-later"),
        _part("nvidia-cuda-runtime", "LicenseRef-NVIDIA-Proprietary")])
    assert verdict.status == ALLOWED and not verdict.conflicts, verdict.details()


def test_permissive_components_are_allowed() -> None:
    verdict = judge("kit.tar.gz", [_part("zlib1g", "Zlib"), _part("libfreetype6",
                                                                 "FTL OR GPL-2.0-or-later"),
                                   _part("ninfer", "Apache-2.0", ref="kit/bin/ninfer")])
    assert verdict.status == ALLOWED
    assert verdict.line() == "licences of kit.tar.gz: allowed by the licence policy"


def test_an_unknown_licence_is_named_and_is_not_a_verdict_of_forbidden() -> None:
    verdict = judge("kit.tar.gz", [_part("libold", None),
                                   _part("libodd", "Odd-Licence-1.0"),
                                   _part("nvidia-cuda-runtime", "LicenseRef-NVIDIA-Proprietary")])
    assert verdict.status == UNKNOWN
    assert {c.name for c in verdict.unknown} == {"libold", "libodd"}
    assert "the licence policy cannot classify kit/lib/libold.so (GPL-2+, LGPL-2.1+)" in \
        verdict.line()
    # header code compiled in from a distribution's package is named in its words: not judged
    header = Component(ref="pkg:deb/debian/libc6-dev@2.36", name="libc6-dev", version="2.36",
                       licence=None, words="GPL-2+, LGPL-2.1+", compiled_in=True)
    assert judge("kit.tar.gz", [header]).status == ALLOWED


# --------------------------------------------------------------------------- SBOM and kits


def test_the_build_names_a_bundled_librarys_licence_by_its_source_package(
        tmp_path: Path) -> None:
    """This host's dpkg records: zlib1g comes from the source package zlib, whose verdict is
    Zlib; the wheel's is its own."""
    zlib = Origin(package="zlib1g", version="1", manager="dpkg", license="Zlib",
                  license_file="/usr/share/doc/zlib1g/copyright")
    wheel = Origin(package="nvidia-cuda-runtime", version="13.0.96", manager="wheel",
                   license="LicenseRef-NVIDIA-Proprietary", license_file="/x/License.txt")
    bundled = [Bundled(soname=soname, source_path="/x", sha256="0" * 64, size=1, origin=origin,
                       notice="kit/third_party/x/copyright")
               for soname, origin in (("libz.so.1", zlib), ("libcudart.so.13", wheel))]
    rows = bundled_licences(bundled, Path("/"), copyleft.load_verdicts())
    assert [(r.soname, r.package, r.licence) for r in rows] == [
        ("libz.so.1", "zlib", "Zlib"),
        ("libcudart.so.13", "nvidia-cuda-runtime", "LicenseRef-NVIDIA-Proprietary")]
    assert rows[1].name == "NVIDIA CUDA Toolkit End User License Agreement"
    written = write_bundled_licences(tmp_path / "kit", rows)
    assert written == "kit/third_party/licences.json"
    assert attestations.read_bundled_licences(  # sorted by soname
        (tmp_path / written).read_bytes(), written) == tuple(sorted(rows, key=lambda r: r.soname))


def _kit(tmp_path: Path, program: Path, *libraries: Library) -> kitdir.KitDir:
    digest = hashlib.sha256(program.read_bytes()).hexdigest()
    info = dataclasses.replace(info_for(), binaries=tuple(
        (digest, f"kit/bin/{name}") for name in ("ninfer", "ninfer-serve")))
    return make_kit(tmp_path / "dist", program, portable=True, attested=True, info=info,
                    bundled=libraries, licence_text=APACHE)


def test_the_sbom_names_spdx_ids_expressions_and_programs_with_hashes(
        tmp_path: Path, program: Path) -> None:
    kit = _kit(tmp_path, program, GPL_FFMPEG, CUDART, ZLIB)
    sbom = load_json(kit.path / f"{PORTABLE_STEM}.cdx.json")
    assert cdx_errors(sbom) == []
    parts = {part["bom-ref"]: part for part in sbom["components"]}
    assert parts["kit/lib/libavcodec.so.61"]["licenses"] == [
        {"license": {"id": "GPL-2.0-or-later"}}]
    cudart = parts["kit/lib/libcudart.so.13"]
    assert cudart["licenses"] == [{"expression": "LicenseRef-NVIDIA-Proprietary"}]
    assert {"name": "ninfer-kits:licence_name",
            "value": "NVIDIA CUDA Toolkit End User License Agreement"} in cudart["properties"]
    assert parts["upstream"]["licenses"][0]["license"]["id"] == "Apache-2.0"
    digest = hashlib.sha256(program.read_bytes()).hexdigest()
    for name in ("ninfer", "ninfer-serve"):
        own = parts[f"kit/bin/{name}"]
        assert own["type"] == "application" and own["hashes"] == [
            {"alg": "SHA-256", "content": digest}]
        assert own["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    row = attestations.CompiledIn(package="nvidia-cuda-cccl", version="13.0.85", manager="wheel",
                                  licence="Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND "
                                          "BSD-3-Clause", files=("cub/x.cuh",))
    info = kit.info
    sbom = attestations.sbom(attestations.Subject(asset=kit.asset, sha256=kit.sha256), info,
                             {"LICENSE": APACHE.encode(), "NOTICE": b"notice\n"}, (row,))
    assert cdx_errors(sbom) == []
    cccl = next(part for part in sbom["components"] if part["name"] == "nvidia-cuda-cccl")
    assert cccl["licenses"] == [
        {"expression": "Apache-2.0 AND Apache-2.0 WITH LLVM-exception AND BSD-3-Clause"}]


def test_a_kit_built_before_spdx_licences_reads_as_unknown(tmp_path: Path,
                                                           program: Path) -> None:
    """No SBOM at all (a kit built before them): unknown, said, and published with it."""
    kit = make_kit(tmp_path / "dist", program, portable=True)
    verdicts = licence_policy.judge_kit(kit)
    assert [v.status for v in verdicts] == [UNKNOWN, UNKNOWN]
    assert "no SBOM beside it" in verdicts[0].line()


def _publish_to_github(kit: kitdir.KitDir, tmp_path: Path, captured: Captured,
                       server: GitHubServer) -> None:
    matrix = load(matrix_file(tmp_path, portable=True, github=GitHubTarget(
        repository="o/kits", api=server.base_url)))
    store = github_store(server, "o/kits", "token", captured.reporter)
    publish(kit.path, matrix, [store], tmp_path, captured.reporter)


def test_publish_refuses_a_forbidden_kit_for_github_before_anything_is_uploaded(
        tmp_path: Path, program: Path) -> None:
    kit = _kit(tmp_path, program, GPL_FFMPEG, CUDART)
    with GitHubServer() as server:
        server.add_repo("o/kits")
        server.add_token("token")
        with pytest.raises(LicenceForbidden) as raised:
            _publish_to_github(kit, tmp_path, Captured(), server)
        assert server.snapshot().releases == ()  # nothing uploaded, no draft
    message = str(raised.value)
    assert raised.value.exit_code == 1
    assert f"{PORTABLE} must not be distributed" in message
    assert "kit/lib/libavcodec.so.61 (GPL-2.0-or-later)" in message
    assert "kit/lib/libcudart.so.13 (LicenseRef-NVIDIA-Proprietary)" in message
    assert "bullseye-sysroot-cuda130" in message and "nothing was published to github" in message


def test_publish_refuses_a_forbidden_kit_for_b2_before_anything_is_uploaded(
        tmp_path: Path, program: Path) -> None:
    kit = _kit(tmp_path, program, GPL_FFMPEG, CUDART)
    api, key_id, key = b2_simulator()
    captured = Captured()
    store = b2_store(api, key_id, key, captured.reporter)
    matrix = load(matrix_file(tmp_path, portable=True,
                              b2=B2Target(bucket="ninfer-kits", prefix="kits/")))
    with pytest.raises(LicenceForbidden, match="nothing was published to b2"):
        publish(kit.path, matrix, [store], tmp_path, captured.reporter)
    assert list(api.get_bucket_by_name("ninfer-kits").ls("kits/", recursive=True)) == []


def test_publish_to_a_folder_warns_and_the_notes_say_do_not_distribute(
        tmp_path: Path, program: Path) -> None:
    kit = _kit(tmp_path, program, GPL_FFMPEG, CUDART)
    done = cli("publish", kit.path, "--to", "local", "--out", tmp_path / "out", "--matrix",
               matrix_file(tmp_path, portable=True), "--cache-dir", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "warning:" in done.stderr and "must not be distributed" in done.stderr
    assert "this release must not be distributed" in done.stderr
    notes = (tmp_path / "out" / TAG / "RELEASE.md").read_text()
    title, body = notes.split("\n\n", 1)
    assert title.startswith("# ") and body.startswith("## This release must not be distributed")
    assert "libavcodec.so.61 (GPL-2.0-or-later)" in notes
    # the plain kit carries no bundled library: allowed; said as information
    assert f"licences of {kit.asset}: allowed by the licence policy" in done.stderr
    assert "published to a folder only: this release must not be distributed" in done.stderr
    # a dry run of the publish to GitHub and B2 says that publish would refuse it
    to_b2 = matrix_file(tmp_path, portable=True,
                        b2=B2Target(bucket="ninfer-kits", prefix="kits/"))
    dry = cli("publish", kit.path, "--dry-run", "--out", tmp_path / "dry", "--matrix", to_b2,
              "--cache-dir", tmp_path / "cache")
    assert dry.returncode == 0, dry.stderr
    assert "a dry run: a publish to GitHub or B2 would refuse it" in dry.stderr
    assert f"licence gate: a publish to b2 would refuse {kit.portable.asset} (exit 1" \
        in dry.stdout, dry.stdout


def test_an_lgpl_kit_publishes_to_github(tmp_path: Path, program: Path) -> None:
    kit = _kit(tmp_path, program, LGPL_FFMPEG, CUDART, ZLIB)
    captured = Captured()
    with GitHubServer() as server:
        server.add_repo("o/kits")
        server.add_token("token")
        _publish_to_github(kit, tmp_path, captured, server)
        assert [r.tag_name for r in server.snapshot().releases] == [TAG]
    assert f"licences of {PORTABLE}: allowed by the licence policy" in captured.all()


def test_floor_and_verify_show_the_verdict_as_information(tmp_path: Path,
                                                          program: Path) -> None:
    kit = _kit(tmp_path, program, GPL_FFMPEG, CUDART)
    floor = cli("floor", kit.path / PORTABLE)
    assert floor.returncode == 0, floor.stderr
    (line,) = [row for row in floor.stdout.splitlines() if row.startswith("licences of")]
    assert "must NOT be distributed" in line and "libavcodec.so.61" in line
    plain = cli("verify", kit.path / kit.asset)
    assert f"licences of {kit.asset}: allowed by the licence policy" in plain.stdout
    forbidden = cli("verify", kit.path / PORTABLE)
    assert "must NOT be distributed" in forbidden.stdout
    assert forbidden.returncode == plain.returncode  # information: the status is verify's own
    assert json.loads(cli("floor", kit.path / PORTABLE, "--json").stdout)  # JSON unchanged


@pytest.mark.slow
def test_the_example_kits_verdicts(example_dist: Path) -> None:
    """The example built here (the local builder on Debian 12, as the tests build it): its
    portable kit bundles Debian's GPL FFmpeg beside libcudart, which the policy forbids; the
    plain kit bundles nothing and is not forbidden."""
    kit = kitdir.read_kit_dir(example_dist, built=True)
    plain, portable = licence_policy.judge_kit(kit)
    print(plain.line(), portable.details(), sep="\n")  # what the docs quote
    assert plain.status != FORBIDDEN, plain.details()
    assert portable.status == FORBIDDEN, portable.details()
    copyleft_side, proprietary_side = portable.conflicts[0].sides
    assert any(c.name.startswith("libavcodec") for c in copyleft_side)
    assert any(c.ref == "kit/lib/libcudart.so.13" for c in proprietary_side)
    assert "bullseye-sysroot-cuda130" in portable.details()
