"""`NamedTuple` record classes without importing `typing`, which costs a quick command such as
`inspect` about two milliseconds of its start-up (more than its own work on a small file).

    from ninfer_kits.records import TYPE_CHECKING, NamedTuple

    class Point(NamedTuple):
        x: int
        y: int = 0

mypy reads `typing.NamedTuple` there. At run time the class is made as typing.NamedTuple makes
it: `collections.namedtuple("Point", ["x", "y"], defaults=[0])` with the class's docstring,
methods and properties; its annotations are kept as the text they are written as (what
`from __future__ import annotations` leaves), never evaluated. Only the class form is offered.
`TYPE_CHECKING` is False at run time and True for mypy, like typing's.
"""

from __future__ import annotations

TYPE_CHECKING = False  # mypy takes a name so spelled as true, wherever it comes from

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    from collections import namedtuple as _namedtuple

    # As typing's: what a NamedTuple class body may not set, and what it sets but is not copied.
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _NamedTupleMeta(type):
        def __new__(cls, typename, bases, namespace):
            fields = dict(namespace.get("__annotations__", {}))
            defaults = []
            for name in fields:
                if name in namespace:
                    defaults.append(namespace[name])
                elif defaults:
                    raise TypeError(f"Non-default namedtuple field {name} cannot follow "
                                    f"default field{'s' * (len(defaults) > 1)}")
            record = _namedtuple(typename, list(fields), defaults=defaults,
                                 module=namespace["__module__"])
            record.__annotations__ = record.__new__.__annotations__ = fields
            for key, value in namespace.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"Cannot overwrite NamedTuple attribute {key}")
                if key not in _SPECIAL and key not in record._fields:
                    setattr(record, key, value)
            return record

    _NamedTupleBase = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})

    def NamedTuple(typename, fields=None, /, **kwargs):
        raise TypeError("ninfer_kits.records.NamedTuple: write a class (class X(NamedTuple))")

    NamedTuple.__mro_entries__ = lambda bases: (_NamedTupleBase,)
