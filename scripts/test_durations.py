"""Write tests/durations.json (each test file's summed test time) from a junit report.

    .venv/bin/pytest -m "not browser" -n 2 --junitxml=var/test-logs/sqlite.xml
    .venv/bin/python scripts/test_durations.py var/test-logs/sqlite.xml

or, after `make test`, from both parts of the SQLite suite:

    .venv/bin/python scripts/test_durations.py var/test-logs/test-sqlite-a.xml var/test-logs/test-sqlite-b.xml

tests/lanes.py reads it to choose the files of `make test`'s second SQLite phase; the durations are
only compared with each other, so a record taken on a loaded machine still splits the suite well.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(reports: list[str]) -> None:
    per_file: dict[str, float] = defaultdict(float)
    cases = [case for report in reports for case in ET.parse(report).iter("testcase")]
    for case in cases:
        path = case.get("classname", "").split("[")[0].replace(".", "/")
        while path and not (REPO / f"{path}.py").exists():  # tests.api.test_x.TestClass -> tests/api/test_x
            path = path.rpartition("/")[0]
        if path:
            per_file[f"{path}.py"] += float(case.get("time", 0))
    out = {k: round(v, 1) for k, v in sorted(per_file.items())}
    (REPO / "tests" / "durations.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(out)} files, {sum(out.values()):.0f} s of tests -> tests/durations.json")


if __name__ == "__main__":
    main(sys.argv[1:])
