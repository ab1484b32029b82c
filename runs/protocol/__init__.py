"""Protocol 1.0.0 core: wire shapes, validation, canonical JSON, integrity, migrations.

Pure Python: this package must never import Django or anything above it.
"""
