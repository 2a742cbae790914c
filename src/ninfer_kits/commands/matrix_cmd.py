"""`ninfer-kits matrix`: what the pipeline builds, as a table, as JSON or for GitHub Actions."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from ninfer_kits.matrix import Kit, Matrix, Toolchain, add_matrix_argument, load_matrix
from ninfer_kits.oci.reference import parse_pin, parse_reference

JSON_SCHEMA_VERSION = 1

COLUMNS = ("KIT", "UPSTREAM", "BRANCH", "REVISION", "ARCH", "CARD", "TOOLCHAIN", "TAG", "ASSET")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_matrix_argument(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print every field as JSON")
    output.add_argument(
        "--github", action="store_true",
        help="print one line of JSON for `strategy.matrix` in GitHub Actions",
    )
    parser.add_argument("kits", nargs="*", metavar="KIT", help="show only these kits")


def execute(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    kits = matrix.select(args.kits)
    if args.json:
        print(json.dumps(json_document(matrix, kits), indent=2, sort_keys=True))
    elif args.github:
        print(json.dumps(github_matrix(kits), separators=(",", ":")))
    else:
        print(text_table(kits))
    return 0


def text_table(kits: Sequence[Kit]) -> str:
    rows = [COLUMNS, *(_row(kit) for kit in kits)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _row(kit: Kit) -> tuple[str, ...]:
    upstream = kit.upstream
    return (
        kit.id, upstream.repository, upstream.branch, upstream.revision or "branch head",
        kit.arch, kit.card, kit.toolchain.id,
        kit.render_tag(partial=True), kit.render_asset(partial=True),
    )


def json_document(matrix: Matrix, kits: Sequence[Kit]) -> dict[str, Any]:
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "matrix": str(matrix.path),
        # where `toolchain push` puts images, and the host the toolchains workflow logs in to
        "registry": None if matrix.registry is None else {
            "prefix": matrix.registry.prefix,
            "host": parse_reference(f"{matrix.registry.prefix}/x").registry},
        "kits": [_kit_json(kit) for kit in kits],
    }


def _kit_json(kit: Kit) -> dict[str, Any]:
    upstream, toolchain = kit.upstream, kit.toolchain
    return {
        "kit": kit.id,
        "arch": kit.arch,
        "arch_id": kit.arch_id,
        "cmake_arch": kit.cmake_arch,
        "card": kit.card,
        "tag_template": kit.tag,
        "asset_template": kit.asset,
        "portable": kit.portable,
        # Rendered from what matrix.toml pins; `pending` names what only a build can fill in.
        "tag": kit.render_tag(partial=True),
        "asset": kit.render_asset(partial=True),
        "pending": list(kit.pending()),
        "upstream": {
            "id": upstream.id,
            "repository": upstream.repository,
            "url": upstream.url,
            "source": upstream.source,
            "branch": upstream.branch,
            "revision": upstream.revision,
            "version_file": upstream.version_file,
            "version": upstream.version,
            "archs": list(upstream.archs),
            "min_cuda": upstream.min_cuda.text,
            "licenses": list(upstream.licenses),
            # Pairs, not an object: sort_keys would lose the order the options are given in.
            "cmake_options": [list(pair) for pair in upstream.cmake_options],
            "targets": [list(pair) for pair in upstream.targets],
        },
        "toolchain": {
            "id": toolchain.id,
            "dockerfile": toolchain.dockerfile,
            # The file a build uses: beside the matrix, else the one ninfer-kits ships.
            "dockerfile_path": str(toolchain.dockerfile_path),
            "base_image": toolchain.base_image,
            "build_args": dict(toolchain.build_args),
            "cuda": toolchain.cuda.text,
            "runtime_dockerfile": toolchain.runtime_dockerfile,
            "runtime_dockerfile_path": str(toolchain.runtime_dockerfile_path),
            "runtime_base_image": toolchain.runtime_base_image,
            "runtime_build_args": dict(toolchain.runtime_build_args),
            "runtime_packages": list(toolchain.runtime_packages),
            **_pins_json(toolchain),
        },
    }


def _pins_json(toolchain: Toolchain) -> dict[str, Any]:
    """The toolchain's pins, whether both are, and the registries a docker build of it pulls
    from (which rebuild.yml logs in to): docs/matrix.md."""
    pulled = (toolchain.image or toolchain.base_image,
              toolchain.runtime_image or toolchain.runtime_base_image)
    return {
        "image": toolchain.image,
        "runtime_image": toolchain.runtime_image,
        "pinned": bool(toolchain.image and toolchain.runtime_image),
        "registries": sorted({parse_pin(text).registry for text in pulled if "@" in text}),
    }


def github_matrix(kits: Sequence[Kit]) -> dict[str, Any]:
    return {"include": [{"kit": kit.id, "upstream": kit.upstream.id, "arch": kit.arch,
                         "toolchain": kit.toolchain.id, "card": kit.card} for kit in kits]}
