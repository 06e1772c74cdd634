# syntax=docker/dockerfile:1
#
# docsparse server image, two variants from one file:
#
#   docker build -t docsparse:0.1.0-cuda .                        # default: LibTorch 2.x + CUDA
#   docker build -t docsparse:0.1.0-cpu --build-arg VARIANT=cpu . # Debian's LibTorch 1.13, CPU
#
# Models are mounted, not baked in: the image holds no weights, and /models is
# an empty directory for a model repository (a folder of model folders, as
# scripts/setup lays out in models/):
#
#   docker run --rm -v "$PWD/models:/models:ro" -p 50051:50051 -p 9090:9090 docsparse:0.1.0-cpu
#   docker run --rm --gpus all -v "$PWD/models:/models:ro" -p 50051:50051 docsparse:0.1.0-cuda
#
# Why Debian bookworm and not nvidia/cuda: NVIDIA publishes its CUDA images on
# Ubuntu, UBI and Rocky only. The code is built and tested against bookworm's
# gRPC 1.51, protobuf 3.21 and Abseil 20220623 (scripts/packages.txt); building
# on Ubuntu would mean other versions of all three. So both variants build on
# debian:bookworm with the same scripts/setup as CI, and the CUDA variant adds
# the CUDA toolkit from NVIDIA's Debian 12 repository (for nvcc and headers)
# and LibTorch 2.x with CUDA from the PyPI torch wheel, whose NVIDIA runtime
# libraries (cuBLAS, cuDNN, ...) come as pip packages beside it. The runtime
# stage is debian:bookworm-slim plus those libraries; the driver comes from the
# host through the NVIDIA container toolkit, as with nvidia/cuda images.
#
# Build steps, also run outside Docker: scripts/setup --packages-only (the
# Debian packages), scripts/stage-release (build the shipped programs, list the
# packages owning their libraries). The tests deploy_lint (hadolint, checkov
# on this file) and deploy_stage_release (stage-release on CI's build tree)
# exercise them on every CI run.

ARG VARIANT=cuda
# The CUDA toolkit must match the torch wheel's CUDA: torch 2.11.0 on PyPI is
# built with CUDA 13.0, the combination scripts/build --cuda builds and the
# GPU tests ran on (an H100, 2026-11-26). This image itself has not been built.
ARG TORCH_VERSION=2.11.0
ARG CUDA_PACKAGE_VERSION=13-0
ARG CUDA_ARCHITECTURES="80;86;89;90"

