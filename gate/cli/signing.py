"""`gate keys new PATH` and `gate sign CARD --key PRIVATE`: the card-signing key and the envelope
beside a card (gate.io.cardsig). The private key is read only here and by `gate run --sign-key`,
on the machine running the gate, never in a sandbox.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gate.cli.settings import SIGN_KEY_ENV, settings_of
from gate.core.errors import RET_OK, UsageError

_KEYS_EPILOG = (
    "Writes PATH (the private key, PKCS#8 PEM, mode 0600) and PATH.pub (its public half, "
    "SubjectPublicKeyInfo PEM) and prints one JSON line with the key id (sha256 of the raw public key). "
    "Exit 0: written; 64: PATH or PATH.pub is already there (nothing is overwritten), or cannot be written "
    "(under a regular file, a name too long): nothing is written; "
    "65: another process created PATH meanwhile."
)
_SIGN_EPILOG = (
    "Writes CARD.dsse.json beside the card: a DSSE envelope (payloadType application/vnd.in-toto+json) "
    "whose in-toto Statement names the base commit, the patched tree's digest and the card file's sha256, "
    "with the card as its predicate. Exit 0: signed; 64: no key given; 65: the card or the key is "
    "malformed (or the key is readable by others); 66: the card or the key is missing."
)


def add_signing_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Add `keys` and `sign` to the `gate` command's subparsers."""
    keys = subparsers.add_parser("keys", help="create the card-signing key pair", epilog=_KEYS_EPILOG)
    keys.set_defaults(handler="gate.cli.signing:run_keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, parser_class=type(keys))
    new = keys_sub.add_parser("new", help="write a new Ed25519 key to PATH and its public half to PATH.pub")
    new.add_argument("path", type=Path, metavar="PATH", help="where the private key goes (keep it out of the repo)")

    sign = subparsers.add_parser("sign", help="sign a verdict card (the envelope goes beside it)", epilog=_SIGN_EPILOG)
    sign.set_defaults(handler="gate.cli.signing:run_sign")
    sign.add_argument("card", type=Path, metavar="CARD", help="the verdict card to sign, as the run wrote it")
    add_sign_key_argument(sign, "--key", "--sign-key")


def add_sign_key_argument(parser: argparse.ArgumentParser, *flags: str) -> None:
    """The private key flag (`gate run --sign-key`, `gate sign --key`)."""
    parser.add_argument(
        *(flags or ("--sign-key",)),
        dest="sign_key",
        type=Path,
        metavar="PRIVATE",
        help=f"the private key to sign the card with (default ${SIGN_KEY_ENV}); the envelope is CARD.dsse.json",
    )


def sign_key_path(args: argparse.Namespace) -> Path | None:
    """--sign-key, else $PROBEGATE_SIGN_KEY, else None (no signing)."""
    return getattr(args, "sign_key", None) or settings_of(args).sign_key


def run_keys(args: argparse.Namespace) -> int:
    """`gate keys new PATH`: refuse anything in the way, write the pair, print the key id."""
    from gate.io.artifacts import check_writable
    from gate.io.bookstore import exists
    from gate.io.keys import public_path, write_new_key

    path: Path = args.path
    for target in (path, public_path(path)):
        # First whether both halves can be written at all (a folder under a regular file, /proc, a
        # name too long for PATH.pub): refused before either half is.
        check_writable(target, "PATH")
        if exists(target):
            raise UsageError("already exists; refusing to overwrite a key", file=str(target), field="PATH")
    key = write_new_key(path)
    print(json.dumps({"key": str(path), "public": str(public_path(path)), "key_id": key.key_id}))
    return RET_OK


def run_sign(args: argparse.Namespace) -> int:
    """`gate sign CARD --key PRIVATE`: write the envelope beside the card, print where and by which key."""
    path = sign_key_path(args)
    if path is None:
        raise UsageError(f"no key: pass --key PRIVATE or set {SIGN_KEY_ENV}", field="--key")
    from gate.io.cardsig import sign_card_file
    from gate.io.keys import load_signing_key

    key = load_signing_key(path)
    written = sign_card_file(args.card, key)
    print(json.dumps({"card": str(args.card), "signature": str(written), "key_id": key.key_id}))
    return RET_OK
