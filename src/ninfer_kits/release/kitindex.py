"""The kit index, index.json, made from the ledger alone so that a client picks its kit before
downloading (docs/index.md); each kit carries its ledger text, so fetch reads it through the
ledger's one reader. A key may be added, none renamed or removed without raising FORMAT.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ninfer_kits.errors import BadInput
from ninfer_kits.files.atomic import write_file
from ninfer_kits.release import ledger
from ninfer_kits.release.ledger import LedgerEntry, LedgerFlavour

FORMAT = 1
JSON_NAME = "index.json"
HTML_NAME = "index.html"
SCHEMA = "index.schema.json"  # in ninfer_kits/data/
MAX_SIZE = 64 << 20  # what a client reads of one: some ten thousand releases


def document(entries: Sequence[LedgerEntry]) -> dict[str, Any]:
    """The index of `entries` (ledger.read_all's order), as JSON data."""
    return {"format": FORMAT, "kits": [_kit(entry) for entry in entries]}


def render(index: Mapping[str, Any]) -> bytes:
    """index.json's bytes: one key per line, UTF-8, a final newline."""
    return (json.dumps(index, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _kit(entry: LedgerEntry) -> dict[str, Any]:
    reproduction = entry.reproduction
    return {
        "tag": entry.tag, "kit": entry.kit, "card": entry.card, "upstream": entry.upstream,
        "upstream_url": entry.upstream_url, "revision": entry.revision,
        "version": entry.version, "arch": entry.arch, "cuda_version": entry.cuda_version,
        "driver_minimum": entry.driver_minimum, "toolchain": entry.toolchain,
        "published_at": entry.published_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "stores": {store.name: {"location": store.location, **dict(store.details)}
                   for store in entry.stores},
        "floor": [{"requirement": requirement, "why": why} for requirement, why in entry.floor],
        "signed_by": entry.signed_by,
        "reproduction": None if reproduction is None else {
            "result": reproduction.result, "date": reproduction.date, "run": reproduction.run,
            "summary": reproduction.summary},
        "flavours": [_flavour(entry, flavour) for flavour in entry.flavour_facts()],
        "assets": [{"name": asset.name, "size": asset.size, "sha256": asset.sha256,
                    "sha1": asset.sha1, "urls": dict(asset.urls)} for asset in entry.assets],
        # read by fetch and kit-url through the ledger's reader; the keys above are for others
        "ledger": ledger.render(entry),
    }


def _flavour(entry: LedgerEntry, flavour: LedgerFlavour) -> dict[str, Any]:
    asset = entry.asset_named(flavour.asset)
    return {
        "flavour": flavour.flavour, "asset": asset.name, "size": asset.size,
        "sha256": asset.sha256, "urls": dict(asset.urls),
        "needs": None if flavour.needs is None else {
            "glibc": flavour.needs.glibc,
            "versions": {library: list(names) for library, names in flavour.needs.versions},
            "sonames": list(flavour.needs.sonames), "runpath": list(flavour.needs.runpath),
            "sass": list(flavour.needs.sass),
            "ptx": list(flavour.needs.ptx),
            "relocatable_sass": list(flavour.needs.relocatable_sass),
            "relocatable_ptx": list(flavour.needs.relocatable_ptx)},
        "distributions": None if flavour.meets is None else {
            "as_of": entry.distributions_as_of, "meets": list(flavour.meets),
            "not_known": list(flavour.not_known)},
    }


def write(folder: Path, index: Mapping[str, Any]) -> tuple[Path, ...]:
    """index.json and index.html in `folder`, each complete or not at all: (json, html)."""
    # fetch and kit-url never render the page
    from ninfer_kits.release.kitindex_page import render_page

    json_path, html_path = folder / JSON_NAME, folder / HTML_NAME
    write_file(json_path, render(index))
    write_file(html_path, render_page(index))
    return (json_path, html_path)


def mismatches(index: Mapping[str, Any], tag: str, held: Mapping[str, str]) -> list[str]:
    """Lines naming each asset of release `tag` whose hash differs between the index and
    `held` (name → sha256 the stores hold); an index without the tag is a mismatch too."""
    kit = next((kit for kit in index.get("kits", ()) if kit.get("tag") == tag), None)
    if kit is None:
        return [f"{tag} is not in the index"]
    problems = []
    listed = {asset["name"]: asset["sha256"] for asset in kit["assets"]}
    for flavour in kit["flavours"]:
        if listed.get(flavour["asset"]) != flavour["sha256"]:
            problems.append(f"{tag}: flavour {flavour['flavour']} says {flavour['asset']} is "
                            f"sha256 {flavour['sha256']}, its assets say "
                            f"{listed.get(flavour['asset'], 'nothing')}")
    for name, digest in held.items():
        if listed.get(name) != digest:
            problems.append(f"{tag}: {name} is sha256 {digest} on the stores, "
                            f"{listed.get(name, 'not listed')} in the index")
    problems += [f"{tag}: the index lists {name}, which the release does not hold"
                 for name in listed if name not in held]
    return problems


def stale(folder: Path, index: Mapping[str, Any]) -> list[Path]:
    """The index files in `folder` that are missing or not what `write` would write there."""
    with tempfile.TemporaryDirectory() as scratch:
        made = write(Path(scratch), index)
        return [folder / path.name for path in made
                if not (folder / path.name).is_file()
                or (folder / path.name).read_bytes() != path.read_bytes()]


def parse(data: bytes, source: str) -> tuple[LedgerEntry, ...]:
    """The releases of index.json, each read by the ledger's reader; BadInput names the fault."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise BadInput(f"{source}: not a kit index (invalid JSON: {str(error)[:100]})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        shown = document.get("format") if isinstance(document, dict) else None
        raise BadInput(f"{source}: not a kit index of format {FORMAT} (format {shown!r:.40})")
    kits = document.get("kits")
    if not isinstance(kits, list):
        raise BadInput(f"{source}: key 'kits' must be a list")
    return tuple(_entry(kit, f"{source}: kits[{number}]") for number, kit in enumerate(kits))


def _entry(kit: object, where: str) -> LedgerEntry:
    text = kit.get("ledger") if isinstance(kit, dict) else None
    if not isinstance(text, str):
        raise BadInput(f"{where}: no key 'ledger' (the release's ledger file)")
    entry = ledger.parse(text, f"{where}.ledger")
    if isinstance(kit, dict) and kit.get("tag") != entry.tag:
        raise BadInput(f"{where}: tag {kit.get('tag')!r:.80} is not its ledger's {entry.tag!r}")
    return entry


def read(path: Path) -> tuple[LedgerEntry, ...]:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise BadInput(f"cannot read the kit index {path}: {error.strerror or error}") from None
    return parse(data, str(path))
