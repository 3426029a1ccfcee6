#!/usr/bin/env bash
# line_budget.sh: no source file over 600 lines. Files already over it are listed in
# scripts/line_budget_known.txt with the length they may not exceed (a ratchet: lower or delete
# their line as they shrink). Prints every file over the budget; fails on a new one or growth.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=600
known=scripts/line_budget_known.txt
status=0
over=0
while read -r lines path; do
  [ "$path" = total ] && continue
  [ "$lines" -le "$budget" ] && continue
  over=$((over + 1))
  allowed=$(awk -v p="$path" '$1 == p {print $2}' "$known")
  if [ -z "$allowed" ]; then
    echo "line budget: $path has $lines lines (budget $budget): split it by what it does"; status=1
  elif [ "$lines" -gt "$allowed" ]; then
    echo "line budget: $path grew to $lines lines (known at $allowed, budget $budget)"; status=1
  else
    echo "line budget: $path $lines lines (known over the budget of $budget)"
  fi
done < <(find src include tests fuzz bench scripts -type f \
           \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.def' -o -name '*.py' -o -name '*.sh' \) \
           -print0 | xargs -0 wc -l)
while read -r path _; do
  [ -z "$path" ] || [ "${path#\#}" != "$path" ] || [ -f "$path" ] || { echo "line budget: $known lists $path, which is gone"; status=1; }
done < "$known"
echo "line budget: $over files over $budget lines"
exit $status
