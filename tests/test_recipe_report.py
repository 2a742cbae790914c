"""recipe.json, the recipe's report, read into a typed record: every key checked once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ninfer_kits.errors import EXIT_CHECK_FAILED
from ninfer_kits.pipeline.recipe_report import (
    CcacheStats,
    RecipeReportInvalid,
    parse_recipe_report,
    read_recipe_report,
)


def report(**changes: object) -> dict[str, object]:
    """What build/recipe.py writes for a ccache build (the keys of its `report` dict)."""
    data: dict[str, object] = {
        "schema": 1, "arch": "86", "jobs": 2, "configure_seconds": 1.5, "build_seconds": 20.0,
        "compile_seconds": 21.5, "cmake_version": "3.31.6", "ninja_version": "1.12.1",
        "nvcc_version": "13.0.88", "cmake_options": ["-DCMAKE_BUILD_TYPE=Release"],
        "deterministic_flags": {"CMAKE_C_FLAGS": "-ffile-prefix-map=<source>=.",
                                "per_file": "-frandom-seed=<path>"},
        "targets": ["ninfer", "ninfer-serve"], "cxx_compiler_id": "GNU",
        "cxx_compiler_version": "12.2.0", "cuda_compiler_id": "NVIDIA",
        "cuda_compiler_version": "13.0.88", "ccache_calls": 21, "ccache_hits": 20,
        "ccache_misses": 1, "ccache_uncacheable": 0, "ccache_hit_rate": "95.2%",
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def test_a_report_reads_into_typed_fields(tmp_path: Path) -> None:
    (tmp_path / "recipe.json").write_text(json.dumps(report()))
    read = read_recipe_report(tmp_path)
    assert (read.jobs, read.compile_seconds, read.cxx_compiler) == (2, 21.5, "GNU 12.2.0")
    assert read.cmake_options == ("-DCMAKE_BUILD_TYPE=Release",)
    assert read.ccache == CcacheStats(calls=21, hits=20, misses=1, uncacheable=0,
                                      hit_rate="95.2%")
    without = parse_recipe_report(report(ccache_calls=None, ccache_hits=None, ccache_misses=None,
                                         ccache_uncacheable=None, ccache_hit_rate=None))
    assert without.ccache is None


@pytest.mark.parametrize(("changes", "message"), [
    ({"jobs": "2"}, "key 'jobs' must be an integer, got '2'"),
    ({"jobs": True}, "key 'jobs' must be an integer"),
    ({"jobs": 0}, "key 'jobs' is 0; at least 1"),
    ({"compile_seconds": None}, "key 'compile_seconds' missing (a number)"),
    ({"cmake_options": "-DA=1"}, "key 'cmake_options' must be a list of strings"),
    ({"schema": 2}, "schema 2; this ninfer-kits reads 1"),
    ({"extra": 1}, "unknown key extra"),
    ({"ccache_calls": None}, "unknown keys ccache_hit_rate, ccache_hits"),
])
def test_a_wrong_report_is_refused_naming_the_key(changes: dict[str, object],
                                                  message: str) -> None:
    with pytest.raises(RecipeReportInvalid) as caught:
        parse_recipe_report(report(**changes), "out/recipe.json")
    assert str(caught.value).startswith("out/recipe.json: ")
    assert message in str(caught.value)
    assert caught.value.exit_code == EXIT_CHECK_FAILED


def test_a_missing_or_broken_report_file(tmp_path: Path) -> None:
    with pytest.raises(RecipeReportInvalid, match="the recipe wrote no report"):
        read_recipe_report(tmp_path)
    (tmp_path / "recipe.json").write_text("{")
    with pytest.raises(RecipeReportInvalid, match="not JSON"):
        read_recipe_report(tmp_path)
