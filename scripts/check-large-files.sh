#!/usr/bin/env bash
# Fails, naming them, when tracked files over 1 MB appear (build outputs committed by mistake).
# Generated code (a "Code generated ... DO NOT EDIT." header) is allowed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit=$((1024 * 1024))
bad=()
while IFS= read -r -d '' f; do
	[[ -f $f ]] || continue
	size=$(stat -c %s "$f")
	((size > limit)) || continue
	if head -c 4096 "$f" | grep -q '^// Code generated .* DO NOT EDIT\.$'; then
		continue
	fi
	bad+=("$f ($size bytes)")
done < <(git ls-files -z)
if ((${#bad[@]} > 0)); then
	echo "tracked files over 1 MB (build outputs? add them to .gitignore and git rm --cached):" >&2
	printf '  %s\n' "${bad[@]}" >&2
	exit 1
fi
