#!/bin/sh
# check-layers.sh - fail on an upward #include between the rooms of the tree.
#
# Rooms, lowest first (docs/architecture.md has the picture): a file may
# include headers of its own room or of a lower one, never of a higher one.
# A room is a top-level folder, or a subfolder of harness/ and backends/:
#     abi -> base -> oracle -> io -> goldens -> backends/cpuref
#         -> harness/cases -> harness/ops -> harness/measure -> harness/backend
#         -> harness/provider -> harness/capture -> harness/qualify
#         -> gates -> receipts -> cli -> mpi
# abi/ is the backend ABI, self-contained (it includes nothing of ours);
# goldens/ needs only oracle + io. harness/cases is the mechanism of a
# qualification case (the object, the key grammar, the input generators);
# harness/ops, the operators' descriptors, builds cases with it.
# backends/cpuref is a built-in backend: the
# ABI plus the number-format definitions of oracle/formats.h, nothing of the
# harness. Plugins (backends/cuda/, any other backends/ folder) may include
# only the ABI (abi/dsv4q_backend.h, or its old path harness/dsv4q_backend.h)
# and their own folder. tests/, bench/, examples/, fuzz/ include anything.
# Prints every violation as FILE:LINE: ROOM includes HEADER (ROOM); exit 1
# if there is one, 0 otherwise. Run by `make test`.
cd "$(dirname "$0")/.." || exit 2
ORDER="abi base oracle io goldens backends/cpuref harness/cases harness/ops harness/measure harness/backend
       harness/provider harness/capture harness/qualify gates receipts cli mpi"
rank() {
    i=0
    for r in $ORDER; do
        [ "$r" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
    echo -1
}
# The room of a path: harness/X/... and backends/X/... by subfolder (a file
# directly in harness/ is the forwarding ABI header: room abi).
room() {
    case "$1" in
    harness/dsv4q_backend.h) echo abi ;;
    harness/*/* | backends/*/*) echo "$1" | cut -d/ -f1-2 ;;
    */*) echo "${1%%/*}" ;;
    *) echo "" ;;
    esac
}
for f in $(find abi base oracle io goldens harness gates receipts cli mpi backends -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cpp' \) 2>/dev/null | sort); do
    from=$(room "$f")
    # quoted includes only: "room/file.h" (or ../room/file.h)
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
        n=${line%%:*}
        hdr=$(printf '%s\n' "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/; s|^\.\./||')
        case "$hdr" in */*) ;; *) continue ;; esac   # same-directory include
        to=$(room "$hdr")
        case "$from" in
        backends/cpuref) ;;
        backends/*)
            case "$hdr" in abi/dsv4q_backend.h|harness/dsv4q_backend.h|"$from"/*) ;;
            *) echo "$f:$n: $from includes $hdr (a plugin may include only abi/dsv4q_backend.h)" ;;
            esac
            continue ;;
        esac
        rt=$(rank "$to")
        [ "$rt" -lt 0 ] && { echo "$f:$n: $from includes $hdr: no such room"; continue; }
        if [ "$rt" -gt "$(rank "$from")" ]; then echo "$f:$n: $from includes $hdr ($to)"; fi
    done
done > /tmp/check-layers.$$
if [ -s /tmp/check-layers.$$ ]; then
    cat /tmp/check-layers.$$
    echo "check-layers: $(wc -l < /tmp/check-layers.$$) upward include(s)"
    bad=1
else
    echo "check-layers: ok ($(echo $ORDER | sed 's/ / -> /g'))"
    bad=0
fi
rm -f /tmp/check-layers.$$
exit $bad
