"""`python -m workbench ...`: the `workbench` command (workbench/cli.py)."""

import sys

from workbench.cli import main

sys.exit(main())
