"""The evals write path: every write of datasets, items and experiments ends in a ``do_*`` here.

``datasets`` (create, add and delete items, item builders from gates, runs, events and uploads)
and ``experiments`` (create, record each item's outcome, rescore). Anything that touches runs
(the forks an experiment makes) goes through runs' own write path.
"""

from evals.actions.datasets import (
    MAX_ITEMS_PER_REQUEST,
    do_add_items,
    do_create_dataset,
    do_delete_items,
    item_from_event,
    items_from_gates,
    items_from_runs,
    items_from_upload,
)
from evals.actions.experiments import (
    do_cancel_experiment,
    do_create_experiment,
    do_finish_experiment,
    do_record_item,
    do_refresh_experiment,
    do_rescore_experiment,
    resolve_as_of,
)

__all__ = [
    "MAX_ITEMS_PER_REQUEST",
    "do_add_items",
    "do_cancel_experiment",
    "do_create_dataset",
    "do_create_experiment",
    "do_delete_items",
    "do_finish_experiment",
    "do_record_item",
    "do_refresh_experiment",
    "do_rescore_experiment",
    "item_from_event",
    "items_from_gates",
    "items_from_runs",
    "items_from_upload",
    "resolve_as_of",
]
