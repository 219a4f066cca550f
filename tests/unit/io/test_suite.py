"""gate.suite: strict loading of gate.toml, with every error naming the file and the property."""

from __future__ import annotations

import hashlib
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gate.core.errors import RET_CONFIG, RET_NOINPUT, InputMissingError, SuiteError
from gate.core.suite.property import PropertySpec
from gate.core.verdicts.bands import FixedRule, SamplerWindow, SprtRule
from gate.core.verdicts.verdict import Band
from gate.io.suite import load_suite

GOOD = """
[suite]
name = "invoice"
probe = "python3 probe.py --fast"
freeze_file = "flake-freeze.json"

[suite.sampler]
window = 10
max_inconclusive = 2

[suite.ledger]
budget = 3
ttl_hours = 1.5

[[property]]
id = "no_unmapped_write"
band = "safety"
fixture = "invoices/inv-001.json"
check = "builtin:no_unmapped_write"
params = { write_map = ["out/*"] }

[[property]]
id = "json_shape_v3"
band = "contract"
fixture = "invoices/inv-001.json"
check = "checks:json_shape_v3"
deadline_s = 3.0

[[property]]
id = "tool_choice_rate"
band = "statistical"
fixture = "tools/refund-query.json"
check = "checks:tool_choice"
trials = 20
min_hits = 15
timeout_is_safety = true
"""


