"""Executors: where a run's trials go, behind one protocol.

- `base`: the `Executor` protocol, `opened` (a run's bracket) and `serves_every_tree`
- `local`: `LocalExecutor`, the default: a thread pool over one sandbox on this machine
- `journaled`: `RunJournal` and `JournaledExecutor`, which journal a run's observations for `--resume`
- `mock`: `MockExecutor` and `MockFleet`, the test doubles (never imported by shipped code)

Celery's executor is `worker.celery.coordinator.dispatch.CeleryExecutor`: it needs the broker, and the
layer contracts keep gate/run free of worker, celery and redis. The command line (gate/cli/executors.py)
is the only place that picks one.
"""
