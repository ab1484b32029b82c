"""Pages of datasets and experiments, mounted at /evals/."""

from django.urls import path

from evals import adding, pages, prompt_experiments

app_name = "evals"

urlpatterns = [
    path("datasets/", pages.dataset_list, name="datasets"),
    path("datasets/add-runs/", adding.add_runs, name="add_runs"),
    path("datasets/add-event/", adding.add_event, name="add_event"),
    path("datasets/<str:dataset_id>/", pages.dataset_detail, name="dataset"),
    path("experiments/new/", prompt_experiments.new_prompt_experiment, name="new_prompt_experiment"),
    path("experiments/<str:experiment_id>/", pages.experiment_compare, name="experiment"),
    path("experiments/<str:experiment_id>/cancel/", pages.experiment_cancel, name="experiment_cancel"),
    path("experiments/<str:experiment_id>/summary/", pages.experiment_summary, name="experiment_summary"),
]
