"""Reads, workspace first: runs, state, compare, bundles (export), annotations, transcripts."""
