"""The gate escalation sweep as a periodic job (registered in ``runs.apps``): a waiting gate
past a tier's limit tells that tier once (runs.actions.gatepolicy.do_escalate_gates)."""

from __future__ import annotations

import logging

from django.conf import settings

from runs.actions.gatepolicy import do_escalate_gates

log = logging.getLogger("workbench.periodic")


def interval() -> float:
    """Seconds between sweeps (``WORKBENCH_GATE_ESCALATION_INTERVAL``, default 60)."""
    return float(getattr(settings, "WORKBENCH_GATE_ESCALATION_INTERVAL", 60))


def escalate_gates() -> int:
    written = do_escalate_gates()
    if written:
        log.info("gate escalation: %d notification(s) written", written)
    return written
