#!/usr/bin/env bash
# Transformer Engine for the offline GPU machine (CUDA 13, torch 2.11, Python 3.12), carried in parts that
# each fit one device call, joined and built there.
#
#   here:  tools/gpu/te_kit.sh prepare      # downloads into .te/: the core wheel split into .te/p1 ... .te/pN
#                                           # (PART_MB each, default 42), the rest in .te/extra
#   there: tools/gpu/te_kit.sh stash        # one call per part, carry .te/pK: keeps the part in /tmp/te-parts
#          tools/gpu/te_kit.sh install      # carry .te/extra: joins and checks the parts, installs the wheels
#                                           # into $SITE (default /tmp/te-site; put it on PYTHONPATH), builds
#                                           # transformer_engine_torch for sm_90 there and runs a TE layer
#
# Why parts: the core wheel (libtransformer_engine.so for every architecture) is 276 MB and one call
# carries 64 MiB with the working tree; a warm machine keeps /tmp between calls that follow each other
# within its idle window, so make the stash calls back to back. Why a build there: transformer_engine_torch
# is a source archive that compiles against the machine's own torch (a C++ extension; no nvcc needed).
# Add `/.te/` to .git/info/exclude: nothing here is committed.
set -euo pipefail
TE_VERSION=${TE_VERSION:-2.20.2}
CUDA_MAJOR=${CUDA_MAJOR:-13}
PART_MB=${PART_MB:-42}
kit=.te
core="transformer_engine_cu${CUDA_MAJOR}-${TE_VERSION}-py3-none-manylinux_2_28_x86_64.whl"
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)

prepare() {
    mkdir -p "$kit/extra" "$kit/dl"
    python3 -m pip download -q --no-deps "${plat[@]}" -d "$kit/dl" \
        "transformer-engine-cu${CUDA_MAJOR}==$TE_VERSION" "transformer-engine==$TE_VERSION"
    # The torch part is a source archive; pip cannot take it where CUDA is missing (its metadata step
    # imports torch), so fetch the file the index lists.
    local index=https://pypi.org/simple/transformer-engine-torch/ sdist="transformer_engine_torch-$TE_VERSION.tar.gz"
    local url
    url=$(curl -fsS "$index" | grep -o "href=\"[^\"]*$sdist[^\"]*\"" | head -1 | sed 's/^href="//; s/"$//')
    [ -n "$url" ] || { echo "te_kit: $sdist is not listed at $index" >&2; exit 1; }
    curl -fsSL -o "$kit/extra/$sdist" "$url"
    # What transformer_engine_torch needs beyond the GPU image (which has einops, onnx, onnxscript,
    # packaging, pyyaml).
    python3 -m pip download -q --no-deps "${plat[@]}" -d "$kit/extra" \
        "nvidia-cudnn-frontend==1.32.0" "nvdlfw-inspect==0.2.2" "importlib-metadata==8.7.0" \
        "pydantic==2.14.4" "pydantic-core==2.50.5" "annotated-types==0.8.0" "typing-inspection==0.4.5"
    cp "$kit/dl/transformer_engine-$TE_VERSION-py3-none-any.whl" "$kit/extra/"
    rm -rf "$kit"/p[0-9]*
    split -b "${PART_MB}m" -d -a 2 "$kit/dl/$core" "$kit/dl/core.part."
    local n=0 part
    for part in "$kit"/dl/core.part.*; do
        n=$((n + 1))
        mkdir -p "$kit/p$n" && mv "$part" "$kit/p$n/"
    done
    (cd "$kit/dl" && sha256sum "$core") >"$kit/extra/SHA256SUMS"
    echo "$core" >"$kit/extra/CORE"
    echo "te_kit: $n parts of at most $PART_MB MiB in $kit/p1..p$n, the rest in $kit/extra ($(du -sh "$kit/extra" | cut -f1))"
}

stash() {
    mkdir -p /tmp/te-parts
    cp "$kit"/p*/core.part.* /tmp/te-parts/
    echo "te_kit: stashed $(ls /tmp/te-parts | tr '\n' ' ')($(du -sh /tmp/te-parts | cut -f1))"
}

install() {
    local site=${SITE:-/tmp/te-site} core_name
    core_name=$(cat "$kit/extra/CORE")
    mkdir -p /tmp/te-build
    cat /tmp/te-parts/core.part.* >"/tmp/te-build/$core_name"
    (cd /tmp/te-build && sha256sum -c "$OLDPWD/$kit/extra/SHA256SUMS") || {
        echo "te_kit: the joined core wheel does not match its checksum: stash every part again" >&2
        exit 1
    }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
        "/tmp/te-build/$core_name" "$kit"/extra/*.whl
    tar xzf "$kit/extra/transformer_engine_torch-$TE_VERSION.tar.gz" -C /tmp/te-build
    # FORCE_BUILD: setup.py otherwise first tries to download a prebuilt wheel, which the offline machine
    # cannot. sm_90 only: the H200.
    (cd "/tmp/te-build/transformer_engine_torch-$TE_VERSION" &&
        PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" NVTE_PYTORCH_FORCE_BUILD=TRUE NVTE_CUDA_ARCHS=90 \
            MAX_JOBS="${MAX_JOBS:-$(nproc)}" python3 -m pip wheel -q --no-deps --no-build-isolation \
            --no-index -w /tmp/te-build/wheels .)
    # Unzipped over the install, not `pip install --target`: pip skips a package folder that already exists
    # there (transformer_engine/, from the core wheel), and the extension lives inside it (seen on H200).
    python3 -m zipfile -e /tmp/te-build/wheels/transformer_engine_torch-*.whl "$site"
    PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 - <<'EOF'
import torch
import transformer_engine
import transformer_engine.pytorch as te

layer = te.Linear(256, 256, params_dtype=torch.bfloat16).cuda()
out = layer(torch.randn(16, 256, device="cuda", dtype=torch.bfloat16))
print(f"te_kit: Transformer Engine {transformer_engine.__version__} runs: Linear -> {tuple(out.shape)}")
EOF
}

case "${1:-}" in
prepare) prepare ;;
stash) stash ;;
install) install ;;
*)
    echo "usage: tools/gpu/te_kit.sh prepare|stash|install" >&2
    exit 2
    ;;
esac
