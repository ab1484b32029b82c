"""Background work: django-tasks-db task rows run by ``manage.py worker`` (``worker``: threads and
leases over the library's loop; ``periodic``: periodic jobs as self-re-enqueueing tasks; ``jobs``:
the runs app's periodic sweeps)."""
