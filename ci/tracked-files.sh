#!/usr/bin/env bash
# Fails, naming each offender, when git tracks a build output: an ELF file
# (a compiled binary) or any file over 5 MB. History keeps what was once
# committed; this keeps it from coming back.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=$((5 * 1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
	if [ -L "$f" ] || [ ! -f "$f" ]; then continue; fi
	size=$(stat -c %s -- "$f")
	if [ "$size" -gt "$limit" ]; then
		echo "tracked file over 5 MB: $f ($size bytes)"; bad=1
	fi
	if [ "$(head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')" = "7f454c46" ]; then
		echo "tracked ELF binary: $f (git rm --cached it; .gitignore covers build outputs)"; bad=1
	fi
done < <(git ls-files -z)
exit "$bad"
