"""Annotation queues: post-hoc review of runs, events and steps by people, with scores.

``models`` (queues, score configs, items, claims, scores), ``actions`` (the write path: create a
queue, add items, claim the next one under a reservation, submit scores, which also appends an
``annotation`` event to the run through ``runs.actions``), ``selectors`` (progress, agreement),
``agreement`` (pure: Cohen's kappa, Krippendorff's alpha). The app sits on top of ``runs``, beside
the playground: ``runs`` never imports it.
"""
