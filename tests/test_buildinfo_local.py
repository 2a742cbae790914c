"""BUILDINFO.txt of a local build names no docker toolchain it never used (`toolchain: host`,
`base_image: none …`); one written before, which named the matrix's toolchain, still reads."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

from ninfer_kits.inspector.inspection import inspect_path
from ninfer_kits.kit import buildinfo
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.log import Reporter
from ninfer_kits.matrix import load_matrix
from ninfer_kits.pipeline.builders import BuilderOptions, Compiled, make_builder
from ninfer_kits.pipeline.buildinfo_keys import make_buildinfo
from ninfer_kits.pipeline.recipe_report import read_recipe_report
from ninfer_kits.pipeline.source import SourceTree
from ninfer_kits.pipeline.state import Assembled, BuildRequest, Prepared
from test_recipe_report import report

from tools import ROOT, tool


def _buildinfo(tmp_path: Path, builder: str) -> BuildInfo:
    """BUILDINFO.txt from what a build has in hand when it writes it: the kit's real toolchain
    as the builder prepared it, a real ELF in kit/bin, the recipe's report."""
    kit = load_matrix(ROOT / "matrix.toml").kit("example")
    kit_root = tmp_path / "kit"
    (kit_root / "bin").mkdir(parents=True)
    (tmp_path / "hello.c").write_text("int main(void) { return 0; }\n")
    subprocess.run([tool("gcc"), "-O1", "-o", str(kit_root / "bin" / "ninfer"),
                    str(tmp_path / "hello.c")], check=True)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "recipe.json").write_text(json.dumps(report()))
    chosen = make_builder(builder, BuilderOptions())
    request = BuildRequest(kit=kit, builder=chosen, project=ROOT, dist_dir=tmp_path / "dist",
                           cache_dir=tmp_path / "cache", work_dir=tmp_path / "work")
    return make_buildinfo(
        request, Prepared(toolchain=chosen.preflight(kit, Reporter()), recipe_sha256="2" * 64),
        SourceTree(path=tmp_path, url="examples/engine", ref="main", revision="0" * 40,
                   commit_time=1735689600),
        Compiled(bin_dir=kit_root / "bin", report=read_recipe_report(tmp_path / "out"),
                 log=tmp_path / "build.log"),
        Assembled(kit_root=kit_root, licenses=()), inspect_path(kit_root / "bin"))


def test_a_local_build_names_the_host_not_a_docker_toolchain(tmp_path: Path) -> None:
    info = _buildinfo(tmp_path, "local")
    assert (info.builder, info.toolchain) == ("local", "host")
    assert info.base_image == "none (built on the host)"
    # no base image ID among the inputs (it is a run key, `none` for the local builder)
    assert "base_image_digest" not in buildinfo.render(info, with_run=False)
    text = buildinfo.render(info)
    assert "\ntoolchain: host\n" in text and "trixie-cuda130" not in text
    assert buildinfo.parse(text) == info


def test_an_older_local_buildinfo_naming_the_matrix_toolchain_still_reads(
        tmp_path: Path) -> None:
    info = _buildinfo(tmp_path, "local")
    older = buildinfo.render(dataclasses.replace(info, toolchain="trixie-cuda130"))
    assert buildinfo.parse(older).toolchain == "trixie-cuda130"
