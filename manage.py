#!/usr/bin/env python
import os
import sys

if __name__ == "__main__":
    # `bundle check` needs only the protocol package: skip Django's set-up (settings, apps,
    # URL loading, system checks) for it, as the workbench-verify console script does
    # (fast_path ends the process then; it returns for every other command).
    from runs.protocol.verify_cli import fast_path

    fast_path(sys.argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    from workbench.startup import configure_for_command

    configure_for_command(sys.argv)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
