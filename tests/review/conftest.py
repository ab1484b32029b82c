from tests.pages.conftest import make_run  # noqa: F401  (the pages' run fixture: a run waiting at review)
