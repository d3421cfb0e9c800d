#!/usr/bin/env bash
# Builds engram with the CUDA backend on a machine that reaches only package registries
# (crates.io, PyPI) — no GitHub, no CUDA toolkit — and packs a self-contained bundle.
#
# Burn's cuda backend compiles its kernels through LLVM (cubecl-cuda -> cubecl-llvm ->
# tracel-llvm-bundler), whose build script would download a prebuilt LLVM from GitHub unless
# the SDK is already in place. PyPI ships a matching LLVM 23 static SDK (mlc-llvm-static), and
# the CUDA device library that kernels using math functions link (libdevice.10.bc) ships in
# nvidia-cuda-nvcc-cu12. Both are fetched into a cache by pinned version and SHA-256.
#
#   scripts/build-cuda.sh [--out DIR] [--cuda-version 12080]
#
# Output: DIR/engram-cuda-<version>-x86_64-linux.tar.xz (default DIR: dist/) holding
#   engram                           launcher: sets CUDA_PATH to the bundle, runs bin/engram
#   bin/engram                       the stripped release binary (cuda + wgpu + cpu backends)
#   nvvm/libdevice/libdevice.10.bc   CUDA's device math library (the LLVM kernel compiler links it)
#   include/                         CUDA headers for the NVRTC kernel compiler
#                                    (CUBECL_CUDA_COMPILER=nvrtc), licenses/ theirs
#   BUILD-INFO                       the commit it was built from (dirty=true: with local
#                                    changes), when, and with which features and toolchain
# The binary needs glibc >= 2.35, libstdc++ and, at run time, the NVIDIA driver (libcuda.so.1).
#
# With internet access the plain `cargo build --release -p engram-cli --features cuda` works
# too (tracel-llvm-bundler downloads LLVM from GitHub; cudarc asks `nvcc --version` for the
# CUDA version, or reads CUDARC_CUDA_VERSION).
#
# Environment: ENGRAM_BUILD_CACHE (default ~/.cache/engram-build), CARGO_TARGET_DIR, PYTHON
# (python3 >= 3.10: the SDK's llvm-config is a Python script).
set -euo pipefail
cd "$(dirname "$0")/.."

out=dist
cuda_version="${CUDARC_CUDA_VERSION:-12080}"
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --cuda-version) cuda_version="$2"; shift 2 ;;
        -h|--help) awk 'NR > 1 { if (!/^#/) exit; print }' "$0"; exit 0 ;;
        *) echo "build-cuda.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

cache="${ENGRAM_BUILD_CACHE:-$HOME/.cache/engram-build}"
python="${PYTHON:-python3}"
mkdir -p "$cache/wheels" "$out"

