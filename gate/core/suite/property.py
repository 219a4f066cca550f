"""A property's declaration in gate.toml (`[[property]]`): its band, fixture, check and deadline, and for a
statistical one the rule that judges it. Validation is strict: an unclassified property, a key of another
rule or a band without a sane rule is refused in one line naming the field."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    model_validator,
)

from gate.core.verdicts.bands import FixedRule, SprtRule
from gate.core.verdicts.paired import PairedRule
from gate.core.verdicts.verdict import Band

# Numbers and booleans below are Strict* (TOML has real ones, so `deadline_s = "2"` is a mistake, not
# a 2), and no float may be NaN or infinite.
STRICT = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
_RULE_KEYS: dict[str, tuple[str, ...]] = {
    "fixed": ("trials", "min_hits"),
    "sprt": ("p0", "p1", "alpha", "beta", "max_trials", "wave"),
    "paired": ("margin", "alpha", "beta", "max_pairs", "wave"),
}
# The one rule each key belongs to alone: a stray one gets a hint to set that rule.
_HINTS = {"p0": "sprt", "p1": "sprt", "max_trials": "sprt", "margin": "paired", "max_pairs": "paired"}
_SEQUENTIAL = {"sprt": "the sequential test", "paired": "the paired test against the base"}


class PropertySpec(BaseModel):
    model_config = STRICT
    id: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    band: Band
    fixture: str = Field(min_length=1)
    check: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")
    deadline_s: StrictFloat = Field(2.0, gt=0, le=3600)
    timeout_is_safety: StrictBool = False
    # Band rule, statistical only: `rule = "fixed"` (the default) with trials/min_hits,
    # `rule = "sprt"` with p0, p1, alpha, beta, max_trials, wave, or `rule = "paired"` with margin,
    # alpha, beta, max_pairs, wave. The field is `rule_name` because `rule()` returns the built rule;
    # in gate.toml the key is `rule`.
    rule_name: Literal["fixed", "sprt", "paired"] | None = Field(None, alias="rule")
    trials: StrictInt | None = None
    min_hits: StrictInt | None = None
    p0: StrictFloat | None = None
    p1: StrictFloat | None = None
    alpha: StrictFloat | None = None
    beta: StrictFloat | None = None
    max_trials: StrictInt | None = None
    wave: StrictInt | None = None
    margin: StrictFloat | None = None
    max_pairs: StrictInt | None = None
    # Safety and contract only: run the fixture this many times. One miss still decides (no retries);
    # more trials only show whether the property changes colour on identical sealed bytes.
    repeat: StrictInt | None = Field(None, ge=1, le=1000)
    params: dict[str, Any] = {}

    @model_validator(mode="after")
    def _band_fields(self) -> PropertySpec:
        given = ["rule"] if self.rule_name is not None else []
        keys = dict.fromkeys(key for keys in _RULE_KEYS.values() for key in keys)  # once each, in order
        given += [key for key in keys if getattr(self, key) is not None]
        if self.band is not Band.STATISTICAL and given:
            raise ValueError(f"{'/'.join(given)} apply to the statistical band only, not {self.band}")
        if self.band is Band.STATISTICAL and self.repeat is not None:
            raise ValueError("repeat applies to safety and contract properties; a statistical one sets its rule")
        kind = self.rule_name or "fixed"
        foreign = [name for name in given if name != "rule" and name not in _RULE_KEYS[kind]]
        if foreign:
            # alpha, beta and wave belong to both sequential rules; beside a fixed one they hint sprt, as ever.
            wanted = next((_HINTS[name] for name in foreign if name in _HINTS), "sprt" if kind == "fixed" else None)
            hint = f'; set rule = "{wanted}" for {_SEQUENTIAL[wanted]}' if wanted and wanted != kind else ""
            raise ValueError(
                f"{'/'.join(foreign)}: not a key of rule {kind!r}, which takes {', '.join(_RULE_KEYS[kind])}{hint}"
            )
        try:
            self.rule()  # validates the rule's own constraints (min_hits <= trials, p1 < p0, ...)
        except ValidationError as exc:
            raise ValueError(validation_line(exc)) from None
        write_map = self.params.get("write_map", [])
        if self.check == "builtin:no_unmapped_write" and not (
            isinstance(write_map, list) and all(isinstance(glob, str) for glob in write_map)
        ):
            raise ValueError(f"params.write_map must be a list of globs, not {write_map!r}")
        return self

    def rule(self) -> FixedRule | SprtRule | PairedRule | None:
        """The band rule for a statistical property (the notes' default: 8 of 10)."""
        if self.band is not Band.STATISTICAL:
            return None
        if self.rule_name in ("sprt", "paired"):
            fields = {key: getattr(self, key) for key in _RULE_KEYS[self.rule_name]}
            given = {key: value for key, value in fields.items() if value is not None}
            return SprtRule(**given) if self.rule_name == "sprt" else PairedRule(**given)
        return FixedRule(
            trials=10 if self.trials is None else self.trials, min_hits=8 if self.min_hits is None else self.min_hits
        )

    def planned_trials(self) -> int:
        rule = self.rule()
        return rule.planned_trials() if rule else (self.repeat or 1)


def validation_line(exc: ValidationError) -> str:
    """The first validation problem as `field: message`, with a count of the rest."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    message = first["msg"].removeprefix("Value error, ")
    return f"{where}: {message}{more}" if where else f"{message}{more}"
