"""gate.toml's `rule = "paired"`: parsed like the sprt rule, every bad value one SuiteError naming the
file and the property."""

from __future__ import annotations

import pytest

from gate.core.verdicts.paired import PairedRule
from gate.io.suite import load_suite
from unit.io.test_suite import prop_toml, suite_error, write

PAIRED_KEYS = dict(rule="paired", margin=0.05, alpha=0.05, beta=0.05, max_pairs=400)


def test_paired_rule_loads_from_property_keys(tmp_path):
    """`rule = "paired"` with margin, alpha, beta, max_pairs (and wave) builds a PairedRule planning max_pairs."""
    suite = load_suite(write(tmp_path, prop_toml(id="r", band="statistical", wave=20, **PAIRED_KEYS)))
    (prop,) = suite.properties
    assert prop.rule() == PairedRule(margin=0.05, alpha=0.05, beta=0.05, max_pairs=400, wave=20)
    assert prop.planned_trials() == 400


def test_paired_rule_defaults_alpha_beta_and_wave(tmp_path):
    """Without alpha, beta and wave the paired rule uses 0.05, 0.05 and waves of 10 pairs."""
    text = prop_toml(id="r", band="statistical", rule="paired", margin=0.1, max_pairs=200)
    rule = load_suite(write(tmp_path, text)).properties[0].rule()
    assert (rule.alpha, rule.beta, rule.wave) == (0.05, 0.05, 10)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"margin": None}, "margin: Field required"),
        ({"max_pairs": None}, "max_pairs: Field required"),
        ({"margin": 0.0}, "margin"),
        ({"margin": 0.7}, "margin"),
        ({"margin": "0.05"}, "margin"),
        ({"alpha": 0.5}, "alpha"),
        ({"beta": 0.0}, "beta"),
        ({"max_pairs": 20}, "max_pairs 20 is below the 58 agreeing pairs"),
        ({"max_pairs": 1.5}, "max_pairs"),
        ({"wave": 0}, "wave"),
    ],
)
def test_bad_paired_parameters_are_refused_naming_the_property(tmp_path, change, needle):
    """A missing margin or cap, values out of range or of the wrong type, a cap too small to pass: refused."""
    err = suite_error(tmp_path, prop_toml(id="r", band="statistical", **{**PAIRED_KEYS, **change}))
    assert err.field == "property r"
    assert needle in str(err)
    assert "\n" not in str(err)


@pytest.mark.parametrize("stray", [{"trials": 10}, {"p0": 0.8}, {"max_trials": 9}])
def test_keys_of_other_rules_beside_paired_are_refused(tmp_path, stray):
    """trials, p0 or max_trials beside `rule = "paired"` are refused, naming the rule and its keys."""
    err = suite_error(tmp_path, prop_toml(id="r", band="statistical", **PAIRED_KEYS, **stray))
    assert "not a key of rule 'paired', which takes margin, alpha, beta, max_pairs, wave" in str(err)


@pytest.mark.parametrize("other", [{}, {"rule": "sprt", "p0": 0.8, "p1": 0.6, "max_trials": 50}])
@pytest.mark.parametrize("paired_key", [{"margin": 0.05}, {"max_pairs": 100}])
def test_paired_keys_without_the_paired_rule_hint_it(tmp_path, other, paired_key):
    """margin or max_pairs on a fixed or sprt property is refused with a hint to set rule = "paired"."""
    err = suite_error(tmp_path, prop_toml(id="r", band="statistical", **other, **paired_key))
    assert err.field == "property r"
    assert 'set rule = "paired"' in str(err)


@pytest.mark.parametrize("band", ["contract", "safety"])
def test_paired_rule_on_a_non_statistical_property_is_refused(tmp_path, band):
    """The paired rule on a safety or contract property is refused, naming the property."""
    err = suite_error(tmp_path, prop_toml(id="c", band=band, **PAIRED_KEYS))
    assert err.field == "property c"
    assert "statistical band only" in str(err)
