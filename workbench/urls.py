from django.contrib import admin
from django.urls import include, path

import evals.api
import judges.api
import review.api
from accounts.login import ThrottledLoginView
from runs.api import otlp
from runs.api.app import api
from workbench import discovery, docs

evals.api.register(api)  # datasets and experiments join the one REST API before its URLs are built
api.add_router("/review", review.api.router)  # annotation queues, likewise
api.add_router("/judges", judges.api.router)  # gate judges, likewise

urlpatterns = [
    *discovery.urlpatterns(),
    path("", include("accounts.oauth_urls")),
    path("v1/traces", otlp.traces, name="otlp_traces"),
    path("v1/logs", otlp.logs, name="otlp_logs"),
    path("admin/", admin.site.urls),
    path("docs/", docs.page, name="docs"),  # the documentation site (mkdocs.yml), public and read-only
    path("docs/<path:path>", docs.page, name="docs_file"),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("runs.api.urls")),
    path("workspace/", include("accounts.urls")),
    path("playground/", include("playground.urls")),
    path("evals/", include("evals.urls")),
    path("review/", include("review.urls")),
    path("judges/", include("judges.urls")),
    path("live/", include("runs.live.metrics")),
    path("", include("runs.urls")),
]
