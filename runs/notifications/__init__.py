"""Notification deliveries: the sender of the outbox that ``runs.actions.outbox`` fills.

``policy`` (retry schedule, what a response means), ``signing`` (Standard Webhooks 1.0),
``messages`` (Slack and e-mail texts), ``delivery`` (one attempt per claimed row, through the
egress guard) and ``tasks`` (the ``django.tasks`` task that sends what is due, run by
``manage.py worker``).
"""
