"""Pages of datasets and experiments, mounted at /evals/."""

from django.urls import path

from evals import pages

app_name = "evals"

urlpatterns = [
    path("datasets/", pages.dataset_list, name="datasets"),
    path("datasets/<str:dataset_id>/", pages.dataset_detail, name="dataset"),
    path("experiments/<str:experiment_id>/", pages.experiment_compare, name="experiment"),
]
