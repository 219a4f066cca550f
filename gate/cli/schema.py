"""`gate schema card|suite`: the JSON schema of the verdict card or of gate.toml."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gate.core.errors import RET_OK


def add_schema_parser(sub: argparse._SubParsersAction) -> None:
    """The `schema` subcommand."""
    schema = sub.add_parser("schema", help="print a JSON schema")
    schema.set_defaults(handler="gate.cli.schema:schema_command")
    schema.add_argument("what", choices=["card", "suite"], help="card: the verdict card; suite: gate.toml")


def schema_command(args: argparse.Namespace) -> int:
    """Print the schema `args.what` names."""
    print(json.dumps(schema_of(args.what), indent=2))
    return RET_OK


def schema_of(what: str) -> dict[str, Any]:
    """The JSON schema of the verdict card, or of gate.toml (its `[suite]` table and `[[property]]` list)."""
    if what == "card":
        from gate.core.card.card import VerdictCard

        return VerdictCard.model_json_schema()
    from pydantic import ConfigDict, Field, create_model

    from gate.core.suite.property import PropertySpec
    from gate.core.suite.suite import SuiteConfig

    suite_file = create_model(
        "SuiteFile",
        __config__=ConfigDict(extra="forbid"),
        suite=(SuiteConfig, SuiteConfig()),
        property=(list[PropertySpec], Field(min_length=1)),
    )
    return suite_file.model_json_schema()
