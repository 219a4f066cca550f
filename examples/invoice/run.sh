#!/usr/bin/env bash
# Run the invoice example end to end: provision what is missing (Docker engine when root, the
# sandbox image, a virtualenv with probegate), run the gate on a patched tree, then `accept`.
#
#   examples/invoice/run.sh            # the good patch → artifacts/verdict-card.json
#   examples/invoice/run.sh hangs      # one named patch → artifacts/hangs/verdict-card.json
#   examples/invoice/run.sh --all      # every patch, then a table of kinds and accept results
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
top="$(cd "$here/../.." && pwd)"
cd "$top"

if ! docker info >/dev/null 2>&1 || ! docker image inspect "$(cat sandbox_images/python/TAG)" >/dev/null 2>&1; then
  bash deploy/provision.sh --no-redis || exit $?
fi
if [ ! -x .venv/bin/gate ]; then
  python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check -e . || exit 69
fi
gate="$top/.venv/bin/gate"

run_one() {  # $1 = patch name, $2 = card path
  local patch="$here/patches/$1" fixture="$here/fixtures"
  # A patched tree that carries its own fixture tree is judged against it: that is how drift looks.
  [ -d "$patch/fixtures" ] && fixture="$patch/fixtures"
  # Each patch is judged on new books of its own: a demo, not a CI job, where the ledger must be kept
  # (a file that outlives the job, or --ledger redis://…) and --new-ledger passed only the first time.
  rm -f "$(dirname "$2")/ledger.json"
  "$gate" --log-level warning run --suite "$here/gate.toml" --workdir "$patch" --fixture "$fixture" \
      --seal "$here/.fixture-seal" --retries 0 --card "$2" --new-ledger
  local rc=$?
  # Until the example runs each patch as a commit over a base (--base), nobody checked its oracle edits.
  "$gate" accept --card "$2" --seal "$here/.fixture-seal" --workdir "$patch" --suite "$here/gate.toml" \
      --allow-unchecked-oracle >/dev/null 2>&1
  local acc=$?
  echo "$1: gate run exit $rc, accept exit $acc" >&2
  last_rc=$rc last_acc=$acc
}

case "${1:-good}" in
  --all)
    table=""
    for dir in "$here"/patches/*/; do
      name="$(basename "$dir")"
      run_one "$name" "artifacts/$name/verdict-card.json" >/dev/null 2>&1
      kinds="$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(" ".join(sorted({r["kind"] for r in c["properties"]})))' "artifacts/$name/verdict-card.json")"
      table+="$(printf '%-18s run exit %s  accept exit %s  kinds: %s' "$name" "$last_rc" "$last_acc" "$kinds")"$'\n'
    done
    printf '%s' "$table"
    ;;
  good) run_one good artifacts/verdict-card.json ;;
  *) [ -d "$here/patches/$1" ] || { echo "no patch named $1 (have: $(ls "$here/patches" | tr '\n' ' '))" >&2; exit 64; }
     run_one "$1" "artifacts/$1/verdict-card.json" ;;
esac
