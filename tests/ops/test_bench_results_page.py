"""bench/run_all.py's results page: a bench's ``headline:`` lines reach the table, and the rows of
an older page (without the headline column) are kept, padded to the new column count."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import run_all  # noqa: E402  (bench/ is a folder of scripts, not a package)

OLD_PAGE = """# Benchmark results

| bench | result | wall time | measured |
|---|---|---|---|
| [bench_signing](#bench_signing) | ok | 64.3 s | 2026-12-04 03:40 UTC |

## bench_signing

ok, 64.3 s, 2026-12-04 03:40 UTC, Linux.

```text
verify 0.156 ms
```
"""


def test_headlines_go_in_the_table_and_old_rows_are_padded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "bench-results.md"
    page.write_text(OLD_PAGE, encoding="utf-8")
    monkeypatch.setattr(run_all, "RESULTS", page)
    output = "bundle: 20 events\nheadline: import 10 events/s = 0.70x its serial floor | x\nother line\n"
    run_all.write_results({"bench_import": (0, 1.5, output)})
    text = page.read_text(encoding="utf-8")
    table = [line for line in text.splitlines() if line.startswith("| [bench_")]
    assert table[0].startswith("| [bench_import](#bench_import) | ok | 1.5 s | ")
    assert table[0].endswith(" | import 10 events/s = 0.70x its serial floor / x |")
    assert table[1] == "| [bench_signing](#bench_signing) | ok | 64.3 s | 2026-12-04 03:40 UTC |  |"
    assert "| bench | result | wall time | measured | headline |" in text
    assert "verify 0.156 ms" in text  # the section of the bench not run is kept
    assert "headline: import 10 events/s" in text  # and the output stays in its own section
