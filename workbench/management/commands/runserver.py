"""`manage.py runserver`: daphne's ASGI development server (websockets included).

daphne's own app would import twisted and autobahn (half a second) at the start of every
management command; this command imports them only when it runs.
"""

from daphne.management.commands.runserver import Command  # noqa: F401
