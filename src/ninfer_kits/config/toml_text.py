"""TOML text read with tomllib, every way it fails on the text one error (InvalidToml), so that
no reader of a TOML file meets a failure the others handle and it does not."""

from __future__ import annotations

from typing import Any


class InvalidToml(ValueError):
    """The text is not TOML this program can read (tomllib's words carry line and column)."""


def loads(text: str) -> dict[str, Any]:
    """`tomllib.loads`, its failures on the text as InvalidToml: TOMLDecodeError, an integer of
    more digits than int() takes, nesting deeper than its recursion (`[[[[…` 2,000 deep)."""
    import tomllib  # not at start-up: only the commands that read a TOML file need it

    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InvalidToml("arrays or inline tables nested too deep") from None
    except ValueError as error:  # TOMLDecodeError is one
        raise InvalidToml(str(error)) from None


def with_keys(text: str, table: str, pairs: list[tuple[str, str]]) -> str:
    """`text` with each (key, string value) of `pairs` set in its existing `[table]`, everything
    else as it was (comments, order, spacing). tomllib has no writer and a few keys need none:
    the caller parses the result again to check it says what was meant."""
    lines = text.splitlines(keepends=True)
    header = f"[{table}]"
    start = next((i for i, line in enumerate(lines) if line.strip() == header), None)
    if start is None:
        raise InvalidToml(f"no {header} table")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")),
               len(lines))
    for key, value in pairs:
        written = f'{key} = "{_basic(value)}"\n'
        at = next((i for i in range(start + 1, end)
                   if "=" in lines[i] and lines[i].split("=", 1)[0].strip() == key), None)
        if at is None:  # after the table's last line of content (a multi-line array's end)
            at = max((i for i in range(start + 1, end)
                      if lines[i].strip() and not lines[i].lstrip().startswith("#")),
                     default=start) + 1
            if not lines[at - 1].endswith("\n"):
                lines[at - 1] += "\n"
            lines.insert(at, written)
            end += 1
        else:
            lines[at] = written
    return "".join(lines)


def _basic(value: str) -> str:
    """A TOML basic string's contents."""
    return "".join({"\\": "\\\\", '"': '\\"'}.get(char, char) if char.isprintable()
                   else f"\\u{ord(char):04x}" for char in value)
