"""Step code the workbench runs itself: sessions, the host API, replays, model calls through the cache."""
