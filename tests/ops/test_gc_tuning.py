"""The garbage collector of a long-running process (runs/telemetry/gc_tuning.py): the start-up
heap frozen, the youngest generation larger, and what is made later still collected."""

from __future__ import annotations

import gc
import importlib
import weakref

import pytest

from runs.telemetry import gc_tuning


@pytest.fixture
def restored_collector():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()  # (the objects go back to the oldest generation: collected as before)
    gc.set_threshold(*threshold)


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_settling_freezes_the_heap_and_raises_the_youngest_threshold(restored_collector):
    gc.unfreeze()
    gc.set_threshold(2000, 10, 10)
    loaded = _Node()  # something the process holds when it settles
    gc_tuning.settle_heap()
    assert gc.get_freeze_count() > 1000  # Django, the apps, this test session
    assert gc.is_tracked(loaded)
    assert gc.get_threshold() == (gc_tuning.YOUNG_THRESHOLD, 20, 10)
    assert not any(loaded is obj for obj in gc.get_objects(generation=2))  # frozen: in no generation


def test_cyclic_garbage_made_after_settling_is_still_collected(restored_collector):
    gc_tuning.settle_heap()
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


@pytest.mark.django_db  # the module's start-up looks at the notification outbox and the OTLP spool
def test_the_server_settles_its_heap_when_its_asgi_module_loads(restored_collector):
    import workbench.asgi

    gc.set_threshold(2000, 10, 10)
    importlib.reload(workbench.asgi)  # what daphne imports to serve
    assert gc.get_threshold()[0] == gc_tuning.YOUNG_THRESHOLD


def test_the_otlp_worker_settles_its_heap_when_it_starts(restored_collector, settings, tmp_path, db):
    # db: a connection opened by an earlier test gets its WAL schedule set at once (a cursor)
    from django.db.backends.signals import connection_created

    from runs.telemetry import otlp_worker, transcript_log

    settings.WORKBENCH_TRANSCRIPT_DIR = str(tmp_path / "transcripts")
    gc.set_threshold(2000, 10, 10)
    try:
        otlp_worker.prepare_process()
    finally:
        transcript_log.keep_files_ready(0)
        # the worker's WAL schedule is for a worker process, not the rest of this test process
        connection_created.disconnect(dispatch_uid="otlp_worker_checkpoint_pages")
    assert gc.get_threshold()[0] == gc_tuning.YOUNG_THRESHOLD
