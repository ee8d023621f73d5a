# syntax=docker/dockerfile:1
#
# The images of olm-rs's four managers, one target each:
#
#   docker build --target catalogd            -t olm-rs/catalogd .
#   docker build --target operator-controller -t olm-rs/operator-controller .
#   docker build --target catalog-switcher    -t olm-rs/catalog-switcher .
#   docker build --target provisioner         -t olm-rs/provisioner .
#
# Each is one static binary (musl) on distroless "static" (no shell, no package manager, no
# libc), running as the non-root user 65532. The binary is the entrypoint, so the chart passes
# only flags; catalogd's image is also the collector of custom sources (`catalogd collect`).
# The provisioner's image also holds helm and kustomize (static Go builds of the versions in
# tools/testbin/versions.sh, from the same wrapper modules the tests build them with): it runs
# them, sandboxed, for helm+v3 and kustomize bundles (docs/provisioner.md).
# Base images are pinned by digest (the tag beside it says what it is); e2e/tests/dockerfile.rs
# checks that, and what each target contains.
ARG RUST_IMAGE=docker.io/library/rust:1.95-alpine@sha256:606fd313a0f49743ee2a7bd49a0914bab7deedb12791f3a846a34a4711db7ed2
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
ARG GO_IMAGE=docker.io/library/golang:1.26-alpine@sha256:7a3e50096189ad57c9f9f865e7e4aa8585ed1585248513dc5cda498e2f41812c

FROM ${RUST_IMAGE} AS build
# musl-dev: the C runtime ring (TLS, SSH) and zstd link statically against.
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p catalogd -p operator-controller -p catalog-switcher -p provisioner \
    && mkdir -p /out \
    && cp target/release/catalogd target/release/operator-controller target/release/catalog-switcher target/release/provisioner /out/

# helm and kustomize, pinned by the wrapper modules' go.sum, with the flags build.sh uses.
FROM ${GO_IMAGE} AS tools
WORKDIR /src
COPY tools/testbin /src/testbin
RUN --mount=type=cache,target=/root/go/pkg/mod \
    . /src/testbin/versions.sh \
    && minor=$(echo "$K8S_VERSION" | cut -d. -f2) \
    && mkdir -p /out \
    && cd /src/testbin/helm && CGO_ENABLED=0 go build -trimpath -o /out/helm \
       -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
       helm.sh/helm/v3/cmd/helm \
    && cd /src/testbin/kustomize && CGO_ENABLED=0 go build -trimpath -o /out/kustomize \
       -ldflags "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=v$KUSTOMIZE_VERSION" \
       sigs.k8s.io/kustomize/kustomize/v5

FROM ${BASE_IMAGE} AS catalogd
COPY --from=build /out/catalogd /catalogd
USER 65532:65532
ENTRYPOINT ["/catalogd"]

FROM ${BASE_IMAGE} AS operator-controller
COPY --from=build /out/operator-controller /operator-controller
USER 65532:65532
ENTRYPOINT ["/operator-controller"]

FROM ${BASE_IMAGE} AS catalog-switcher
COPY --from=build /out/catalog-switcher /catalog-switcher
USER 65532:65532
ENTRYPOINT ["/catalog-switcher"]

FROM ${BASE_IMAGE} AS provisioner
COPY --from=build /out/provisioner /provisioner
COPY --from=tools /out/helm /out/kustomize /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/provisioner"]
