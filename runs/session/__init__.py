"""Moved: the in-process host API is ``runs.execution.host`` (kept here for one release)."""

from runs.execution.host import Workbench  # noqa: F401
from runs.execution.session import RunSession  # noqa: F401
