"""Annotation queue pages (review.pages), under /review/."""

from django.urls import path

import runs.ids  # noqa: F401  (registers the runid converter)
from review import pages

app_name = "review"

urlpatterns = [
    path("", pages.queues, name="queues"),
    path("add-runs/", pages.add_filtered_runs, name="add_filtered_runs"),
    path("add/<runid:run_id>/", pages.add_run, name="add_run"),
    path("<str:queue_id>/", pages.queue_detail, name="queue"),
    path("<str:queue_id>/next/", pages.claim_next, name="claim_next"),
    path("<str:queue_id>/delete/", pages.delete_queue, name="delete_queue"),
    path("<str:queue_id>/items/<str:item_id>/", pages.review_item, name="item"),
]