# --- builders ---------------------------------------------------------------
FROM debian:bookworm AS builder-common
# ARG before SHELL: hadolint forgets the SHELL across an ARG.
ARG VARIANT
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
# Packages first, from the list scripts/setup uses, so this layer is rebuilt
# only when the list changes. Test-only tools (prometheus, shellcheck) are
# skipped; DOCSPARSE_SETUP_SKIP leaves out the CPU LibTorch where the CUDA one
# replaces it.
COPY scripts/setup scripts/lib.sh scripts/packages.txt scripts/
RUN if [[ "$VARIANT" == cuda ]]; then export DOCSPARSE_SETUP_SKIP="libtorch-dev"; fi \
    && bash scripts/setup --packages-only --no-test-packages \
    && rm -rf /var/lib/apt/lists/*

FROM builder-common AS builder-cpu

FROM builder-common AS builder-cuda
ARG TORCH_VERSION
ARG CUDA_PACKAGE_VERSION
ARG CUDA_ARCHITECTURES
# NVIDIA's keyring package is the trust root for its repository (the same
# step as NVIDIA's own install guide); apt verifies every package after it.
# Versions come from the CUDA release named by CUDA_PACKAGE_VERSION; the
# libraries' dev packages because LibTorch's CMake package looks them all up.
# hadolint ignore=DL3008
RUN curl -fsSL -o /opt/cuda-keyring.deb \
      https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
    && dpkg -i /opt/cuda-keyring.deb \
    && apt-get update \
    && apt-get install -y --no-install-recommends \
       "cuda-nvcc-${CUDA_PACKAGE_VERSION}" "cuda-libraries-dev-${CUDA_PACKAGE_VERSION}" \
       "cuda-nvtx-${CUDA_PACKAGE_VERSION}" \
    && rm -rf /var/lib/apt/lists/*
# LibTorch 2.x with CUDA: the torch wheel carries LibTorch's headers, shared
# libraries and CMake package (C++11 ABI since torch 2.7, as Debian's g++
# and gRPC). Only its lib directories go into the runtime image.
RUN python3 -m venv /opt/torch \
    && /opt/torch/bin/pip install --no-cache-dir --disable-pip-version-check \
       "torch==${TORCH_VERSION}"
# TORCH_CUDA_ARCH_LIST: LibTorch's CMake package would otherwise probe for a
# GPU, and the builder has none; the same GPUs as CUDA_ARCHITECTURES.
ENV CUDACXX=/usr/local/cuda/bin/nvcc \
    TORCH_CUDA_ARCH_LIST="8.0;8.6;8.9;9.0" \
    DOCSPARSE_CMAKE_ARGS="-DCMAKE_PREFIX_PATH=/opt/torch/lib/python3.11/site-packages/torch/share/cmake -DDOCSPARSE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"

# The stage chosen by VARIANT: its base is one of the stages above, pinned
# there, which neither linter can follow through the variable.
# checkov:skip=CKV_DOCKER_7:builder-${VARIANT} is a stage of this file, its base pinned above
# hadolint ignore=DL3006
FROM builder-${VARIANT} AS builder
WORKDIR /src
COPY . .
# The shipped programs only (no tests or benchmarks), staged in /out with the
# list of Debian packages that own their libraries and, for the CUDA variant,
# the torch wheel's library directories (/out/root).
RUN --mount=type=cache,target=/root/.cache/docsparse/ccache \
    bash scripts/stage-release /out \
    && cat /out/runtime-packages.txt

# --- runtime ----------------------------------------------------------------
FROM debian:bookworm-slim AS runtime-common
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN useradd --system --uid 10001 --user-group --no-create-home \
      --shell /usr/sbin/nologin docsparse \
    && mkdir -p /models && chown docsparse:docsparse /models

FROM runtime-common AS runtime-cpu

FROM runtime-common AS runtime-cuda
# The CUDA runtime libraries the binaries link directly (libcudart from the
# toolkit's lib64) come from the same NVIDIA repository as in the builder.
COPY --from=builder-cuda /opt/cuda-keyring.deb /tmp/cuda-keyring.deb
RUN dpkg -i /tmp/cuda-keyring.deb && rm /tmp/cuda-keyring.deb
# What nvidia/cuda images set: the NVIDIA container toolkit mounts the
# driver's compute libraries and nvidia-smi into containers that ask.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# The stage chosen by VARIANT, as for the builder.
# hadolint ignore=DL3006
FROM runtime-${VARIANT} AS runtime
COPY --from=builder /out/runtime-packages.txt /tmp/runtime-packages.txt
# The packages are exactly those whose libraries the binaries load, at
# bookworm's current versions (the ones CI tested); pinning each would break
# the build at every Debian security update. libopenblas0-openmp: Debian's
# LibTorch otherwise runs on the reference BLAS, ~30x slower (the OpenMP build
# shares LibTorch's threads; see scripts/setup). curl: the
# HEALTHCHECK. tar: `kubectl cp` into the model loader pod.
# hadolint ignore=DL3008
RUN apt-get update \
    && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
       libopenblas0-openmp curl ca-certificates tar \
    && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=builder /out/root/ /
COPY --from=builder /out/bin/ /usr/local/bin/
# Fails the build if a library the binaries need did not make it.
RUN docsparse-server --version

# Numeric, so that Kubernetes' runAsNonRoot can verify it without /etc/passwd.
USER 10001:10001
# 50051: gRPC (DocumentService, KServe v2, grpc.health.v1, reflection).
# 9090: HTTP /metrics, /healthz, /readyz.
EXPOSE 50051 9090
# Healthy = ready: /readyz answers 200 only after the warm-up pass of every
# model and until a drain starts. start-period covers loading large models.
HEALTHCHECK --interval=15s --timeout=3s --start-period=300s --retries=3 \
  CMD ["/bin/bash", "-c", "curl -fsS http://127.0.0.1:9090/readyz || exit 1"]
ENTRYPOINT ["docsparse-server", "--model_repository=/models"]
