"""What a management command loads when it starts (kept small: this module imports nothing heavy).

`manage.py` names the command before Django starts. Commands that serve requests or exist to
check the project (`check`, `runserver`, `test`, `testserver`) keep Django's URL checks; every
other command (migrate, bundle, tokens, demo_data, worker, shell ...) skips them,
because those checks import the whole URL tree (the REST API with django-ninja and pydantic,
every view) only to look at it: about a second of start-up for nothing. `make lint` runs
`manage.py check`, and every page test resolves URLs, so a broken URLconf is still caught.
"""

from __future__ import annotations

URL_CHECK_COMMANDS = frozenset({"check", "runserver", "test", "testserver"})

# False only when manage.py starts a command that does not need the URL checks.
url_checks = True


def configure_for_command(argv: list[str]) -> None:
    """Called by manage.py with sys.argv, before Django is set up."""
    global url_checks
    command = next((arg for arg in argv[1:] if not arg.startswith("-")), "help")
    url_checks = command in URL_CHECK_COMMANDS
