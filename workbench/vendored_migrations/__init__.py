"""The migrations of Django's contrib apps and of the libraries' apps, vendored (issue 53).

settings.MIGRATION_MODULES points each app here: exact copies of the library's migration files
plus one squashed migration (scripts/vendor_migrations.py writes it and says how to refresh).
"""
