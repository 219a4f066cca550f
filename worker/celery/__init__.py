"""Celery over Redis: the app both sides share, the worker's task and open runs, the wire format,
the content-addressed blob store, the coordinator's executor and the `gate-worker` command.
"""
