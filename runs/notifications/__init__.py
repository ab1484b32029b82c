"""Notification deliveries: the sender of the outbox that ``runs.actions.outbox`` fills.

``policy`` (retry schedule, what a response means), ``signing`` (Standard Webhooks 1.0),
``messages`` (Slack and e-mail texts), ``delivery`` (one attempt per claimed row, through the
egress guard), ``tasks`` (the ``django.tasks`` task that sends what is due) and ``inprocess`` (the
embedded profile's task backend: a thread of the server process).
"""
