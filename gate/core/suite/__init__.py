"""What a run is made of, from the suite to the fold: the suite's models (`suite`), the values that cross
the executor seam (`trial`: trial specs, observations, the sandbox protocol), the fixture seal (`seal`),
which properties run (`selection`), whether a tree fits the sandbox (`treelimits`), the plan and the
one batching rule (`plan`, `batching`) and folding the judged trials into verdicts (`fold`). Builds on
`gate.core.verdicts`; judging one trial is `gate.core.checks`, the module suites import.
"""
