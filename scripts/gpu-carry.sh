#!/usr/bin/env bash
# Plans what the device machine's calls carry. A call sends the working tree (tracked files and
# untracked ones git does not ignore) plus the carried paths, 64 MiB at most; the CUDA bundle
# (~43 MiB) and the tree (~36 MiB: the test fixtures are most of it) no longer fit in one call.
# This prints the tree's size and either the one call's carry list, or splits the bundle into
# parts under .carry/ (ignored through .git/info/exclude) so that each call fits, and prints the
# calls: every call but the last copies its part to /tmp/engram-bundle on the machine (a warm
# machine keeps /tmp between calls made within 30 s of each other); the last joins the parts,
# unpacks the bundle there and runs scripts/gpu-check.sh with the carried extras.
#
#   scripts/gpu-carry.sh [--bundle dist/engram-cuda-*.tar.xz] [--limit-mib 64]
#                        [--peers DIR | --no-peers] [--vulkan-deb auto|PATH] [EXTRA...]
#
# --peers: the PEFT side's scripts (peft_random_bench.py, and peft_check_adapter.py with the
#   peer_common.py it imports), copied to .carry/peers/ and carried with the last call, since
#   ../shared does not travel (default: ../shared/peers where it exists).
# --vulkan-deb: Debian's libvulkan1 package for wgpu on the machine, which has no Vulkan loader;
#   `auto` downloads it into .carry/ with `apt-get download` (needs Debian's registry).
# EXTRA: other paths the last call carries.
# Exit status 2 where even the tree and the extras alone do not fit, or a named input is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=""
limit_mib=64
extras=()
peers=../shared/peers
peers_named=""
vulkan_deb=""
while [ $# -gt 0 ]; do
    case "$1" in
        --bundle) bundle="$2"; shift 2 ;;
        --limit-mib) limit_mib="$2"; shift 2 ;;
        --peers) peers="$2"; peers_named=1; shift 2 ;;
        --no-peers) peers=""; shift ;;
        --vulkan-deb) vulkan_deb="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 { if (!/^#/) exit; print }' "$0"; exit 0 ;;
        -*) echo "gpu-carry.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) extras+=("$1"); shift ;;
    esac
done
[ -n "$bundle" ] || bundle=$(ls dist/engram-cuda-*.tar.xz 2>/dev/null | head -1)
[ -f "$bundle" ] || { echo "gpu-carry.sh: no bundle (build it with scripts/build-cuda.sh, or pass --bundle)" >&2; exit 2; }
mkdir -p .carry
grep -qx '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
rm -f .carry/bundle.part-*

# gpu-check.sh's arguments for what is carried.
check_args=()
if [ -n "$peers" ] && { [ -n "$peers_named" ] || [ -d "$peers" ]; }; then
    rm -rf .carry/peers
    mkdir -p .carry/peers
    for f in peft_random_bench.py peft_check_adapter.py peer_common.py; do
        [ -f "$peers/$f" ] || { echo "gpu-carry.sh: no $peers/$f (--peers names the PEFT scripts' folder)" >&2; exit 2; }
        cp "$peers/$f" .carry/peers/
    done
    extras+=(.carry/peers)
    check_args+=(--peft-python python3 --peft-script .carry/peers/peft_random_bench.py)
fi
if [ "$vulkan_deb" = auto ]; then
    rm -f .carry/libvulkan1_*.deb
    if (cd .carry && apt-get download -q libvulkan1 >/dev/null 2>&1); then
        vulkan_deb=$(ls .carry/libvulkan1_*.deb | head -1)
    else
        echo "gpu-carry.sh: warning: apt-get download libvulkan1 failed; carrying no Vulkan loader (wgpu steps run only where the machine has one)" >&2
        vulkan_deb=""
    fi
fi
if [ -n "$vulkan_deb" ]; then
    [ -f "$vulkan_deb" ] || { echo "gpu-carry.sh: no --vulkan-deb $vulkan_deb" >&2; exit 2; }
    extras+=("$vulkan_deb")
    check_args+=(--vulkan-deb "$vulkan_deb")
fi

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
check="scripts/gpu-check.sh --engram /tmp/$name/engram${check_args[*]:+ ${check_args[*]}} --compilers llvm,nvrtc --out \$OUT"
if [ $(( bsize + extra )) -le "$room" ]; then
    echo "one call: carry $bundle ${extras[*]}"
    echo "  command: tar -C /tmp -xJf $bundle && $check"
    exit 0
fi

# The last call carries the extras and the last part; every other call one full part.
part=$(( room < bsize ? room : bsize ))
last_room=$(( room - extra ))
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
        echo "    command: cp $p /tmp/engram-bundle/ && cat /tmp/engram-bundle/bundle.part-* | tar -C /tmp -xJf - && $check"
    fi
done
