"""Whose observation counts: a trial only if it ran in the run's own image (`provenance`), a batch result
only from an enrolled worker's signature over what the coordinator issued (`enrolment`), and a worker
only as far as a second worker agrees with it (`crosscheck`, the paired re-runs; `hitrate`, Fisher's
test on statistical hit rates; `crosscheck_summary`, what the card says of both). Builds on
`gate.core.suite` and `gate.core.verdicts`; independent of `gate.core.policy`.
"""
