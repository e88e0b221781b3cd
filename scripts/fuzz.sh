#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each (a duration,
# or Nx for N inputs): `make test` briefly, `make fuzz` for longer.
#
# Targets are found, not listed: `go test -list` in each package that has
# a `func Fuzz…` in a test file. go fuzzes one target of one package per
# invocation, so each runs on its own. A failure does not stop the others;
# the run fails at the end, naming every target that failed. go saves a
# failing input under the package's testdata/fuzz/<Target>/: once the bug
# is fixed, commit it there as a regression input (go test runs it every
# time). The fuzzing cache itself lives in GOCACHE, outside the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
root=$(pwd -P)

# A GOCACHE inside the tree would put the fuzz cache (every interesting
# input go finds) in the work tree.
cache=$("$GO" env GOCACHE)
case "$(cd "$cache" 2>/dev/null && pwd -P || echo "$cache")/" in
  "$root"/*)
    echo "fuzz: GOCACHE ($cache) is inside the work tree; the fuzz cache must stay out of it" >&2
    exit 1
    ;;
esac

# Packages whose test files declare a fuzz target; grep first so that only
# those are compiled for the listing. go ignores testdata/ and _dirs, and
# so does `go list`, which turns the dirs into import paths.
mapfile -t dirs < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Z0-9_]' . 2>/dev/null |
  grep -v -E '(^|/)(testdata|_[^/]*|\.[^/]+)/' | xargs -r -n1 dirname | sort -u)
targets=()
if [ ${#dirs[@]} -gt 0 ]; then
  mapfile -t pkgs < <("$GO" list "${dirs[@]}")
  for pkg in "${pkgs[@]}"; do
    listing=$("$GO" test -list '^Fuzz' "$pkg") || { echo "$listing" >&2; echo "fuzz: cannot list the fuzz targets of $pkg" >&2; exit 1; }
    while read -r name; do
      targets+=("$pkg $name")
    done < <(printf '%s\n' "$listing" | grep -E '^Fuzz[A-Za-z0-9_]*$' || true)
  done
fi

if [ ${#targets[@]} -eq 0 ]; then
  echo "fuzz: no fuzz targets in the module"
  exit 0
fi

# go1.26's fuzz coordinator can fail a target at the end of a duration
# -fuzztime with a bare "context deadline exceeded" when a worker is slow
# to stop (a loaded machine): go.dev/issue/75804, fixed in go1.27. Such a
# run found nothing (go writes a failing input and says so when it does),
# so the target's seed corpus and saved inputs are replayed instead, and
# only a failure there counts. Any other failure counts as it is.
deadline_flake() {
  grep -q 'context deadline exceeded' "$1" &&
    ! grep -q -E 'Failing input written|panic:|_test\.go:[0-9]+:' "$1"
}

echo "fuzz: ${#targets[@]} targets, $FUZZTIME each"
failed=()
flaked=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for t in "${targets[@]}"; do
  pkg=${t% *} name=${t#* }
  echo "==> fuzz $pkg $name ($FUZZTIME)"
  if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"; then
    continue
  fi
  if deadline_flake "$out"; then
    echo "fuzz: $name stopped on go's fuzztime deadline race (go.dev/issue/75804) with no failing input; replaying its corpus"
    if "$GO" test -count=1 -run "^${name}\$" "$pkg"; then
      flaked=$((flaked + 1))
      continue
    fi
  fi
  failed+=("$pkg $name")
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} of ${#targets[@]} targets failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "fuzz: go saved each failing input in the package's testdata/fuzz/<Target>/ (the lines above name it); fix the bug, then commit the input as a regression case" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets passed ($flaked replayed after go's deadline race)"
