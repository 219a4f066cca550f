"""The pure decision core: values in, values out, time passed in.

In rooms by idea, each importing only the rooms below it (import-linter's `core-rooms` contract):
`report` (what is written from a card) > `card` (the card, stamping, accept's proof, evidence,
signatures) > `policy` (the decision table, ledger, freezes, flakes, history), `trust` (provenance,
enrolment, cross-checks) and `checks` (judging one trial: the module suites import, so it keeps its
path), side by side > `suite` (the suite, the trial seam, seal, plan, batching, fold) > `verdicts`
(kinds, outcomes, band rules). `errors` (every error and its exit code) is under them all; `testing`
holds the test doubles of the seams. Nothing here reads a file, a clock
or the network, logs, or imports docker, celery, redis or `worker`; import-linter contracts keep it so.
"""
