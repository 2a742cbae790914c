"""TOML files that say where they are wrong: the matrix and every `data/*.toml` are read into a
root `Table` whose typed getters name file, line, table and key in each failure (ConfigError).
tomllib reports values, not places, so the raw text is scanned for lines. Only the mechanism:
each facts module keeps its own rules and cache."""

from __future__ import annotations

import datetime
import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import BadInput, ConfigError, Where


def did_you_mean(word: str, choices: Iterable[str], *, n: int = 1, form: str = "'{}'") -> str:
    """A '; did you mean ...?' suffix naming up to n close choices, or '' when none is close."""
    options = [form.format(c) for c in difflib.get_close_matches(word, list(choices), n=n)]
    if not options:
        return ""
    listed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
    return f"; did you mean {listed}?"


def unknown_name(kind: str, word: str, known: Sequence[str]) -> str:
    """`unknown kit 'x'; did you mean 'y'?`, or the known names when nothing is close."""
    hint = did_you_mean(word, known)
    if not hint:
        hint = f" (known: {', '.join(known)})" if known else ""
    return f"unknown {kind} {quote(word)}{hint}"


def printable(text: str) -> str:
    # Messages are printed as one line; a control character from the file must not break that.
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def quote(text: str) -> str:
    return f"'{printable(text)}'"


