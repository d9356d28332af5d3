#!/bin/sh
# check-layers.sh - fail on an upward #include between the source layers.
#
# Layers, lowest first (docs/architecture.md): a file may include headers of
# its own layer or of a lower one, never of a higher one.
#     base -> oracle -> io -> goldens -> harness -> gates -> receipts -> cli
# goldens/ needs only oracle + io (it records the oracle's outputs), so it
# sits right above io. backends/ (plugins) may include only the ABI header
# harness/dsv4q_backend.h. tests/, bench/ and examples/ may include anything.
# Prints every violation as FILE:LINE: LAYER includes HEADER (LAYER); exit 1
# if there is one, 0 otherwise. Run by `make test`.
cd "$(dirname "$0")/.." || exit 2
rank() {
    case "$1" in
    base) echo 0 ;; oracle) echo 1 ;; io) echo 2 ;; goldens) echo 3 ;; harness) echo 4 ;;
    gates) echo 5 ;; receipts) echo 6 ;; cli) echo 7 ;; *) echo -1 ;;
    esac
}
bad=0
for dir in base oracle io goldens harness gates receipts cli backends; do
    [ -d "$dir" ] || continue
    for f in $(find "$dir" -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cpp' \) | sort); do
        # quoted includes only: "layer/file.h" (or ../layer/file.h)
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
            n=${line%%:*}
            hdr=$(printf '%s\n' "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/; s|^\.\./||')
            case "$hdr" in */*) ;; *) continue ;; esac   # same-directory include
            to=${hdr%%/*}
            if [ "$dir" = backends ]; then
                case "$hdr" in harness/dsv4q_backend.h|backends/*) ;;
                *) echo "$f:$n: backends includes $hdr (a plugin may include only harness/dsv4q_backend.h)" ;;
                esac
                continue
            fi
            rt=$(rank "$to")
            [ "$rt" -lt 0 ] && continue
            if [ "$rt" -gt "$(rank "$dir")" ]; then echo "$f:$n: $dir includes $hdr ($to)"; fi
        done
    done
done > /tmp/check-layers.$$
if [ -s /tmp/check-layers.$$ ]; then
    cat /tmp/check-layers.$$
    echo "check-layers: $(wc -l < /tmp/check-layers.$$) upward include(s)"
    bad=1
else
    echo "check-layers: ok (base -> oracle -> io -> goldens -> harness -> gates -> receipts -> cli)"
fi
rm -f /tmp/check-layers.$$
exit $bad
