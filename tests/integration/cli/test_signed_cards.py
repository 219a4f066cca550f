"""Signed cards end to end, on real Docker and git: `gate run --base` signs the example's card
(--sign-key, or $PROBEGATE_SIGN_KEY), `gate accept --base --key` accepts it unedited and refuses it
edited in one field, re-signed by another key or unsigned where the base's suite names a public key;
a patch that swaps that public key is refused; and a patch hunting for the private key from inside the
sandbox finds neither the key file nor the variables that name or hold it."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from gate_runs import GATE, oracle_args, script_accept, script_run
from support.example_repo import EXAMPLE, Repo, apply_patch, example_repo, git

from gate.core.card.card import VerdictCard
from gate.core.card.evidence import TrialRecord
from gate.core.errors import RET_BLOCKED, RET_OK
from gate.io.artifacts import card_bytes
from gate.io.cardsig import envelope_path
from gate.io.keys import public_path, write_new_key

pytestmark = pytest.mark.integration
# The tests reading `signed` (a gate run) go to one worker (--dist loadgroup), so it is made once.
SHARES_SIGNED = pytest.mark.xdist_group("signed_cards")


def accept(repo: Repo, card: Path, *extra: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    """`gate accept --base` with `extra` flags; (exit, the JSON line)."""
    cmd = [str(GATE), "accept", "--card", str(card), *oracle_args(repo), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> tuple[Repo, Path, Path]:
    """The example's good patch run once with --sign-key (the key outside the repository): (repo, card, key)."""
    root = tmp_path_factory.mktemp("signed")
    key = root / "keys" / "gate.key"
    write_new_key(key)
    repo = example_repo(root / "repo", "good")
    card = root / "out" / "verdict-card.json"
    code, _, stderr = script_run(repo, card, "--new-ledger", "--sign-key", str(key))
    assert code == RET_OK, stderr
    return repo, card, key


@SHARES_SIGNED
def test_signed_card_is_accepted_with_the_key_and_without_one(signed) -> None:
    """The unedited signed card is accepted with --key and with $PROBEGATE_ACCEPT_KEY, naming the key; with
    no key anywhere no signature is required (cards from before signing keep working)."""
    repo, card, key = signed
    assert envelope_path(card).is_file()
    code, line = accept(repo, card, "--key", str(public_path(key)))
    assert (code, line["accepted"]) == (RET_OK, True), line
    assert len(line["signature_key"]) == 64
    env = {**os.environ, "PROBEGATE_ACCEPT_KEY": str(public_path(key))}
    assert accept(repo, card, env=env)[0] == RET_OK
    env = {k: v for k, v in os.environ.items() if k != "PROBEGATE_ACCEPT_KEY"}
    code, line = accept(repo, card, env=env)
    assert (code, "signature_key" in line) == (RET_OK, False)
    done = subprocess.run(
        [str(GATE), "refold", str(card), "--key", str(public_path(key))], capture_output=True, text=True
    )
    assert done.returncode == RET_OK and done.stdout.startswith("signature: verified by key"), done.stdout


@SHARES_SIGNED
def test_an_edited_or_resigned_card_is_refused(signed, tmp_path: Path) -> None:
    """A card edited in one field and written again the way the gate writes cards is accepted without a
    key (nothing recomputable changed) but refused with one; the original card with its envelope re-signed
    by another key is refused too. Each refusal is exit 1 with the reason first in the JSON line."""
    repo, card, key = signed
    forged = tmp_path / "verdict-card.json"
    shutil.copytree(card.parent / "evidence", tmp_path / "evidence")
    original = VerdictCard.model_validate_json(card.read_bytes())
    rows = list(original.properties)
    rows[0] = rows[0].model_copy(update={"durations_s": tuple(d / 2 for d in rows[0].durations_s)})
    forged.write_bytes(card_bytes(original.model_copy(update={"properties": tuple(rows)})))
    assert forged.read_bytes() != card.read_bytes()
    shutil.copy(envelope_path(card), envelope_path(forged))
    assert accept(repo, forged)[0] == RET_OK  # the forgery only a signature can see
    code, line = accept(repo, forged, "--key", str(public_path(key)))
    assert (code, line["accepted"]) == (RET_BLOCKED, False)
    assert "bytes changed after signing" in line["reasons"][0], line

    other = write_new_key(tmp_path / "other.key")
    shutil.copy(card, forged)
    done = subprocess.run([str(GATE), "sign", str(forged), "--key", str(tmp_path / "other.key")], capture_output=True)
    assert done.returncode == RET_OK, done.stderr
    code, line = accept(repo, forged, "--key", str(public_path(key)))
    assert code == RET_BLOCKED and "not signed by the trusted key" in line["reasons"][0], line
    assert other.key_id[:16] in line["reasons"][0]  # the keyid hint names who did sign


def require_signatures(repo: Repo, key: Path) -> Repo:
    """A new base commit whose suite names the public key (committed beside it) in `[suite] public_key`."""
    (repo.root / "keys").mkdir()
    shutil.copy(public_path(key), repo.root / "keys" / "gate.pub")
    suite = repo.suite.read_text().replace("[suite]\n", '[suite]\npublic_key = "keys/gate.pub"\n', 1)
    repo.suite.write_text(suite)
    git(repo.root, "add", "-A")
    git(repo.root, "commit", "-qm", "require signed cards")
    return Repo(root=repo.root, base=git(repo.root, "rev-parse", "HEAD"))


