#!/usr/bin/env bash
# Run the invoice example end to end: provision what is missing (Docker engine when root, the
# sandbox image, a virtualenv with probegate), commit a patch over the example's base in a throwaway
# git repository (patch_repo.py), run the gate with --base on it, then `accept --base`.
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
  # The patch lands as a commit over the example's base in a throwaway repository, as an agent's
  # patch would in yours; the gate reads the oracle from the base commit (--base), never from it.
  local repo base card
  mkdir -p "$(dirname "$2")"
  card="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
  repo="$(mktemp -d /tmp/probegate-example.XXXXXX)/repo"
  base="$(python3 "$here/patch_repo.py" "$repo" "$1")" || return 69
  # Each patch is judged on new books of its own: a demo, not a CI job, where the ledger must be kept
  # (a file that outlives the job, or --ledger redis://…) and --new-ledger passed only the first time.
  rm -f "$(dirname "$card")/ledger.json"
  local oracle=(--suite "$repo/gate.toml" --workdir "$repo/app" --seal "$repo/.fixture-seal" --base "$base")
  "$gate" --log-level warning run "${oracle[@]}" --retries 0 --card "$card" --new-ledger
  local rc=$?
  "$gate" accept --card "$card" "${oracle[@]}" >/dev/null 2>&1
  local acc=$?
  rm -rf "$(dirname "$repo")"
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
