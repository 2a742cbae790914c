"""SHA256SUMS and SHA1SUMS, as `sha256sum`/`sha1sum` write and `-c` reads them: one reader for
build, publish, fetch and verify (what it accepts and refuses: DEVELOPING.md, "Release formats").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ninfer_kits.errors import BadInput, CheckFailed, NinferKitsError
from ninfer_kits.files.atomic import PackedFile, write_file

SHA256 = 64  # hex digits of each digest
SHA1 = 40
_LINE = re.compile(r"(?P<hash>[0-9a-fA-F]+) [ *](?P<name>.+)")


def render_sums(digests: Mapping[str, str], width: int = SHA256) -> str:
    """The checksum file (name → hex digest of `width` digits), sorted by name."""
    return "".join(_line(name, digests[name], width) for name in sorted(digests))


def _line(name: str, digest: str, width: int) -> str:
    # sha256sum escapes \n and \\; asset names never hold a control character
    if not name or "\\" in name or not name.isprintable():
        raise BadInput(f"asset name {name!r} cannot be listed in a checksum file")
    if not re.fullmatch(f"[0-9a-fA-F]{{{width}}}", digest):
        raise BadInput(f"{name}: {digest!r} is not a hex digest of {width} digits")
    return f"{digest.lower()}  {name}\n"


def write_sha256sums(dest: Path, files: Mapping[str, str]) -> PackedFile:
    return write_file(dest, render_sums(files, SHA256).encode("utf-8"))


def write_sha1sums(dest: Path, files: Mapping[str, str]) -> PackedFile:
    return write_file(dest, render_sums(files, SHA1).encode("utf-8"))


def parse_sums(text: str, width: int, source: str,
               failure: type[NinferKitsError] = CheckFailed) -> dict[str, str]:
    """`<hex>  <name>` lines → name → lower-case hex; `failure` naming the line otherwise."""
    lines = text.split("\n")
    while lines and not lines[-1]:
        lines.pop()  # the final newline ends the last line; it does not start another
    sums: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        match = _LINE.fullmatch(line.removesuffix("\r"))  # CRLF, as sha256sum -c reads it
        if match is None or len(match["hash"]) != width:
            raise failure(f"{source}:{number}: not a checksum line `<hex>  <name>`: "
                          f"{line[:80]!r}")
        name = match["name"]
        if not name.isprintable():
            raise failure(f"{source}:{number}: the name {name!r} holds a control character: "
                          f"refused")
        if name in sums:
            raise failure(f"{source}:{number}: {name!r} is listed twice")
        sums[name] = match["hash"].lower()
    return sums


def read_sha256sums(path: Path) -> dict[str, str]:
    """Asset name → lower-case sha256 hex; BadInput names the line that is wrong."""
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    return parse_sums(text, SHA256, str(path), BadInput)
