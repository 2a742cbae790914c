"""TOML text read with tomllib, every way it fails on the text one error: what each reader of a
TOML file in the program (the matrix and the shipped data files through tables.py, the ledger,
the matrix a `.pyz` build reads) calls, so that none of them meets a failure the others
handle and it does not."""

from __future__ import annotations

from typing import Any


class InvalidToml(ValueError):
    """The text is not TOML this program can read; the words say why (tomllib's carry the line
    and column)."""


def loads(text: str) -> dict[str, Any]:
    """`tomllib.loads`, its failures on the text as InvalidToml: TOMLDecodeError, an integer
    of more digits than int() takes (sys.int_info), and arrays or inline tables nested deeper
    than its recursion reaches (`[[[[…` 2,000 deep is RecursionError there)."""
    import tomllib  # not at start-up: only the commands that read a TOML file need it

    try:
        return tomllib.loads(text)
    except RecursionError:
        raise InvalidToml("arrays or inline tables nested too deep") from None
    except ValueError as error:  # TOMLDecodeError is one
        raise InvalidToml(str(error)) from None
