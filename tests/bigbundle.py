"""Large valid bundles for the upload tests, written to a file by bench/gen_bundle.py in a child
process (the test process never holds the document)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def generate_bundle(path: Path, events: int) -> Path:
    """Write a valid bundle of ``events`` events to ``path`` and return it."""
    command = [
        sys.executable,
        str(ROOT / "bench" / "gen_bundle.py"),
        "--events",
        str(events),
        "--out",
        str(path),
    ]
    subprocess.run(command, check=True, cwd=ROOT)
    return path


def load_gen_bundle(name: str = "_bench_gen_bundle") -> ModuleType:
    """bench/gen_bundle.py as a module (it puts the checkout on ``sys.path``: undone here)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "gen_bundle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module
