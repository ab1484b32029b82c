"""The conformance corpus's valid bundles and their expected outputs, for parametrized tests."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runs.protocol.canonical import parse_json
from tests.conftest import CONFORMANCE

HAVE_CORPUS = (CONFORMANCE / "expected").is_dir() and (CONFORMANCE / "valid").is_dir()
_MISSING = f"conformance corpus not found at {CONFORMANCE} (set WORKBENCH_CONFORMANCE_DIR)"
needs_corpus = pytest.mark.skipif(not HAVE_CORPUS, reason=_MISSING)


def bundle_names(kind: str) -> list[Any]:
    """Names of valid bundles that have ``expected/<name>.<kind>.json``; one skipped param if absent."""
    expected = CONFORMANCE / "expected"
    if not HAVE_CORPUS:
        return [pytest.param(None, marks=pytest.mark.skip(reason=_MISSING))]
    names = sorted(p.name[: -len(f".{kind}.json")] for p in expected.glob(f"*.{kind}.json"))
    return [name for name in names if (CONFORMANCE / "valid" / f"{name}.json").is_file()]


def load_bundle(name: str) -> dict[str, Any]:
    return parse_json((CONFORMANCE / "valid" / f"{name}.json").read_bytes())


def load_expected(name: str, kind: str) -> dict[str, Any]:
    return json.loads((CONFORMANCE / "expected" / f"{name}.{kind}.json").read_text(encoding="utf-8"))


def manifest() -> dict[str, Any]:
    return json.loads((CONFORMANCE / "manifest.json").read_text(encoding="utf-8"))


def same_json(actual: Any, expected: Any, path: str = "$") -> None:
    """Assert JSON equality that also tells ints from floats and checks object key order."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: {actual!r} is not an object"
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            same_json(actual[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{path}: {actual!r} is not an array"
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            same_json(a, e, f"{path}[{index}]")
    else:
        assert type(actual) is type(expected) and actual == expected, f"{path}: {actual!r} != {expected!r}"
