"""The decision table and what it weighs beyond the verdicts: the job's status and exit code (`policy`),
the harness-credit ledger (`ledger`), the reviewed flake freezes (`freezes`), the decision after a base
rerun (`flakes`) and the flake history with its lifting rule (`history`). Builds on
`gate.core.verdicts`; independent of `gate.core.trust`.
"""
