"""Per-kit results of a rebuild run (`result-<kit>.json`, one per build leg), and the run's
summary of them (docs/watch.md, "When a kit fails")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from ninfer_kits.errors import BadInput
from ninfer_kits.files import atomic
from ninfer_kits.matrix.names import HEX_REVISION

BUILD: Final = ("success", "failure", "skipped")
# unlanded: released, but the ledger file did not land, so the next run would build it again
PUBLISH: Final = ("published", "reproduced", "conflict", "failure", "unlanded", "skipped")
FAILED_PUBLISH: Final = ("conflict", "failure", "unlanded")
FIELDS: Final = ("kit", "revision", "reason", "build", "publish", "tag")
KIT_NAME: Final = re.compile(r"[A-Za-z0-9_.+-]+")  # a matrix kit id; it names a file here
PREFIX, SUFFIX = "result-", ".json"


@dataclass(frozen=True, kw_only=True)
class Result:
    """One kit's outcome in a run: `build` ∈ BUILD, `publish` ∈ PUBLISH."""

    kit: str
    revision: str
    reason: str
    build: str
    publish: str
    tag: str

    @property
    def failed(self) -> bool:
        return self.build == "failure" or self.publish in FAILED_PUBLISH

    @property
    def outcome(self) -> str:
        """failed, published, reproduced or skipped (built but not published counts here)."""
        if self.failed:
            return "failed"
        return self.publish if self.publish in ("published", "reproduced") else "skipped"


def problem(result: Result) -> str | None:
    if KIT_NAME.fullmatch(result.kit) is None or result.kit in (".", ".."):
        return f"kit {result.kit!r} is not a kit name (letters, digits, _ . + -)"
    if result.revision and HEX_REVISION.fullmatch(result.revision) is None:
        return f"revision {result.revision!r} is not a revision (7 to 40 hex digits, or empty)"
    if result.build not in BUILD:
        return f"build {result.build!r} is not one of {', '.join(BUILD)}"
    if result.publish not in PUBLISH:
        return f"publish {result.publish!r} is not one of {', '.join(PUBLISH)}"
    return None


def result_path(folder: Path, kit: str) -> Path:
    return folder / f"{PREFIX}{kit}{SUFFIX}"


def write_result(folder: Path, result: Result) -> Path:
    """Write `result-<kit>.json` into `folder` (made if missing) atomically; its path."""
    wrong = problem(result)
    if wrong:
        raise BadInput(f"summary --write-result: {wrong}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInput(f"summary --write-result: cannot make the folder {folder}: "
                       f"{error.strerror or error}") from None
    path = result_path(folder, result.kit)
    data = (json.dumps(asdict(result), indent=1) + "\n").encode()
    atomic.write_file(path, data)
    return path


def read_results(folder: Path) -> list[Result]:
    """Every `result-*.json` below `folder`, by kit; BadInput for a non-result or a kit twice."""
    if not folder.is_dir():
        raise BadInput(f"summary: {folder}: no such folder (the folder of result-<kit>.json "
                       f"files)")
    found: dict[str, tuple[Path, Result]] = {}
    for path in sorted(folder.rglob(f"{PREFIX}*{SUFFIX}")):
        if not path.is_file():
            continue
        result = read_result(path)
        if result.kit in found:
            raise BadInput(f"summary: kit {result.kit} has two results: {found[result.kit][0]} "
                           f"and {path}")
        found[result.kit] = (path, result)
    return [found[kit][1] for kit in sorted(found)]


def read_result(path: Path) -> Result:
    try:
        data = json.loads(path.read_bytes())
    except OSError as error:
        raise BadInput(f"summary: cannot read {path}: {error.strerror or error}") from None
    except (UnicodeDecodeError, ValueError) as error:
        raise BadInput(f"summary: {path}: not JSON ({error})") from None
    if not isinstance(data, dict):
        raise BadInput(f"summary: {path}: not a kit result (a JSON object with "
                       f"{', '.join(FIELDS)})")
    missing = [key for key in FIELDS if not isinstance(data.get(key), str)]
    if missing:
        raise BadInput(f"summary: {path}: not a kit result: "
                       f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing "
                       f"or not a string")
    result = Result(**{key: data[key] for key in FIELDS})
    wrong = problem(result)
    if wrong:
        raise BadInput(f"summary: {path}: {wrong}")
    if path.name != result_path(path.parent, result.kit).name:
        raise BadInput(f"summary: {path}: holds the result of kit {result.kit}, whose file is "
                       f"{PREFIX}{result.kit}{SUFFIX}")
    return result


@dataclass(frozen=True)
class Totals:
    kits: int
    built: int
    published: int
    reproduced: int
    skipped: int
    failed: int

    def __str__(self) -> str:
        return (f"{self.kits} kit{'' if self.kits == 1 else 's'}: {self.built} built, "
                f"{self.published} published, {self.reproduced} reproduced, "
                f"{self.skipped} skipped, {self.failed} failed")


def totals(results: Iterable[Result]) -> Totals:
    items = list(results)
    outcomes = [r.outcome for r in items]
    return Totals(len(items), sum(r.build == "success" for r in items),
                  outcomes.count("published"), outcomes.count("reproduced"),
                  outcomes.count("skipped"), outcomes.count("failed"))


_MARK = {"success": "✅ success", "failure": "❌ failure", "published": "✅ published",
         "reproduced": "♻️ reproduced", "conflict": "❌ conflict",
         "unlanded": "❌ published, ledger not landed", "skipped": "skipped"}


def markdown(results: list[Result]) -> str:
    """The run's summary: a table of every kit, then the totals."""
    lines = ["### Rebuild", ""]
    if results:
        lines += ["| kit | revision | why | build | publish | tag |", "|---|---|---|---|---|---|"]
        for r in results:
            cells = (f"`{r.kit}`", f"`{r.revision[:12]}`" if r.revision else "",
                     _cell(r.reason), _MARK.get(r.build, r.build),
                     _MARK.get(r.publish, r.publish), f"`{_cell(r.tag)}`" if r.tag else "")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    else:
        lines += ["No kit was rebuilt.", ""]
    lines.append(f"**{totals(results)}**")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text as one markdown table cell: one line, `|` escaped."""
    return " ".join(text.split()).replace("|", "\\|").replace("`", "'")
