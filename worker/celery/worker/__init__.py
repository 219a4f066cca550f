"""The worker's side of Celery: the batch task, runs kept open, image fetching, result signatures,
stopping within seconds, the nightly re-seal schedule and the `gate-worker` command."""
