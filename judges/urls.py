"""Gate judge pages (judges.pages), under /judges/."""

from django.urls import path

from judges import pages

app_name = "judges"

urlpatterns = [
    path("", pages.judge_list, name="judges"),
    path("<str:judge_id>/", pages.judge_detail, name="judge"),
    path("<str:judge_id>/policy/", pages.judge_policy, name="policy"),
    path("<str:judge_id>/rescore/", pages.judge_rescore, name="rescore"),
]
