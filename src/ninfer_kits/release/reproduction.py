"""REPRODUCTION.json: what an independent rebuild found (format: docs/repro.md), published with
the release. `compared` names the tarballs it was compared with, so publish refuses a record of
another build; `date` is the one time in a release that is no build input. Standard library only.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ninfer_kits.errors import BadInput

NAME = "REPRODUCTION.json"
SCHEMA_VERSION = 1
IDENTICAL, DIFFERS, FAILED = "identical", "differs", "failed"
RESULTS = (IDENTICAL, DIFFERS, FAILED)
MAX_DIFFERENCES = 20  # a short summary; the reproduce job's log has the whole report
MAX_TEXT = 500  # characters of one summary or difference line
_KEYS = ("schema_version", "kit", "tag", "compared", "result", "summary", "differences", "date",
         "run")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ReproductionInvalid(BadInput):
    """A REPRODUCTION.json that does not read (the message names the file and the key)."""


@dataclass(frozen=True, kw_only=True)
class Reproduction:
    kit: str
    tag: str
    compared: tuple[tuple[str, str], ...]  # (tarball, sha256) of the kit compared with, sorted
    result: str  # one of RESULTS
    summary: str
    differences: tuple[str, ...]  # at most MAX_DIFFERENCES, one line each
    date: str  # UTC, YYYY-MM-DDTHH:MM:SSZ: when the reproduction ran
    run: str  # who ran it: the GitHub Actions run's URL, or a description

    @property
    def identical(self) -> bool:
        return self.result == IDENTICAL

    @property
    def day(self) -> str:
        return self.date[:10]

    def words(self) -> str:
        """One line for verify and the notes: "independently reproduced on <date> by <run>"."""
        if self.identical:
            return f"independently reproduced on {self.day} by {self.run} (identical bytes)"
        if self.result == DIFFERS:
            return (f"NOT reproduced: an independent rebuild on {self.day} by {self.run} "
                    f"differs ({self.summary})")
        return (f"NOT reproduced: the independent rebuild on {self.day} by {self.run} failed "
                f"({self.summary})")

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "kit": self.kit, "tag": self.tag,
                "compared": dict(self.compared), "result": self.result,
                "summary": self.summary, "differences": list(self.differences),
                "date": self.date, "run": self.run}


NOT_REPRODUCED = "not independently reproduced (the release has no REPRODUCTION.json)"


def make(*, kit: str, tag: str, compared: Mapping[str, str], result: str, summary: str,
         differences: Sequence[str], run: str,
         when: datetime.datetime | None = None) -> Reproduction:
    """A record of a reproduction run now (or `when`); differences cut to MAX_DIFFERENCES."""
    shown = [_short(line) for line in differences[:MAX_DIFFERENCES]]
    if len(differences) > MAX_DIFFERENCES:
        shown[-1] = f"… and {len(differences) - MAX_DIFFERENCES + 1} more (the job's log)"
    moment = (when or datetime.datetime.now(datetime.UTC)).astimezone(datetime.UTC)
    record = Reproduction(kit=kit, tag=tag, compared=tuple(sorted(compared.items())),
                          result=result, summary=_short(summary), differences=tuple(shown),
                          date=moment.strftime("%Y-%m-%dT%H:%M:%SZ"), run=_short(run))
    return parse(render(record), "the record made")  # what is written reads back


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TEXT else line[:MAX_TEXT - 1] + "…"


def render(record: Reproduction) -> bytes:
    """The file's bytes: the same record is the same bytes."""
    return (json.dumps(record.to_json(), sort_keys=True, indent=2, ensure_ascii=False)
            + "\n").encode("utf-8")


def read(path: Path) -> Reproduction:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{path}: no such reproduction record") from None
    except OSError as error:
        raise BadInput(f"{path}: cannot read it ({error.strerror or error})") from None
    return parse(data, str(path))


def parse(data: bytes, source: str) -> Reproduction:
    """The record in `data`; ReproductionInvalid names `source` and the key that is wrong."""
    if len(data) > 1 << 20:
        raise ReproductionInvalid(f"{source}: {len(data):,} bytes, more than a reproduction "
                                  f"record holds")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ReproductionInvalid(f"{source}: not JSON ({str(error)[:120]})") from None
    if not isinstance(document, dict):
        raise ReproductionInvalid(f"{source}: a JSON object expected")
    missing = [key for key in _KEYS if key not in document]
    extra = sorted(key for key in document if key not in _KEYS)
    if missing or extra:
        said = "; ".join(part for part in (
            f"key {', '.join(map(repr, missing))} missing" if missing else "",
            f"unknown key {', '.join(map(repr, extra))}" if extra else "") if part)
        raise ReproductionInvalid(f"{source}: {said} (it holds {', '.join(_KEYS)})")
    if document["schema_version"] != SCHEMA_VERSION or isinstance(document["schema_version"],
                                                                  bool):
        raise ReproductionInvalid(f"{source}: key 'schema_version' must be {SCHEMA_VERSION}, "
                                  f"got {_shown(document['schema_version'])}")
    text = {key: _text(document, key, source)
            for key in ("kit", "tag", "result", "summary", "date", "run")}
    if text["result"] not in RESULTS:
        raise ReproductionInvalid(f"{source}: key 'result' must be one of "
                                  f"{', '.join(RESULTS)}, got {_shown(text['result'])}")
    if _DATE.fullmatch(text["date"]) is None or not _real_date(text["date"]):
        raise ReproductionInvalid(f"{source}: key 'date' must be a UTC time "
                                  f"YYYY-MM-DDTHH:MM:SSZ, got {_shown(text['date'])}")
    compared = document["compared"]
    if not isinstance(compared, dict) or not compared or not all(
            isinstance(name, str) and name and isinstance(digest, str)
            and _SHA256.fullmatch(digest) for name, digest in compared.items()):
        raise ReproductionInvalid(f"{source}: key 'compared' must map each tarball compared to "
                                  f"its sha256 (64 lowercase hex digits)")
    differences = document["differences"]
    if not isinstance(differences, list) or not all(isinstance(line, str)
                                                    for line in differences):
        raise ReproductionInvalid(f"{source}: key 'differences' must be a list of strings")
    if len(differences) > MAX_DIFFERENCES:
        raise ReproductionInvalid(f"{source}: key 'differences' holds {len(differences)} lines, "
                                  f"at most {MAX_DIFFERENCES}")
    if (text["result"] == IDENTICAL) != (not differences) and text["result"] != FAILED:
        raise ReproductionInvalid(f"{source}: key 'differences' must be empty when the result "
                                  f"is identical, and name what differs otherwise")
    return Reproduction(kit=text["kit"], tag=text["tag"],
                        compared=tuple(sorted(compared.items())), result=text["result"],
                        summary=text["summary"], differences=tuple(differences),
                        date=text["date"], run=text["run"])


def _real_date(text: str) -> bool:
    try:
        datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


def _text(document: Mapping[str, Any], key: str, source: str) -> str:
    value = document[key]
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT \
            or any(ord(char) < 32 for char in value):
        raise ReproductionInvalid(f"{source}: key {key!r} must be one line of text (1 to "
                                  f"{MAX_TEXT} characters), got {_shown(value)}")
    return value


def _shown(value: object) -> str:
    return repr(value)[:60]
