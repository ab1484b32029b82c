"""Telemetry ways in and out: live transcripts, OTLP ingest, OTLP export (one-off and continuous)."""