def write(tmp_path, text, name="gate.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def prop_toml(**fields):
    base = {"id": "p1", "band": "contract", "fixture": "f.json", "check": "checks:fn"}
    base.update(fields)
    body = "\n".join(
        f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {str(v).lower()}"
        for k, v in base.items()
        if v is not None
    )
    return "[[property]]\n" + body + "\n"


def suite_error(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    assert str(path) in str(info.value)
    assert info.value.exit_code == RET_CONFIG
    return info.value


# --- a good suite -----------------------------------------------------------------------------------


def test_good_suite_loads_every_field(tmp_path):
    """A well-formed gate.toml loads into properties, sampler, ledger and probe settings."""
    path = write(tmp_path, GOOD)
    suite = load_suite(path)
    assert [p.id for p in suite.properties] == ["no_unmapped_write", "json_shape_v3", "tool_choice_rate"]
    assert suite.config.probe == ("python3", "probe.py", "--fast")
    assert suite.config.sampler.empty_window() == SamplerWindow(size=10, max_inconclusive=2)
    assert (suite.config.ledger.budget, suite.config.ledger.ttl_hours) == (3, 1.5)
    assert suite.bands() == {
        "no_unmapped_write": Band.SAFETY,
        "json_shape_v3": Band.CONTRACT,
        "tool_choice_rate": Band.STATISTICAL,
    }
    assert suite.properties[0].params == {"write_map": ["out/*"]}
    assert suite.properties[2].timeout_is_safety is True


def test_suite_records_path_root_and_sha256(tmp_path):
    """The suite records its resolved path, its folder as root, and the sha256 of its bytes."""
    path = write(tmp_path, GOOD)
    suite = load_suite(path)
    assert suite.path == path.resolve()
    assert suite.root == tmp_path.resolve()
    assert suite.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_suite_resolves_paths_against_its_folder(tmp_path):
    """checks, fixtures and the freeze file resolve relative to gate.toml's folder."""
    suite = load_suite(write(tmp_path, GOOD))
    assert suite.checks_path == (tmp_path / "checks.py").resolve()
    assert suite.freeze_path == (tmp_path / "flake-freeze.json").resolve()
    assert suite.resolve("fixtures") == (tmp_path / "fixtures").resolve()


def test_suite_without_freeze_file_has_no_freeze_path(tmp_path):
    """A suite that names no freeze file has freeze_path None."""
    assert load_suite(write(tmp_path, prop_toml())).freeze_path is None


def test_defaults_apply_when_suite_table_is_absent(tmp_path):
    """Without a [suite] table the defaults are the probe, 20/4 window and 2-credit/6 h ledger."""
    suite = load_suite(write(tmp_path, prop_toml()))
    assert suite.config.probe == ("python3", "probe.py")
    assert suite.config.sampler.empty_window() == SamplerWindow()
    assert (suite.config.ledger.budget, suite.config.ledger.ttl_hours) == (2, 6.0)


def test_replays_are_sized_to_let_no_lie_escape_unless_the_suite_states_an_escape(tmp_path):
    """`replay_escape` defaults to 0 (the zero-lift bound), loads when stated, and must lie in [0, 1)."""
    assert load_suite(write(tmp_path, prop_toml())).config.replay_escape == 0.0
    stated = load_suite(write(tmp_path, "[suite]\nreplay_escape = 0.2\n" + prop_toml())).config.replay_escape
    assert stated == 0.2
    for bad in ("1.0", "-0.1"):
        assert "replay_escape" in str(suite_error(tmp_path, f"[suite]\nreplay_escape = {bad}\n" + prop_toml()))


def test_statistical_band_rules(tmp_path):
    """A statistical property's rule is its declared trials/min_hits, defaulting to 8 of 10."""
    suite = load_suite(
        write(
            tmp_path,
            prop_toml(id="a", band="statistical") + prop_toml(id="b", band="statistical", trials=20, min_hits=15),
        )
    )
    a, b = suite.properties
    assert a.rule() == FixedRule(trials=10, min_hits=8)
    assert b.rule() == FixedRule(trials=20, min_hits=15)
    assert (a.planned_trials(), b.planned_trials()) == (10, 20)


def test_contract_and_safety_have_no_rule_and_one_trial(tmp_path):
    """Safety and contract properties have no band rule and plan one trial."""
    suite = load_suite(write(tmp_path, prop_toml(id="s", band="safety") + prop_toml(id="c")))
    assert [(p.rule(), p.planned_trials()) for p in suite.properties] == [(None, 1), (None, 1)]


# --- refusals ---------------------------------------------------------------------------------------


def test_missing_band_names_the_file_and_the_property(tmp_path):
    """A property with no band is refused as unclassified, naming the file and the property id."""
    err = suite_error(tmp_path, prop_toml() + prop_toml(id="orphan", band=None))
    assert "property orphan" in str(err)
    assert "unclassified" in str(err)
    assert err.field == "property orphan"


def test_missing_band_without_id_names_the_index(tmp_path):
    """A property with neither band nor id is named by its index."""
    err = suite_error(tmp_path, prop_toml() + "[[property]]\nfixture = 'f'\ncheck = 'checks:fn'\n")
    assert err.field == "property[1]"


def test_unknown_band_is_refused_naming_the_property(tmp_path):
    """A band other than safety/contract/statistical is refused, naming the property."""
    err = suite_error(tmp_path, prop_toml(id="weird", band="flaky"))
    assert err.field == "property weird"
    assert "band" in str(err)


def test_unknown_property_key_is_refused(tmp_path):
    """An unknown key in a property is refused, naming the key and the property."""
    err = suite_error(tmp_path, prop_toml(id="p", retries=3))
    assert err.field == "property p"
    assert "retries" in str(err)


def test_unknown_suite_key_is_refused(tmp_path):
    """An unknown key in [suite] is refused, naming the key."""
    err = suite_error(tmp_path, "[suite]\nretry = 1\n" + prop_toml())
    assert err.field == "suite"
    assert "retry" in str(err)


def test_check_deadline_and_memory_default_to_five_seconds_and_a_gibibyte(tmp_path):
    """Without the keys, each check call has 5 s and its process 1024 MiB of address space."""
    config = load_suite(write(tmp_path, prop_toml())).config
    assert (config.check_deadline_s, config.check_memory_mb) == (5.0, 1024)
    config = load_suite(write(tmp_path, "[suite]\ncheck_deadline_s = 1\ncheck_memory_mb = 300\n" + prop_toml())).config
    assert (config.check_deadline_s, config.check_memory_mb) == (1.0, 300)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("check_deadline_s", "0"),
        ("check_deadline_s", "-1"),
        ("check_deadline_s", "601"),
        ("check_deadline_s", "nan"),
        ("check_deadline_s", "inf"),
        ("check_deadline_s", '"5"'),
        ("check_deadline_s", "true"),
        ("check_memory_mb", "255"),
        ("check_memory_mb", "1048577"),
        ("check_memory_mb", "512.0"),
        ("check_memory_mb", '"512"'),
    ],
)
def test_bad_check_deadline_or_memory_is_refused_naming_the_key(tmp_path, key, value):
    """A check deadline or memory bound that is not a sane number is one error naming gate.toml and the key."""
    err = suite_error(tmp_path, f"[suite]\n{key} = {value}\n" + prop_toml())
    assert err.field == "suite"
    assert str(err).startswith(f"{tmp_path / 'gate.toml'}: suite: {key}: ")
    assert "\n" not in str(err)


def test_unknown_top_level_table_is_refused(tmp_path):
    """A top-level table other than suite and property is refused, naming it."""
    err = suite_error(tmp_path, "[freezes]\nx = 1\n" + prop_toml())
    assert "unknown table(s) freezes" in str(err)


