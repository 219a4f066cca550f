"""Celery over Redis, in three folders: `coordinator/` (the coordinator's executor, who runs what, which
answers count, gathering, control, image publication, broker users), `worker/` (the worker's task, its open
runs, `gate-worker`) and `shared/` (the app, broker faults, the wire format, result places, blobs, image
chunks and names), which both sides import and which imports neither.
"""
