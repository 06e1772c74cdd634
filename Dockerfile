# syntax=docker/dockerfile:1
#
# docsparse server image, CPU only for now. A CUDA variant (VARIANT=cuda, on an
# nvidia/cuda base) comes with the deploy issue, together with the Helm chart.
#
# Models are mounted, not baked in: the image holds no weights, and
# /models is an empty volume for a model repository (a folder of model folders,
# as scripts/setup lays out in models/):
#
#   docker build -t docsparse .
#   docker run --rm -v "$PWD/models:/models:ro" -p 50051:50051 -p 9090:9090 docsparse
ARG VARIANT=cpu

# --- builder -----------------------------------------------------------------
FROM debian:bookworm AS builder
ARG VARIANT
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN if [[ "$VARIANT" != cpu ]]; then \
      echo "VARIANT=$VARIANT is not built yet; only cpu (CUDA lands with the deploy issue)" >&2; \
      exit 1; \
    fi

WORKDIR /src
# Packages first, from the list scripts/setup uses, so this layer is rebuilt
# only when the list changes. Test-only tools (prometheus, shellcheck) skipped.
COPY scripts/setup scripts/lib.sh scripts/packages.txt scripts/
RUN bash scripts/setup --packages-only --no-test-packages \
    && rm -rf /var/lib/apt/lists/*

COPY . .
# Only the shipped programs are built, not tests or benchmarks. Each is built
# if the tree defines it; docsparse-server, the entrypoint, must exist.
RUN --mount=type=cache,target=/root/.cache/ccache \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    && targets="$(ninja -C build -t targets all)" \
    && mkdir -p /out/bin \
    && for t in docsparse-server docsparse docsparse-convert; do \
         if grep -q "^$t:" <<<"$targets"; then \
           cmake --build build --target "$t" -j"$(nproc)"; \
           find build -type f -perm -u+x -name "$t" -exec cp {} /out/bin/ \; ; \
         else \
           echo "note: target $t is not defined; not in the image" >&2; \
         fi; \
       done \
    && test -x /out/bin/docsparse-server

# The runtime stage installs the Debian packages that own the shared
# libraries the binaries load, so this list never drifts from the link lines.
# Both the path ldd prints and its real file are looked up (libblas.so.3 is an
# alternatives link to OpenBLAS), each also with /usr toggled (usrmerge).
RUN for b in /out/bin/*; do ldd "$b"; done \
    | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u \
    | while read -r lib; do \
        for p in "$lib" "$(readlink -f "$lib")"; do \
          dpkg -S "$p" 2>/dev/null || dpkg -S "${p#/usr}" 2>/dev/null \
            || dpkg -S "/usr$p" 2>/dev/null || true; \
        done; \
      done \
    | sed 's/: \/.*//' | tr ',' '\n' | sed 's/:.*//; s/ //g' | awk 'NF' | sort -u \
    > /out/runtime-packages.txt \
    && cat /out/runtime-packages.txt

# --- runtime -----------------------------------------------------------------
FROM debian:bookworm-slim AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=builder /out/runtime-packages.txt /tmp/runtime-packages.txt
# libopenblas0-pthread: without it LibTorch runs on the reference BLAS, ~30x
# slower. curl: the HEALTHCHECK.
RUN apt-get update \
    && xargs -a /tmp/runtime-packages.txt apt-get install -y --no-install-recommends \
       libopenblas0-pthread curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt

RUN useradd --system --uid 10001 --user-group --no-create-home \
      --shell /usr/sbin/nologin docsparse \
    && mkdir -p /models && chown docsparse:docsparse /models
COPY --from=builder /out/bin/ /usr/local/bin/

USER docsparse
VOLUME /models
# 50051: gRPC. 9090: HTTP /metrics, /healthz, /readyz.
EXPOSE 50051 9090
# Liveness only; readiness (/readyz, gRPC health) waits for the warm-up pass.
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
  CMD curl -fsS http://127.0.0.1:9090/healthz || exit 1
ENTRYPOINT ["docsparse-server", "--model_repository=/models"]
