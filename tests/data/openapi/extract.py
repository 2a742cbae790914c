"""Extract GitHub's `release` and `release-asset` schemas (and the error bodies `basic-error`
and `validation-error`), with their $ref closure, from the OpenAPI description in the npm
package @octokit/openapi, into github-releases.json beside this file. The tests then need no npm:

    npm pack @octokit/openapi            # writes octokit-openapi-<version>.tgz
    tar xzf octokit-openapi-*.tgz        # package/generated/api.github.com.json
    python tests/data/openapi/extract.py package/package.json package/generated/api.github.com.json
    python tests/data/openapi/extract.py package/package.json \
        package/generated/api.github.com.json issues

The second writes github-issues.json: the `issue`, `issue-comment` and `label` schemas (and the
error bodies) that the issues routes answer with (`ninfer-kits alert`).
The schemas are copied unchanged (OpenAPI 3.0: `nullable`, `$ref` to #/components/schemas/...);
the tests convert them to JSON Schema when they load them."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOTS = ("release", "release-asset", "basic-error", "validation-error")
PREFIX = "#/components/schemas/"
OUT = Path(__file__).with_name("github-releases.json")
# name → (roots, the file written)
SETS = {"releases": (ROOTS, OUT),
        "issues": (("issue", "issue-comment", "label", "basic-error", "validation-error"),
                   Path(__file__).with_name("github-issues.json"))}


def refs(node: Any) -> set[str]:
    """The component schema names that `node` refers to, directly."""
    if isinstance(node, dict):
        found = {node["$ref"].removeprefix(PREFIX)} if "$ref" in node else set()
        for value in node.values():
            found |= refs(value)
        return found
    if isinstance(node, list):
        return set().union(*map(refs, node)) if node else set()
    return set()


def closure(schemas: dict[str, Any], roots: tuple[str, ...]) -> dict[str, Any]:
    todo, kept = list(roots), {}
    while todo:
        name = todo.pop()
        if name not in kept:
            kept[name] = schemas[name]
            todo.extend(refs(schemas[name]))
    return dict(sorted(kept.items()))


def main(package_json: str, description: str, which: str = "releases") -> None:
    roots, out_path = SETS[which]
    package = json.loads(Path(package_json).read_text())
    raw = Path(description).read_bytes()
    spec = json.loads(raw)
    out = {
        "x-extracted-from": {
            "package": f"{package['name']}@{package['version']}",
            "file": "generated/api.github.com.json",
            "sha256": hashlib.sha256(raw).hexdigest(),
            "openapi": spec["openapi"],
            "roots": list(roots),
            "how": "tests/data/openapi/extract.py (see its docstring)",
        },
        "components": {"schemas": closure(spec["components"]["schemas"], roots)},
    }
    out_path.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
