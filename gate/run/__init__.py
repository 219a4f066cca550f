"""Orchestration: one gate run (seal check, plan, waves through an executor, fold, policy,
card), the baseline run; the executors (gate.run.executors). It never picks a concrete sandbox or
broker: `gate.cli` passes one in.
"""
