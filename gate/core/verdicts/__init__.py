"""What a verdict is: a trial's outcome, the six verdict kinds and the fold of one property's outcomes
into exactly one of them (`verdict`), the statistical band rules that turn hits and trials into a
decision, with Wilson intervals, Wald's SPRT and the sampler window (`bands`), and what a band rule
costs before anyone runs it (`power`). The bottom room of the core: it builds on `gate.core.errors` only.
"""
