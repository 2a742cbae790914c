"""What build/recipe.py reports about one compile (OUT/recipe.json), checked once into a typed
record. The recipe and this reader ship together: a key this reader does not know is an error."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ninfer_kits.errors import CheckFailed

REPORT_FILE: Final = "recipe.json"
SCHEMA: Final = 1  # build/recipe.py REPORT_SCHEMA


class RecipeReportInvalid(CheckFailed):
    """recipe.json is missing or does not say what the recipe promises to say."""


@dataclass(frozen=True, kw_only=True)
class CcacheStats:
    """This build's compile calls as ccache counted them."""

    calls: int
    hits: int
    misses: int
    uncacheable: int  # calls that were neither a hit nor a miss: ccache could not cache them
    hit_rate: str  # "97.5%", or "n/a (no compile calls)"


@dataclass(frozen=True, kw_only=True)
class RecipeReport:
    arch: str  # CMake's form: "86", "120a"
    jobs: int
    configure_seconds: float
    build_seconds: float
    compile_seconds: float
    cmake_version: str
    ninja_version: str
    nvcc_version: str
    cmake_options: tuple[str, ...]  # ("-DCMAKE_BUILD_TYPE=Release", ...), as given to CMake
    targets: tuple[str, ...]
    cxx_compiler: str  # "GNU 12.2.0"; "unknown" when CMake did not say
    cuda_compiler: str  # "NVIDIA 13.0.88"
    deterministic_flags: tuple[tuple[str, str], ...]
    ccache: CcacheStats | None = None  # None: compiled without ccache
    build_folder: str = "fresh"  # or "kept (N source entries changed)": an incremental build


def read_recipe_report(out: Path) -> RecipeReport:
    """OUT/recipe.json, checked; RecipeReportInvalid names the file and the key."""
    path = out / REPORT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecipeReportInvalid(f"{path}: the recipe wrote no report") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise RecipeReportInvalid(f"{path}: not JSON ({error})") from None
    return parse_recipe_report(data, str(path))


def parse_recipe_report(data: object, source: str = REPORT_FILE) -> RecipeReport:
    if not isinstance(data, dict):
        raise RecipeReportInvalid(f"{source}: expected a JSON object")
    fields = _Fields(data, source)
    if fields.integer("schema") != SCHEMA:
        raise RecipeReportInvalid(f"{source}: schema {data['schema']!r}; this ninfer-kits reads "
                                  f"{SCHEMA} (the recipe and the package must come together)")
    report = RecipeReport(
        arch=fields.text("arch"), jobs=fields.integer("jobs"),
        configure_seconds=fields.number("configure_seconds"),
        build_seconds=fields.number("build_seconds"),
        compile_seconds=fields.number("compile_seconds"),
        cmake_version=fields.text("cmake_version"), ninja_version=fields.text("ninja_version"),
        nvcc_version=fields.text("nvcc_version"),
        cmake_options=fields.texts("cmake_options"), targets=fields.texts("targets"),
        cxx_compiler=_compiler(fields, "cxx"), cuda_compiler=_compiler(fields, "cuda"),
        deterministic_flags=tuple(sorted(fields.mapping("deterministic_flags").items())),
        ccache=_ccache(fields), build_folder=fields.text("build_folder", default="fresh"),
    )
    fields.check_all_read()
    if report.jobs < 1:
        raise RecipeReportInvalid(f"{source}: key 'jobs' is {report.jobs}; at least 1")
    return report


def _compiler(fields: _Fields, language: str) -> str:
    name = fields.text(f"{language}_compiler_id", default="")
    version = fields.text(f"{language}_compiler_version", default="")
    return f"{name} {version}".strip() or "unknown"


def _ccache(fields: _Fields) -> CcacheStats | None:
    if "ccache_calls" not in fields.data:
        return None
    return CcacheStats(calls=fields.integer("ccache_calls"), hits=fields.integer("ccache_hits"),
                       misses=fields.integer("ccache_misses"),
                       uncacheable=fields.integer("ccache_uncacheable"),
                       hit_rate=fields.text("ccache_hit_rate"))


class _Fields:
    """Typed reads from the report's object, remembering which keys were read."""

    def __init__(self, data: Mapping[str, object], source: str) -> None:
        self.data, self.source, self.read = data, source, set[str]()

    def _get(self, key: str, kind: str, fits: Callable[[Any], bool], default: object = None
             ) -> Any:
        self.read.add(key)
        if key not in self.data:
            if default is not None:
                return default
            raise RecipeReportInvalid(f"{self.source}: key '{key}' missing ({kind})")
        if not fits(value := self.data[key]):
            raise RecipeReportInvalid(f"{self.source}: key '{key}' must be {kind}, got {value!r}")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        return str(self._get(key, "a string", lambda value: isinstance(value, str), default))

    def integer(self, key: str) -> int:
        return int(self._get(key, "an integer", lambda value: isinstance(value, int)
                             and not isinstance(value, bool)))

    def number(self, key: str) -> float:
        return float(self._get(key, "a number", lambda value: isinstance(value, (int, float))
                               and not isinstance(value, bool)))

    def texts(self, key: str) -> tuple[str, ...]:
        return tuple(self._get(key, "a list of strings", lambda value: isinstance(value, list)
                               and all(isinstance(item, str) for item in value)))

    def mapping(self, key: str) -> dict[str, str]:
        return dict(self._get(key, "an object of strings", lambda value: isinstance(value, dict)
                              and all(isinstance(item, str) for item in value.values())))

    def check_all_read(self) -> None:
        unknown = sorted(set(self.data) - self.read)
        if unknown:
            raise RecipeReportInvalid(f"{self.source}: unknown key{'s' * (len(unknown) > 1)} "
                                      f"{', '.join(unknown)} (the recipe and the package must "
                                      f"come together)")
