"""Ending quiet OTLP traces: the runs created from OTLP whose trace went quiet
(``runs.actions.otlp.do_end_quiet_traces``), every :func:`interval` seconds.

A periodic task of the workers (``runs.background.jobs``, job ``otlp-quiet``) in every profile;
``manage.py otlp_sweep [--loop]`` runs the same sweep by hand.
"""

from __future__ import annotations

import logging

from django.conf import settings

from runs.actions.otlp import do_end_quiet_traces

log = logging.getLogger(__name__)


def interval() -> float:
    """How often to look: a third of the quiet period, between 0.2 s and 10 s."""
    return min(10.0, max(0.2, settings.WORKBENCH_OTLP_QUIET_SECONDS / 3))


def sweep_once() -> int:
    """End the quiet traces now; returns how many runs were ended (idempotent: an ended run is
    not quiet-and-running any more, a second sweep finds nothing)."""
    report = do_end_quiet_traces()
    ended = len(report.completed) + len(report.failed)
    if ended:
        log.info("otlp: ended %d quiet trace run(s)", ended)
    return ended