die() { echo "build-cuda.sh: $*" >&2; exit 1; }
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$python is older than 3.10 (the LLVM SDK's llvm-config needs 3.10+); set PYTHON"
command -v g++ >/dev/null || die "g++ is needed (tracel-llvm-bundler builds two C++ shims)"
command -v xz >/dev/null || die "xz is needed to pack the bundle"

# 1. The wheels, pinned and checksummed (pip refuses any other bytes).
req="$cache/requirements.txt"
cat > "$req" <<'REQ'
mlc-llvm-static==23.1.1.post0 --hash=sha256:dcfec888abfaa418be77d41af585805f31463584cf9c90582992c00f392c1ac5
mlc-llvm-static-extra-targets==23.1.1.post0 --hash=sha256:c36e834d9a4e9cf9759f27fece65711ece7a2fc2b5a96dbb15d66f5e9e787929
nvidia-cuda-nvcc-cu12==12.9.86 --hash=sha256:5d6a0d32fdc7ea39917c20065614ae93add6f577d840233237ff08e9a38f58f0
nvidia-cuda-runtime-cu12==12.9.79 --hash=sha256:25bba2dfb01d48a9b59ca474a1ac43c6ebf7011f1b0b8cc44f54eb6ac48a96c3
nvidia-cuda-cccl-cu12==12.9.27 --hash=sha256:37869e17ce2e1ecec6eddf1927cca0f8c34e64fd848d40453df559091e2d7117
REQ
echo "== fetching the LLVM SDK, libdevice and CUDA header wheels into $cache/wheels"
"$python" -m pip download --quiet --no-deps --require-hashes --only-binary :all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_12_x86_64 \
    --python-version 3.11 -r "$req" -d "$cache/wheels"

# 2. The LLVM SDK where tracel-llvm-bundler looks (dirs::data_local_dir()/tracel/...), with
#    the sentinel that makes its build script skip the download.
sdk="$cache/llvm-sdk"
if [ ! -x "$sdk/mlc_llvm_static/static/bin/llvm-config" ]; then
    echo "== unpacking the LLVM SDK into $sdk"
    rm -rf "$sdk"
    "$python" -m pip install --quiet --no-deps --no-index --find-links "$cache/wheels" \
        --target "$sdk" mlc-llvm-static==23.1.1.post0 mlc-llvm-static-extra-targets==23.1.1.post0
fi
export XDG_DATA_HOME="$cache/xdg"
llvm_home="$XDG_DATA_HOME/tracel/tracel-llvm-23.1.0-4"
mkdir -p "$XDG_DATA_HOME/tracel"
ln -sfn "$sdk/mlc_llvm_static/static" "$llvm_home"
# Created once: the bundler's build script reruns when the sentinel's mtime changes, and with
# it cubecl-llvm and everything above it (a 22-minute "warm" build).
[ -f "$llvm_home/.tracel-llvm-installed" ] || touch "$llvm_home/.tracel-llvm-installed"

# 3. libdevice out of the nvcc wheel.
libdevice="$cache/libdevice/nvvm/libdevice/libdevice.10.bc"
if [ ! -f "$libdevice" ]; then
    mkdir -p "$(dirname "$libdevice")"
    "$python" - "$cache/wheels" "$libdevice" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/nvidia_cuda_nvcc_cu12-12.9.86-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as f:
    f.write(z.read("nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc"))
PY
fi

# 3b. The CUDA headers that NVRTC-compiled kernels include (cuda_fp16.h, cuda_bf16.h, mma.h,
#     cooperative_groups.h from the runtime wheel; cuda/barrier from CCCL), for the NVRTC compiler
#     (CUBECL_CUDA_COMPILER=nvrtc; libnvrtc itself is not bundled, 100 MB: it comes from the
#     machine's toolkit or PyPI nvidia-cuda-nvrtc-cu12), and their licenses.
headers="$cache/cuda-headers"
if [ ! -f "$headers/include/cuda/barrier" ]; then
    rm -rf "$headers"
    mkdir -p "$headers/include" "$headers/licenses"
    "$python" - "$cache/wheels" "$headers" <<'PY'
import glob, os, sys, zipfile
wheels, out = sys.argv[1], sys.argv[2]
for name, prefix in [("nvidia_cuda_runtime_cu12-12.9.79", "nvidia/cuda_runtime/"),
                     ("nvidia_cuda_cccl_cu12-12.9.27", "nvidia/cuda_cccl/")]:
    wheel = glob.glob(f"{wheels}/{name}-*.whl")[0]
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            path = info.filename
            if path.startswith(prefix + "include/") and not path.endswith("/"):
                dest = os.path.join(out, "include", path[len(prefix + "include/"):])
            elif "dist-info/" in path and os.path.basename(path).lower().startswith("licen"):
                dest = os.path.join(out, "licenses", name.split("-")[0] + "-" + os.path.basename(path))
            else:
                continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(z.read(info))
PY
fi

# 4. The build. DOCS_RS would make the bundler skip LLVM entirely (a `cargo check` trick).
echo "== cargo build --release -p engram-cli --features cuda (CUDARC_CUDA_VERSION=$cuda_version)"
start=$(date +%s)
env -u DOCS_RS CUDARC_CUDA_VERSION="$cuda_version" \
    cargo build --release -p engram-cli --features cuda
build_s=$(( $(date +%s) - start ))
target="${CARGO_TARGET_DIR:-target}"

# 5. The bundle.
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
name="engram-cuda-$version-x86_64-linux"
stage="$out/$name"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/nvvm/libdevice"
cp "$target/release/engram" "$stage/bin/engram"
strip "$stage/bin/engram"
cp "$libdevice" "$stage/nvvm/libdevice/"
cp -r "$headers/include" "$headers/licenses" "$stage/"
cat > "$stage/engram" <<'SH'
#!/bin/sh
# engram with the CUDA backend: libdevice and the CUDA headers come from this bundle unless
# CUDA_PATH already holds them.
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -f "${CUDA_PATH:-/nonexistent}/nvvm/libdevice/libdevice.10.bc" ]; then
    CUDA_PATH="$here"
    export CUDA_PATH
fi
exec "$here/bin/engram" "$@"
SH
chmod +x "$stage/engram"
# What the bundle was built from: figures taken with it name the commit (gpu-check.sh reads it),
# and a later session can tell whether the bundle is its own head's.
{
    echo "commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
    if git status --porcelain --untracked-files=no 2>/dev/null | grep -q .; then
        echo "dirty=true"
    else
        echo "dirty=false"
    fi
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "features=cuda,wgpu,vulkan"
    echo "cuda_version=$cuda_version"
    echo "rustc=$(rustc -V 2>/dev/null)"
} > "$stage/BUILD-INFO"
tar -C "$out" -cJf "$out/$name.tar.xz" "$name"
size=$(stat -c %s "$out/$name.tar.xz")
echo "== built in ${build_s}s: $out/$name.tar.xz ($(( size / 1048576 )) MiB; binary $(( $(stat -c %s "$stage/bin/engram") / 1048576 )) MiB stripped)"
[ "$size" -lt $(( 60 * 1048576 )) ] || die "the bundle is over 60 MiB"

# 6. The bundle runs: the CPU selftest through the launcher, and — where this machine has no
#    CUDA driver, as a build machine usually does not — a named error for --backend cuda.
if [ -d tests/fixtures/tiny-f32 ]; then
    "$stage/engram" selftest --backend cpu >/dev/null || die "the bundle's CPU selftest failed"
    echo "== the bundle's selftest passes on the CPU"
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
    msg=$("$stage/engram" selftest --backend cuda 2>&1 || true)
    echo "$msg" | grep -q 'libcuda.so.1' \
        || die "without a CUDA driver, --backend cuda should name libcuda.so.1; it said: $msg"
    echo "== without a driver here, --backend cuda says: $(echo "$msg" | tail -1 | cut -c1-160)"
fi