def test_duplicate_property_id_is_refused(tmp_path):
    """Two properties with the same id are refused, naming the id."""
    err = suite_error(tmp_path, prop_toml(id="twice") + prop_toml(id="twice", band="safety"))
    assert err.field == "property twice"
    assert "duplicate property id" in str(err)


def test_min_hits_above_trials_is_refused(tmp_path):
    """A statistical property with min_hits above trials is refused, naming the property."""
    err = suite_error(tmp_path, prop_toml(id="rate", band="statistical", trials=5, min_hits=6))
    assert err.field == "property rate"
    assert "min_hits 6 exceeds trials 5" in str(err)


def test_min_hits_above_the_default_trials_is_refused(tmp_path):
    """min_hits above the default 10 trials is refused too."""
    err = suite_error(tmp_path, prop_toml(id="rate", band="statistical", min_hits=11))
    assert "exceeds trials 10" in str(err)


def test_trials_below_the_default_min_hits_is_refused(tmp_path):
    """trials below the default 8 hits without an explicit min_hits is refused rather than silently lowered."""
    err = suite_error(tmp_path, prop_toml(id="rate", band="statistical", trials=5))
    assert "min_hits 8 exceeds trials 5" in str(err)


@pytest.mark.parametrize("band", ["contract", "safety"])
@pytest.mark.parametrize("field", ["trials", "min_hits"])
def test_trials_on_a_non_statistical_property_is_refused(tmp_path, band, field):
    """trials or min_hits on a safety or contract property is refused, naming the property."""
    err = suite_error(tmp_path, prop_toml(id="c", band=band, **{field: 3}))
    assert err.field == "property c"
    assert "statistical band only" in str(err)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("deadline_s", 0),
        ("deadline_s", 3601),
        ("id", "has space"),
        ("check", "nocolon"),
        ("fixture", ""),
    ],
)
def test_out_of_range_property_fields_are_refused(tmp_path, field, value):
    """A zero or huge deadline, a bad id, a check without module:function or an empty fixture is refused."""
    err = suite_error(tmp_path, prop_toml(id="p", **{field: value}) if field != "id" else prop_toml(id=value))
    assert field in str(err)


def test_invalid_toml_is_a_suite_error(tmp_path):
    """A file that is not valid TOML is a SuiteError naming the file."""
    err = suite_error(tmp_path, "[[property]\nid = ")
    assert "not valid TOML" in str(err)


def test_non_utf8_file_is_a_suite_error(tmp_path):
    """A file that is not UTF-8 is a SuiteError, not a crash."""
    path = tmp_path / "gate.toml"
    path.write_bytes(b'name = "\xff"\n')
    with pytest.raises(SuiteError, match="not valid TOML"):
        load_suite(path)


def test_no_properties_is_refused(tmp_path):
    """A suite with no [[property]] entries is refused."""
    err = suite_error(tmp_path, "[suite]\nname = 'x'\n")
    assert "no [[property]] entries" in str(err)


def test_property_as_a_table_not_an_array_is_refused(tmp_path):
    """`[property]` (a single table) instead of `[[property]]` is refused."""
    err = suite_error(tmp_path, "[property]\nid = 'x'\n")
    assert "no [[property]] entries" in str(err)


def test_bad_sampler_config_is_refused(tmp_path):
    """A zero-size sampler window is refused, naming the suite table."""
    err = suite_error(tmp_path, "[suite.sampler]\nwindow = 0\n" + prop_toml())
    assert err.field == "suite"
    assert "sampler.window" in str(err)


def test_missing_file_is_input_missing(tmp_path):
    """A suite path that does not exist raises InputMissingError (exit 66) naming it."""
    with pytest.raises(InputMissingError) as info:
        load_suite(tmp_path / "nope.toml")
    assert info.value.exit_code == RET_NOINPUT
    assert "nope.toml" in str(info.value)


def test_directory_instead_of_file_is_input_missing(tmp_path):
    """A directory given as the suite file is InputMissingError, not a crash."""
    with pytest.raises(InputMissingError):
        load_suite(tmp_path)


def test_error_message_counts_further_problems(tmp_path):
    """When a property has several problems, the message shows the first and counts the rest."""
    err = suite_error(tmp_path, prop_toml(id="p", deadline_s=0, fixture="", x=1))
    assert "more)" in str(err)


# --- the sequential (sprt) band rule ---------------------------------------------------------------

