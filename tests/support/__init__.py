"""Helpers shared by the tests (as `support`: tests/ is on their sys.path) and the benchmarks (as `tests.support`,
run from the repository root); so its modules import each other relatively."""
