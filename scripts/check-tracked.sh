#!/usr/bin/env bash
# Fails when a file in git's index is binary or larger than the limit.
# Build outputs (drover, *.test, bin/) once got committed by accident; this
# is the guard. It reads the index, not the work tree, so a staged file is
# caught before it is committed. Outside a git checkout it has nothing to
# check and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=${MAX_TRACKED_BYTES:-1048576}

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-tracked: not a git checkout; nothing to check"
  exit 0
fi

fail=0
# git's own binary test (a NUL byte in the first 8000 bytes, or a
# .gitattributes rule): numstat prints "-  -" for such a file.
empty=$(git hash-object -t tree /dev/null)
while IFS=$'\t' read -r added _ path; do
  if [ "$added" = "-" ]; then
    echo "check-tracked: $path is a binary file; build outputs must not be tracked (git rm --cached '$path', then ignore it)" >&2
    fail=1
  fi
done < <(git diff --cached --numstat --no-renames "$empty")

# Sizes of the staged blobs; submodules (mode 160000) have none here.
while read -r size path; do
  if [ "$size" -gt "$limit" ]; then
    echo "check-tracked: $path is $size bytes, over the $limit-byte limit for tracked files" >&2
    fail=1
  fi
done < <(git ls-files --stage | awk -F'\t' '{split($1, m, " "); if (m[1] != "160000") print m[2] " " $2}' |
  git cat-file --batch-check='%(objectsize) %(rest)')

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "check-tracked: $(git ls-files | wc -l | tr -d ' ') tracked files, none binary or over $limit bytes"