SPRT_KEYS = dict(rule="sprt", p0=0.8, p1=0.6, alpha=0.05, beta=0.05, max_trials=120)


def test_sprt_rule_loads_from_property_keys(tmp_path):
    """`rule = "sprt"` with p0, p1, alpha, beta, max_trials (and wave) builds an SprtRule planning max_trials."""
    suite = load_suite(write(tmp_path, prop_toml(id="r", band="statistical", wave=5, **SPRT_KEYS)))
    (prop,) = suite.properties
    assert prop.rule() == SprtRule(p0=0.8, p1=0.6, alpha=0.05, beta=0.05, max_trials=120, wave=5)
    assert prop.planned_trials() == 120


def test_sprt_rule_defaults_alpha_beta_and_wave(tmp_path):
    """Without alpha, beta and wave the sprt rule uses 0.05, 0.05 and waves of 5."""
    suite = load_suite(
        write(tmp_path, prop_toml(id="r", band="statistical", rule="sprt", p0=0.9, p1=0.7, max_trials=80))
    )
    rule = suite.properties[0].rule()
    assert (rule.alpha, rule.beta, rule.wave) == (0.05, 0.05, 5)


def test_explicit_fixed_rule_is_the_default_rule(tmp_path):
    """`rule = "fixed"` with trials/min_hits is the same as leaving the rule out."""
    suite = load_suite(write(tmp_path, prop_toml(id="r", band="statistical", rule="fixed", trials=12, min_hits=9)))
    assert suite.properties[0].rule() == FixedRule(trials=12, min_hits=9)


@pytest.mark.parametrize("fixed_key", [{"trials": 10}, {"min_hits": 8}])
def test_mixing_fixed_keys_into_an_sprt_rule_is_refused(tmp_path, fixed_key):
    """trials or min_hits beside `rule = "sprt"` is refused, naming the property and the rule."""
    err = suite_error(tmp_path, prop_toml(id="r", band="statistical", **SPRT_KEYS, **fixed_key))
    assert err.field == "property r"
    assert "not a key of rule 'sprt'" in str(err)


@pytest.mark.parametrize("sprt_key", [{"p0": 0.8}, {"max_trials": 50}, {"wave": 5}])
def test_sprt_keys_without_the_sprt_rule_are_refused(tmp_path, sprt_key):
    """p0, max_trials or wave on a fixed-rule property is refused with a hint to set rule = "sprt"."""
    err = suite_error(tmp_path, prop_toml(id="r", band="statistical", trials=10, **sprt_key))
    assert err.field == "property r"
    assert 'set rule = "sprt"' in str(err)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"max_trials": None}, "max_trials: Field required"),
        ({"p0": 0.5}, "p1 0.6 must be below p0 0.5"),
        ({"alpha": 0.5}, "alpha"),
        ({"max_trials": 5}, "max_trials 5 is below the 11 straight hits"),
        ({"rule": "bayes"}, "rule"),
    ],
)
def test_bad_sprt_parameters_are_refused_naming_the_property(tmp_path, change, needle):
    """A missing cap, p1 >= p0, alpha out of range, a cap too small to pass or an unknown rule is refused."""
    err = suite_error(tmp_path, prop_toml(id="r", band="statistical", **{**SPRT_KEYS, **change}))
    assert err.field == "property r"
    assert needle in str(err)


@pytest.mark.parametrize("band", ["contract", "safety"])
def test_sprt_rule_on_a_non_statistical_property_is_refused(tmp_path, band):
    """A band rule on a safety or contract property is refused, naming the property."""
    err = suite_error(tmp_path, prop_toml(id="c", band=band, **SPRT_KEYS))
    assert err.field == "property c"
    assert "statistical band only" in str(err)


# --- PropertySpec directly --------------------------------------------------------------------------


@given(st.integers(1, 1000).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n + 5))))
def test_property_spec_accepts_min_hits_up_to_trials_only(case):
    """A statistical PropertySpec validates exactly when min_hits <= trials."""
    trials, min_hits = case
    kwargs = dict(id="r", band="statistical", fixture="f", check="checks:fn", trials=trials, min_hits=min_hits)
    if min_hits <= trials:
        assert PropertySpec(**kwargs).planned_trials() == trials
    else:
        with pytest.raises(ValidationError):
            PropertySpec(**kwargs)


def test_property_spec_is_frozen():
    """A PropertySpec cannot be mutated after loading."""
    p = PropertySpec(id="c", band="contract", fixture="f", check="checks:fn")
    with pytest.raises(ValidationError):
        p.band = Band.SAFETY  # type: ignore[misc]
