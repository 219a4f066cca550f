"""Docker on the worker's host: the sandbox, its run-scoped warm containers, the image, sweeps
and the preflight. Used by the local pool on the coordinator's machine and by Celery workers.
"""
