"""`gate power` on the command line: argument handling, the printed table, the written plot."""

from __future__ import annotations

import pytest

from gate.cli.arguments import build_parser
from gate.cli.power import parse_rates, run_from_args
from gate.core.errors import UsageError


def power_main(argv: list[str]) -> int:
    """Run `gate power ARGV` in-process; usage errors raise as they would reach the CLI."""
    return run_from_args(build_parser().parse_args(["power", *argv]))


def test_png_plot_is_a_png(tmp_path, capsys):
    """A .png plot path gets a PNG image."""
    plot = tmp_path / "oc.png"
    assert power_main(["--rates", "0.6,0.8,0.9", "--plot", str(plot)]) == 0
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_unknown_plot_format_is_a_usage_error(tmp_path):
    """A plot file name with an unknown suffix is refused before anything is drawn."""
    with pytest.raises(UsageError, match=r"\.svg, \.png"):
        power_main(["--rates", "0.8", "--plot", str(tmp_path / "oc.gif")])


def test_parse_rates_accepts_ranges_and_lists():
    """START:STOP:STEP is inclusive of STOP; a comma list is taken as is."""
    assert parse_rates("0.5:0.95:0.05") == [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    assert parse_rates("0.6,0.8") == [0.6, 0.8]


@pytest.mark.parametrize("text", ["x", "0.5:0.4:0.1", "0.1:0.2:0", "1.5", "0.1:0.2"])
def test_parse_rates_refuses_nonsense(text):
    """Unparseable, backwards, zero-step or out-of-range rates are usage errors."""
    with pytest.raises(UsageError):
        parse_rates(text)


def test_power_command_prints_the_fixed_table(capsys):
    """`gate power --rule fixed --trials 10 --min-hits 8` prints one row per rate with the window column."""
    assert power_main(["--rule", "fixed", "--trials", "10", "--min-hits", "8"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.split()[:1] == ["0.800"])
    assert row.split() == ["0.800", "0.6778", "0.3222", "10.00", "10", "0.8227"]
    assert len([line for line in out.splitlines() if line[:6].strip().startswith("0.")]) == 10


def test_power_command_for_sprt_writes_the_plot(tmp_path, capsys):
    """The sprt form names the equivalent fixed test and writes the SVG plot."""
    plot = tmp_path / "oc.svg"
    argv = "--rule sprt --p0 .8 --p1 .6 --alpha .05 --beta .05 --max-trials 120 --rates 0.6,0.8 --plot"
    assert power_main([*argv.split(), str(plot)]) == 0
    assert "43 of 60" in capsys.readouterr().out
    assert plot.read_text().lstrip().startswith("<?xml")
    assert "<svg" in plot.read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["--rule", "fixed", "--p0", "0.8"],
        ["--rule", "sprt", "--p0", "0.8", "--p1", "0.6"],
        ["--rule", "sprt", "--p0", "0.6", "--p1", "0.8", "--max-trials", "50"],
        ["--rule", "fixed", "--trials", "5", "--min-hits", "6"],
        ["--rule", "bayes"],
        ["--window", "0"],
    ],
)
def test_power_command_usage_errors(argv):
    """Keys of the other rule, a missing or invalid parameter, or a bad window are UsageErrors (exit 64)."""
    with pytest.raises(UsageError) as info:
        power_main(argv)
    assert info.value.exit_code == 64


def test_power_command_unwritable_plot_is_a_usage_error(tmp_path):
    """A plot path in a missing folder is one UsageError naming the file."""
    with pytest.raises(UsageError, match="cannot write the plot"):
        power_main(["--rates", "0.8", "--plot", str(tmp_path / "no" / "oc.svg")])


def test_power_command_for_the_paired_rule_prints_pairs_across_differences(capsys):
    """`--rule paired` prints one row per patch rate against the base rate: the issue's .85 patch is worse."""
    argv = "--rule paired --margin .05 --max-pairs 400 --base-rate .95 --rates 0.85,1 --coupling shared"
    assert power_main(argv.split()) == 0
    out = capsys.readouterr().out
    worse = next(line for line in out.splitlines() if line.split()[:1] == ["0.850"]).split()
    assert worse[1] == "-0.100" and float(worse[3]) > 0.99
    assert next(line for line in out.splitlines() if line.split()[:1] == ["1.000"]).split()[2] == "1.0000"
    assert "pairs shared" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ("--rule paired --margin .05 --max-pairs 400", "base's true hit rate"),
        ("--rule paired --margin .05 --max-pairs 400 --base-rate .9 --p0 .8", "--p0 do not apply to --rule paired"),
        ("--rule sprt --p0 .8 --p1 .6 --max-trials 50 --margin .05", "--margin do not apply to --rule sprt"),
        ("--rule fixed --base-rate .9", "--base-rate do not apply to --rule fixed"),
        ("--rule paired --margin .05 --max-pairs 10 --base-rate .9", "below the 58 agreeing pairs"),
        ("--rule paired --margin .05 --max-pairs 400 --base-rate .9 --plot oc.svg", "prints its table only"),
    ],
)
def test_power_command_paired_usage_errors(argv, needle):
    """A missing base rate, another rule's keys, an unreachable cap or a plot are UsageErrors naming why."""
    with pytest.raises(UsageError, match=needle.replace(".", r"\.").replace("(", r"\(")) as info:
        power_main(argv.split())
    assert info.value.exit_code == 64
