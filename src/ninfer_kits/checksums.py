"""SHA256SUMS and SHA1SUMS: the checksum files beside a kit, written and read.

Both are what `sha256sum`/`sha1sum` write and `-c` reads: `<hex>  <name>` lines, sorted by
name. Build writes them, publish uploads them, fetch checks a download against the release's
and verify a tarball against the ones beside it, all through this one reader: a `*` (binary)
marker and upper-case hex are read as sha256sum writes them, a name listed twice and a line
that is not a checksum line are refused naming the line, and blank lines are allowed only at
the end (an editor's final newline). A line may end in CRLF, as `sha256sum -c` (coreutils)
accepts it. A name holding any other control character (an escape sequence that would reach
the terminal in a message) is refused, shown escaped: no name read here is unprintable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ninfer_kits.atomic import PackedFile, write_file
from ninfer_kits.errors import BadInput, CheckFailed, NinferKitsError

SHA256 = 64  # hex digits of each digest
SHA1 = 40
_LINE = re.compile(r"(?P<hash>[0-9a-fA-F]+) [ *](?P<name>.+)")


def render_sums(digests: Mapping[str, str], width: int = SHA256) -> str:
    """The checksum file (name → hex digest of `width` digits) as `sha256sum -c` and
    `sha1sum -c` read it, sorted by name."""
    return "".join(_line(name, digests[name], width) for name in sorted(digests))


def _line(name: str, digest: str, width: int) -> str:
    # sha256sum escapes \n and \\ with a leading backslash; asset names never need them, nor
    # any other control character (parse_sums refuses them).
    if not name or "\\" in name or not name.isprintable():
        raise BadInput(f"asset name {name!r} cannot be listed in a checksum file")
    if not re.fullmatch(f"[0-9a-fA-F]{{{width}}}", digest):
        raise BadInput(f"{name}: {digest!r} is not a hex digest of {width} digits")
    return f"{digest.lower()}  {name}\n"


def write_sha256sums(dest: Path, files: Mapping[str, str]) -> PackedFile:
    """Write SHA256SUMS (asset name → sha256 hex) atomically."""
    return write_file(dest, render_sums(files, SHA256).encode("utf-8"))


def write_sha1sums(dest: Path, files: Mapping[str, str]) -> PackedFile:
    """Write SHA1SUMS (tarball name → SHA-1 hex) atomically."""
    return write_file(dest, render_sums(files, SHA1).encode("utf-8"))


def parse_sums(text: str, width: int, source: str,
               failure: type[NinferKitsError] = CheckFailed) -> dict[str, str]:
    """`<hex>  <name>` lines → name → lower-case hex; `failure` (naming `source` and the line)
    for anything else."""
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
    """Parse a SHA256SUMS file into asset name → lower-case sha256 hex; BadInput names the
    line that is wrong."""
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    return parse_sums(text, SHA256, str(path), BadInput)
