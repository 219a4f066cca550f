"""The pure decision core: values in, values out, time passed in.

Verdicts, bands, policy, ledger, freezes, the card and its checks, seal hashing, plans, power,
calibration, folding, stamping, the seam models (trial specs, observations, the sandbox protocol),
the suite's models, judging and the builtin checks. Nothing here reads a file, a clock or the
network, logs, or imports docker, celery, redis or `worker`; import-linter contracts keep it so.
"""
