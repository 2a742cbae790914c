"""ninfer_kits.records.NamedTuple makes the classes typing.NamedTuple makes, without typing."""

from __future__ import annotations

import pickle
import subprocess
import sys
import typing

import pytest

from ninfer_kits.records import NamedTuple


class Point(NamedTuple):
    """A point."""

    x: int
    y: int = 0
    label: str = ""

    @property
    def norm(self) -> int:
        return abs(self.x) + abs(self.y)

    def moved(self, by: int) -> Point:
        return self._replace(x=self.x + by)


class TypingPoint(typing.NamedTuple):
    """A point."""

    x: int
    y: int = 0
    label: str = ""


def test_the_class_is_typings() -> None:
    point = Point(1, label="a")
    assert point == (1, 0, "a") and isinstance(point, tuple)
    assert Point._fields == TypingPoint._fields == ("x", "y", "label")
    assert Point._field_defaults == TypingPoint._field_defaults == {"y": 0, "label": ""}
    assert repr(point) == "Point(x=1, y=0, label='a')"
    assert point.norm == 1 and point.moved(2) == Point(3, 0, "a")
    assert Point.__doc__ == "A point." and Point.__module__ == __name__
    assert Point.__qualname__ == "Point" and Point.__bases__ == (tuple,)
    assert pickle.loads(pickle.dumps(point)) == point
    assert list(Point.__annotations__) == ["x", "y", "label"]


def test_what_typing_refuses_is_refused() -> None:
    with pytest.raises(TypeError, match="Non-default namedtuple field y cannot follow"):
        class Bad(NamedTuple):
            x: int = 0
            y: int

    with pytest.raises(AttributeError, match="Cannot overwrite NamedTuple attribute _make"):
        class Worse(NamedTuple):
            x: int

            def _make(self) -> None: ...


def test_the_inspect_command_does_not_load_typing() -> None:
    probe = ("import sys; from ninfer_kits import cli; from ninfer_kits.commands import "
             "inspect_cmd; from ninfer_kits.inspector import inspection; "
             "from ninfer_kits.runtime_facts import runtime_facts; runtime_facts(); "
             "print(sorted(m for m in ('typing', 'tomllib', 'pathlib', 'dataclasses', 'shutil', "
             "'tarfile', 'tempfile') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
