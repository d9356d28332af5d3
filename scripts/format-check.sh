#!/bin/sh
# format-check.sh - are the C lines a change touches laid out as .clang-format
# says? Old code is not judged: the tree predates .clang-format and is not
# reformatted wholesale, so only the lines that differ between BASE and the
# checked revision are formatted (git clang-format, which passes clang-format
# exactly those line ranges) and compared.
#
# usage: scripts/format-check.sh [BASE [REV]]
#   BASE  the revision the change starts from (default: REV~1, the last
#         commit; a CI passes the base of what it is checking)
#   REV   the revision checked (default: HEAD); "-" checks the working tree
#         against BASE, uncommitted edits included (before a commit)
# Files: *.c *.h changed between BASE and REV, except tests/backends/v1/ (a
# frozen copy of a released header). Prints the files whose changed lines are
# not formatted, then the diff that would fix them, and exits 1; 0 when every
# changed line is formatted (or nothing C changed); 2 on a usage error or a
# missing clang-format. To fix: `git clang-format BASE` (rewrites only the
# changed lines of the working tree).
cd "$(dirname "$0")/.." || exit 2
rev=${2:-HEAD}
if [ "$rev" = - ]; then base=${1:-HEAD}; else base=${1:-$rev~1}; fi
CF=${CLANG_FORMAT:-clang-format}
command -v "$CF" >/dev/null 2>&1 || { echo "format-check: $CF not found (Debian: apt-get install clang-format)" >&2; exit 2; }
command -v git-clang-format >/dev/null 2>&1 || { echo "format-check: git-clang-format not found (Debian's clang-format package has it)" >&2; exit 2; }
git rev-parse -q --verify "$base^{commit}" >/dev/null || { echo "format-check: no revision '$base' (a shallow clone?)" >&2; exit 2; }
if [ "$rev" = - ]; then
    files=$(git diff --name-only --diff-filter=ACMR "$base" -- '*.c' '*.h' | grep -v '^tests/backends/v1/')
else
    files=$(git diff --name-only --diff-filter=ACMR "$base" "$rev" -- '*.c' '*.h' | grep -v '^tests/backends/v1/')
fi
if [ -z "$files" ]; then
    echo "format-check: ok (no C file changed since $base)"
    exit 0
fi
if [ "$rev" = - ]; then
    out=$(git clang-format --binary "$CF" --diff --extensions c,h "$base" -- $files 2>&1)
else
    out=$(git clang-format --binary "$CF" --diff --extensions c,h "$base" "$rev" -- $files 2>&1)
fi
case "$out" in
*"did not modify any files"* | *"no modified files to format"* | "")
    echo "format-check: ok ($(echo "$files" | wc -l | tr -d ' ') changed C files since $base)"
    exit 0 ;;
"diff --git"*) ;;
*) echo "format-check: git clang-format failed: $out" >&2; exit 2 ;;
esac
# Drop the hunks whose only difference is the spacing before a trailing
# block comment (the house writes three spaces; clang-format 14 cannot).
command -v python3 >/dev/null 2>&1 || { echo "format-check: python3 not found" >&2; exit 2; }
out=$(printf '%s\n' "$out" | python3 -c '
import re, sys
norm = lambda l: re.sub(r"(\S)[ \t]+/\*", r"\1 /*", l)
text = sys.stdin.read().split("\n")
files, cur, hunk = [], None, None
def close():
    if hunk and [norm(x) for x in hunk[1]] != [norm(x) for x in hunk[2]]:
        cur[1].append(hunk[0])
for line in text:
    if line.startswith("diff --git"):
        close(); hunk = None
        cur = [[line], []]; files.append(cur)
    elif line.startswith("@@") and cur:
        close(); hunk = [[line], [], []]
    elif hunk is not None and line[:1] in (" ", "-", "+"):
        hunk[0].append(line)
        if line[:1] != "+": hunk[1].append(line[1:])
        if line[:1] != "-": hunk[2].append(line[1:])
    elif cur is not None and hunk is None:
        cur[0].append(line)
close()
for head, hunks in files:
    if hunks:
        print("\n".join(head + [l for h in hunks for l in h]))
')
if [ -z "$out" ]; then
    echo "format-check: ok ($(echo "$files" | wc -l | tr -d ' ') changed C files since $base; trailing-comment spacing aside)"
    exit 0
fi
echo "format-check: changed lines not formatted as .clang-format says in:"
printf '%s\n' "$out" | sed -n 's|^diff --git a/\(.*\) b/.*|  \1|p'
echo "(fix: git clang-format $base, then restore any trailing-comment spacing you prefer; the diff follows)"
printf '%s\n' "$out"
exit 1