def test_the_suite_requires_a_signature_and_a_patch_cannot_swap_its_key(tmp_path: Path, sandbox_image: str) -> None:
    """With `[suite] public_key` in the base, an unsigned card is refused by a plain `gate accept --base`
    and accepted once `gate sign` signed it; a patch that replaces the committed public key with its own
    and signs with that key is refused (an oracle edit, and not the base's key)."""
    key = tmp_path / "gate.key"
    write_new_key(key)
    repo = require_signatures(example_repo(tmp_path / "repo", None), key)
    card = tmp_path / "out" / "verdict-card.json"
    code, _, stderr = script_run(repo, card, "--new-ledger")
    assert code == RET_OK, stderr
    done = script_accept(repo, card)
    line = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == RET_BLOCKED and line["reasons"][0].startswith("the card is unsigned"), line
    subprocess.run([str(GATE), "sign", str(card), "--key", str(key)], check=True, capture_output=True)
    assert script_accept(repo, card).returncode == RET_OK

    mine = tmp_path / "mine.key"
    write_new_key(mine)
    patched = tmp_path / "patched"
    shutil.copytree(EXAMPLE / "patches" / "good", patched)
    apply_patch(repo.root, patched)
    shutil.copy(public_path(mine), repo.root / "keys" / "gate.pub")
    git(repo.root, "commit", "-qam", "rotate the key (the patch's own)")
    card2 = tmp_path / "out2" / "verdict-card.json"
    code, run_card, _ = script_run(repo, card2, "--new-ledger", "--sign-key", str(mine))
    assert code == RET_BLOCKED and "keys/gate.pub" in run_card["new_oracle_edits"]
    done = script_accept(repo, card2)
    line = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == RET_BLOCKED and "not signed by the trusted key" in line["reasons"][0], line


HUNT = '''

def _hunt():
    """Look for the card-signing key from inside the sandbox: the environment, PID 1's, and the files."""
    import os, sys
    pem = b"PRIVATE" + b" KEY"  # split: this very file must not match
    found = []
    for source in ("/proc/self/environ", "/proc/1/environ"):
        try:
            if pem in open(source, "rb").read() or b"SIGN_KEY" in open(source, "rb").read():
                found.append(source)
        except OSError:
            pass
    seen = 0
    for top in (__KEY_DIR__, "/src", "/work", "/tmp", "/run", "/mnt", "/root", "/home", "/probegate"):
        for folder, _, files in os.walk(top):
            for name in files:
                seen += 1
                try:
                    with open(os.path.join(folder, name), "rb") as handle:
                        if pem in handle.read(65536):
                            found.append(os.path.join(folder, name))
                except OSError:
                    pass
    names = sorted(k for k in os.environ if "KEY" in k or "SIGN" in k)
    print(f"HUNT files={seen} found={found} env={names}", file=sys.stderr)
'''


def test_the_private_key_never_reaches_a_sandbox(tmp_path: Path, sandbox_image: str) -> None:
    """A patch that searches the sandbox's environment, PID 1's and its readable folders (the host key's
    own folder included) for the private key finds nothing, though the run that judged it held the key's
    path in $PROBEGATE_SIGN_KEY and the PEM itself in another variable, as a CI secret would; the card
    is signed all the same."""
    key = tmp_path / "secret" / "gate.key"
    write_new_key(key)
    repo = example_repo(tmp_path / "repo", None)
    patched = tmp_path / "hunting"
    shutil.copytree(EXAMPLE / "patches" / "good", patched)
    api = patched / "invoicing" / "api.py"
    source = api.read_text() + HUNT.replace("__KEY_DIR__", repr(str(key.parent)))
    source = source.replace("    net = sum(", "    _hunt()\n    net = sum(").replace(
        "    words = set(", "    _hunt()\n    words = set("
    )
    api.write_text(source)
    # A control: a decoy key the tree does carry, which the hunt must find (so finding nothing else means something).
    (patched / "invoicing" / "decoy.pem").write_text("-----BEGIN DECOY PRIVATE KEY-----\n")
    apply_patch(repo.root, patched)
    card = tmp_path / "out" / "verdict-card.json"
    env = {**os.environ, "PROBEGATE_SIGN_KEY": str(key), "PROBEGATE_SIGN_KEY_PEM": key.read_text()}
    cmd = [str(GATE), "--log-level", "warning", "run", *oracle_args(repo), "--card", str(card), "--new-ledger"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert "Traceback" not in done.stderr and card.is_file(), done.stderr
    assert envelope_path(card).is_file()  # signed through the environment variable
    hunts = []
    for record in (card.parent / "evidence").iterdir():
        obs = TrialRecord.model_validate_json(record.read_bytes()).observation
        text = obs.stderr.data.decode(errors="replace") + obs.stdout.data.decode(errors="replace")
        assert key.read_text().splitlines()[1] not in text and str(key) not in text
        hunts += [ln for ln in text.splitlines() if ln.startswith("HUNT ")]
    assert len(hunts) == 14, hunts  # every trial hunted (4 single trials and 10 statistical)
    for line in hunts:
        found = ast.literal_eval(line.split(" found=")[1].split(" env=")[0])  # the list the hunt printed
        assert found and all(path.endswith("/invoicing/decoy.pem") for path in found), line
        assert line.endswith(" env=[]"), line
    code, line = accept(repo, card, "--key", str(public_path(key)))
    assert (code, line["accepted"]) == (RET_OK, True), line
