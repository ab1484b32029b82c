"""Large valid bundles for the upload tests, written to a file by bench/gen_bundle.py in a child
process (the test process never holds the document)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
