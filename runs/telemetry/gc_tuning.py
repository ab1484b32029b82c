"""The garbage collector of a long-running process (the server, the OTLP worker): what was loaded
at start-up is frozen out of its scans, and its youngest generation is made larger.

Python collects its youngest generation every 2,000 net allocations of container objects (3.13)
and, every so often, the oldest one: a walk over every object the process holds, all of Django
and the apps included. A request of the OTLP receiver holds some 15,000 short-lived objects at its
peak (512 spans decoded, routed and mapped: dicts and lists freed by reference counting), so
each one crossed the threshold several times, and a full collection landed in many bursts:

- measured in ``bench/bench_otlp.py`` (1,000 traces x 10 spans, 20 requests), 62-65
  collections took 0.17-0.20 s of the receiver's ~0.65 s, one full collection 0.15-0.17 s of it;
- with this tuning, no collection ran during the burst and the receiver went from 12,659-15,946
  to 22,642 spans per CPU second (docs/notes/scaling-diary.md, "The receiver's garbage collector").

``gc.freeze()`` moves every object that exists now to a generation no collection scans (what
``gc.freeze`` is for: a process's start-up heap, as pre-fork servers do before forking). Objects
made later are collected as before; cyclic garbage is still found, at the latest after 20,000
net allocations (a few MB) instead of 2,000.

Imports only :mod:`gc`. It sits with the OTLP worker (``runs.telemetry``), the lowest of its two
callers; the server's ASGI module (``workbench``) is above it. (``runs/`` itself holds only
Django's places: tests/ops/test_layers.py.)
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000  # net container allocations between collections of the youngest generation


def settle_heap() -> None:
    """Collect once, freeze what is left (the start-up heap) and raise the youngest generation's
    threshold. Call it when the process has loaded what it serves with (the end of the ASGI
    module, a worker's preparation); calling it again freezes what was loaded since."""
    gc.collect()
    gc.freeze()
    _first, second, third = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, max(second, 20), max(third, 10))
