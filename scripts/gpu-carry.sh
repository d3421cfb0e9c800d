#!/usr/bin/env bash
# Plans what the device machine's calls carry. A call sends the working tree (tracked files and
# untracked ones git does not ignore) plus the carried paths, 64 MiB at most; the CUDA bundle
# (~43 MiB) and the tree (~36 MiB: the test fixtures are most of it) no longer fit in one call.
# This prints the tree's size and either the one call's carry list, or splits the bundle into
# parts under .carry/ (ignored through .git/info/exclude) so that each call fits, and prints the
# calls: every call but the last copies its part to /tmp/engram-bundle on the machine (a warm
# machine keeps /tmp between calls made within 30 s of each other); the last joins the parts
# and unpacks the bundle there.
#
#   scripts/gpu-carry.sh [--bundle dist/engram-cuda-*.tar.xz] [--limit-mib 64] [EXTRA...]
#
# EXTRA: other paths the last call carries (Debian's libvulkan1 .deb, a copy of the PEFT script).
# Exit status 2 where even the tree and the extras alone do not fit.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=""
limit_mib=64
extras=()
while [ $# -gt 0 ]; do
    case "$1" in
        --bundle) bundle="$2"; shift 2 ;;
        --limit-mib) limit_mib="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 { if (!/^#/) exit; print }' "$0"; exit 0 ;;
        *) extras+=("$1"); shift ;;
    esac
done
[ -n "$bundle" ] || bundle=$(ls dist/engram-cuda-*.tar.xz 2>/dev/null | head -1)
[ -f "$bundle" ] || { echo "gpu-carry.sh: no bundle (build it with scripts/build-cuda.sh, or pass --bundle)" >&2; exit 2; }

mib=1048576
# A margin for the call's own bookkeeping.
limit=$(( limit_mib * mib - mib / 2 ))
size_of() { du -cb "$@" 2>/dev/null | tail -1 | cut -f1; }
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null \
    | awk '{s += $1} END {print s + 0}')
extra=0
[ ${#extras[@]} -eq 0 ] || extra=$(size_of "${extras[@]}")
bsize=$(stat -c %s "$bundle")
mibs() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "tree: $(mibs "$tree"); bundle: $(mibs "$bsize") ($bundle); extras: $(mibs "$extra"); limit: $limit_mib MiB a call"

room=$(( limit - tree ))
if [ $(( room - extra )) -le 0 ]; then
    echo "gpu-carry.sh: the tree and the extras alone take $(mibs $(( tree + extra ))): nothing of the bundle fits" >&2
    exit 2
fi
name=$(basename "$bundle" .tar.xz)
if [ $(( bsize + extra )) -le "$room" ]; then
    echo "one call: carry $bundle ${extras[*]}"
    echo "  command: tar -C /tmp -xJf $bundle && scripts/gpu-check.sh --engram /tmp/$name/engram ..."
    exit 0
fi

# The last call carries the extras and the last part; every other call one full part.
part=$(( room < bsize ? room : bsize ))
last_room=$(( room - extra ))
mkdir -p .carry
grep -qx '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
rm -f .carry/bundle.part-*
# Parts of `part` bytes, the last holding the rest; shrink them until the rest fits the last call.
while :; do
    rest=$(( bsize % part ))
    [ "$rest" -eq 0 ] && rest=$part
    [ "$rest" -le "$last_room" ] && break
    part=$(( part - mib ))
    [ "$part" -gt 0 ] || { echo "gpu-carry.sh: no split fits" >&2; exit 2; }
done
split -b "$part" -d -a 2 "$bundle" .carry/bundle.part-
parts=(.carry/bundle.part-*)
echo "${#parts[@]} calls, each within 30 s of the one before (the machine stays warm that long):"
for i in "${!parts[@]}"; do
    p="${parts[$i]}"
    if [ "$i" -lt $(( ${#parts[@]} - 1 )) ]; then
        echo "  call $((i + 1)): carry $p ($(mibs "$(stat -c %s "$p")"))"
        echo "    command: mkdir -p /tmp/engram-bundle && cp $p /tmp/engram-bundle/"
    else
        echo "  call $((i + 1)): carry $p ${extras[*]} ($(mibs $(( $(stat -c %s "$p") + extra ))))"
        echo "    command: cp $p /tmp/engram-bundle/ && cat /tmp/engram-bundle/bundle.part-* | tar -C /tmp -xJf - && scripts/gpu-check.sh --engram /tmp/$name/engram ..."
    fi
done