def _kind(value: object) -> str:
    kinds: tuple[tuple[type, str], ...] = (
        (bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
        (list, "an array"), (dict, "a table"), (datetime.datetime, "a date-time"),
        (datetime.date, "a date"), (datetime.time, "a time"),
    )
    return next((name for kind, name in kinds if isinstance(value, kind)), "nothing")


def _expected(what: str, value: object) -> str:
    return f"expected {what}, got {_kind(value)}"


_KEY_PART = re.compile(r"""[ \t]*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')[ \t]*""")


def _key_path(line: str, pos: int) -> tuple[tuple[str, ...], int] | None:
    """Parse a dotted TOML key (bare or quoted parts) starting at pos."""
    parts: list[str] = []
    while (match := _KEY_PART.match(line, pos)) is not None:
        bare, basic, literal = match.groups()
        parts.append(bare or literal or _unescape(basic or ""))
        pos = match.end()
        if not line.startswith(".", pos):
            return tuple(parts), pos
        pos += 1
    return None


def _unescape(basic: str) -> str:
    try:
        value = json.loads(f'"{basic}"')
    except ValueError:
        return basic
    return value if isinstance(value, str) else basic


def _header(line: str, brackets: int = 1) -> tuple[str, ...] | None:
    """The path of a `[table]` header (`[[array]]` with brackets=2), else None."""
    parsed = _key_path(line, brackets) if line.startswith("[" * brackets) else None
    if parsed is None or not line.startswith("]" * brackets, parsed[1]):
        return None
    rest = line[parsed[1] + brackets :].strip()
    return parsed[0] if not rest or rest.startswith("#") else None


def _key_line(line: str) -> tuple[str, ...] | None:
    parsed = _key_path(line, 0)
    return parsed[0] if parsed is not None and line.startswith("=", parsed[1]) else None


def _opens_multiline_string(line: str) -> str | None:
    return next((quote for quote in ('"""', "'''") if line.count(quote) % 2), None)


class Locator:
    """Finds the line of a table or key in the raw text, scanned when a line is first asked for:
    a file that reads well (every ledger of a kit index) never pays for it."""

    def __init__(self, text: str) -> None:
        self._text: str | None = text
        self.headers: dict[tuple[str, ...], int] = {}
        self.keys: dict[tuple[str, ...], list[tuple[tuple[str, ...], int]]] = {(): []}

    def _scan(self, text: str) -> None:
        section: tuple[str, ...] | None = ()
        arrays: dict[tuple[str, ...], int] = {}  # [[name]]: how many items so far
        in_string: str | None = None
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.strip(" \t\r")
            if in_string is not None:
                in_string = None if in_string in line else in_string
                continue
            if line.startswith("["):
                # Item N of an array of tables is the table (name, "N"), counted from 1, as
                # Table.tables names it; a header below an item belongs to that item.
                array = _header(line, 2)
                if array is not None:
                    arrays[array] = arrays.get(array, 0) + 1
                    section = (*array, str(arrays[array]))
                else:
                    section = _header(line)
                    owner = next((a for a in arrays if section and section[:len(a)] == a), None)
                    if section is not None and owner is not None:
                        section = (*owner, str(arrays[owner]), *section[len(owner):])
                if section is not None:
                    self.headers.setdefault(section, number)
                    self.keys.setdefault(section, [])
                continue
            key = _key_line(line)
            if key is not None and section is not None:
                self.keys[section].append((key, number))
            in_string = _opens_multiline_string(line)

    def line_of(self, path: tuple[str, ...]) -> int | None:
        """The line defining path, else that of its nearest enclosing table header."""
        if self._text is not None:
            text, self._text = self._text, None
            self._scan(text)
        for depth in range(len(path), -1, -1):
            section = path[:depth]
            if section not in self.keys:
                continue
            line = self._best_key_line(section, path[depth:])
            if line is not None:
                return line
            if depth:
                return self.headers[section]
        return None

    def _best_key_line(self, section: tuple[str, ...], rest: tuple[str, ...]) -> int | None:
        best, best_line = 0, None
        for key, line in self.keys[section]:
            shared = _common_prefix(key, rest)
            if shared > best:
                best, best_line = shared, line
        return best_line


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        count += 1
    return count


def table_name(parts: tuple[str, ...]) -> str:
    quoted = (p if re.fullmatch(r"[A-Za-z0-9_-]+", p) else json.dumps(p) for p in parts)
    return printable(".".join(quoted))


@dataclass(frozen=True)
class Source:
    path: Path
    locator: Locator
    shown: str = ""  # how messages name it where that is not a path (an index entry's ledger)


@dataclass(frozen=True)
class Table:
    """One TOML table with its place in the file, so that every check can say where it failed."""

    source: Source
    parts: tuple[str, ...]
    data: Mapping[str, object]

    @property
    def id(self) -> str:
        return self.parts[-1]

    def error(self, key: str, message: str) -> ConfigError:
        line = self.source.locator.line_of(self.parts + ((key,) if key else ()))
        where = Where(self.source.shown or self.source.path, table_name(self.parts),
                      printable(key), line)
        return ConfigError(where, printable(message))

    def check_keys(self, required: Sequence[str], optional: Sequence[str] = ()) -> None:
        known = (*required, *optional)
        for key in self.data:
            if key not in known:
                raise self.error(key, unknown_name("key", key, known))
        for key in required:
            if key not in self.data:
                raise self.error(key, f"missing required key {quote(key)}")

    def text(self, key: str, pattern: re.Pattern[str] | None = None, *,
             empty: bool = False) -> str:
        """A non-blank string (or "" when `empty`), matching `pattern` when one is given."""
        value = self.data.get(key)
        if not isinstance(value, str):
            raise self.error(key, _expected("a string", value))
        if not value.strip():
            if empty and not value:
                return value
            raise self.error(key, "must not be empty")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.error(key, f"{value!r} is not of the form {pattern.pattern}")
        return value

    def optional_text(self, key: str, *, empty: bool = False) -> str | None:
        return self.text(key, empty=empty) if key in self.data else None

    def integer(self, key: str) -> int:
        value = self.data.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, _expected("an integer", value))
        return value

    def boolean(self, key: str) -> bool:
        value = self.data.get(key)
        if not isinstance(value, bool):
            raise self.error(key, _expected("a boolean", value))
        return value

    def flag(self, key: str, default: bool = False) -> bool:
        """An optional true/false."""
        if key not in self.data:
            return default
        value = self.data[key]
        if not isinstance(value, bool):
            raise self.error(key, _expected("true or false", value))
        return value

    def date(self, key: str) -> datetime.date:
        value = self.data.get(key)
        if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
            raise self.error(key, _expected("a date (YYYY-MM-DD, unquoted)", value))
        return value

    def regex(self, key: str) -> re.Pattern[str]:
        value = self.text(key)
        try:
            return re.compile(value)
        except re.error as error:
            raise self.error(key, f"must be a regular expression ({error})") from None

    def texts(self, key: str) -> tuple[str, ...]:
        """A non-empty array of non-empty strings."""
        value = self.data.get(key)
        if not isinstance(value, list):
            raise self.error(key, _expected("an array of strings", value))
        if not value:
            raise self.error(key, "must not be empty")
        for item in value:
            if not isinstance(item, str):
                raise self.error(key, _expected("an array of strings", item) + " in it")
            if not item.strip():
                raise self.error(key, "must not contain an empty string")
        return tuple(value)

    def table(self, key: str, *, optional: bool = False) -> Table:
        """A sub-table; an empty one when it is `optional` and absent."""
        value = self.data.get(key, {} if optional else None)
        if not isinstance(value, dict):
            raise self.error(key, _expected("a table", value))
        return Table(self.source, (*self.parts, key), value)

    def strings(self, key: str, pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
        """An array of distinct strings, possibly empty, each matching `pattern` if given."""
        value = self.data.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(key, _expected("an array of strings", value))
        for item in value:
            if pattern is not None and not pattern.fullmatch(item):
                raise self.error(key, f"{item!r} is not of the form {pattern.pattern}")
        if len(set(value)) != len(value):
            raise self.error(key, "names an entry twice")
        return tuple(value)

    def integers(self, key: str) -> tuple[int, ...]:
        """An array of positive integers, possibly empty."""
        value = self.data.get(key)
        if not isinstance(value, list) or not all(isinstance(item, int) and not isinstance(
                item, bool) and item > 0 for item in value):
            raise self.error(key, _expected("an array of positive integers", value))
        return tuple(value)

    def tables(self, key: str) -> tuple[Table, ...]:
        """An array of tables ([[key]]), possibly absent: item N is the table (key, "N")."""
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
            raise self.error(key, _expected("an array of tables", value))
        return tuple(Table(self.source, (*self.parts, key, str(number)), item)
                     for number, item in enumerate(value, start=1))

    def text_pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        """A table of strings, as (key, value) pairs in file order."""
        sub = self.table(key)
        return tuple((name, sub.text(name)) for name in sub.data)


def read_data_file(path: Path, what: str) -> Table:
    """A TOML file as the root Table: BadInput when unreadable, ConfigError naming file and line
    when not UTF-8 or not TOML. `what` names it in messages ("the distributions file")."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInput(f"{path}: no such {what.removeprefix('the ')}") from None
    except OSError as error:
        raise BadInput(f"{path}: cannot read {what}: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(Where(path, line=line), "not valid UTF-8 text") from None
    return parse(path, text)


def parse(path: Path, text: str) -> Table:
    """TOML text read from `path`, as its root Table; ConfigError when it is not TOML."""
    from ninfer_kits.config import toml_text

    try:
        raw = toml_text.loads(text)
    except toml_text.InvalidToml as error:
        message = str(error)
        found = re.search(r"\(at line ([0-9]+), column [0-9]+\)", message)
        line = int(found.group(1)) if found else None
        if line is None and "end of document" in message:
            line = len(text.rstrip("\n").split("\n"))
        raise ConfigError(Where(path, line=line), f"invalid TOML: {printable(message)}") from None
    return Table(Source(path, Locator(text)), (), raw)
