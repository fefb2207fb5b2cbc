# syntax=docker/dockerfile:1
#
# The noe webhook image, built from a clean checkout (nothing vendored or
# pre-built): the wheel is built and installed with pip in a builder stage,
# the runtime stage gets only the virtual environment, without pip or
# setuptools (nothing in the running image can install code), and a CycloneDX
# SBOM of every Python distribution in it (/usr/share/doc/noe/sbom.cdx.json).
#
# deploy/image/build.sh builds it without a daemon (buildah), for one platform
# or several into one OCI index, and passes the release build arguments:
# VERSION (setup.cfg's version, checked below against what pip installed),
# REVISION (the git commit), CREATED and SOURCE_DATE_EPOCH (the commit's time),
# SOURCE. With docker:
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     $(deploy/image/build.sh --print-build-args) -t REGISTRY/noe:0.1.0 --push .
#
# Reproducible: the same commit gives the same image digest. The base is pinned
# by digest, every Python distribution by version (deploy/image/constraints.txt,
# also applied to the wheel build's own setuptools), file times and the
# created date come from SOURCE_DATE_EPOCH (build.sh also passes --timestamp),
# and pip's .pyc files hash their sources instead of recording times.
#
# Nothing here downloads an architecture-specific file: the Python base image
# is multi-arch and pip picks the wheels (cryptography, ...) for the target
# platform, so every platform gets native code.

# Any Debian-like image with python3 (and its venv module) fits; the tests use
# a local debootstrap base (tests/support/image_base.py). The default is the
# official python:3.12-slim two-platform index, pinned by digest; bump it with
#   skopeo inspect --raw docker://python:3.12-slim | sha256sum
ARG BASE_IMAGE=python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea

FROM ${BASE_IMAGE} AS builder
ARG SOURCE_DATE_EPOCH
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python3 -m venv /opt/noe
COPY setup.cfg pyproject.toml README.md ./
COPY deploy/image/constraints.txt ./
COPY noe_core/ noe_core/
COPY noe_web/ noe_web/
# Behind a TLS-intercepting proxy pip needs that proxy's CA: give it as the build
# secret `pip-ca` (build.sh passes $PIP_CERT; docker: --secret id=pip-ca,src=FILE).
# A secret is mounted for this step only and never stored in the image.
# PIP_CONSTRAINT (not -c) also pins the isolated wheel build's setuptools.
# The SBOM generator (cyclonedx-bom) goes into a venv of its own, by the same pip,
# and never reaches the runtime stage.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
    && PIP_CONSTRAINT=/src/constraints.txt /opt/noe/bin/pip install ".[web,tracing]" \
    && /opt/noe/bin/noe --help > /dev/null \
    && python3 -m venv --without-pip /opt/sbom \
    && /opt/noe/bin/pip --python /opt/sbom/bin/python install --no-compile --constraint /src/constraints.txt cyclonedx-bom
# The version label must name what was installed: refuse a missing or different VERSION.
ARG VERSION
RUN test "$(/opt/noe/bin/noe --version)" = "noe ${VERSION}" \
    || { echo "VERSION build arg '${VERSION}' is not the installed $(/opt/noe/bin/noe --version); pass --build-arg VERSION=<setup.cfg version> (deploy/image/build.sh does)" >&2; exit 1; }
# The runtime needs neither pip nor setuptools; the SBOM then describes /opt/noe
# exactly as the runtime gets it (checked against the CycloneDX schema by the tests).
RUN /opt/noe/bin/python -m pip uninstall --yes pip setuptools wheel \
    && /opt/sbom/bin/cyclonedx-py environment --no-validate --output-reproducible --output-format JSON \
        --output-file /sbom.cdx.json /opt/noe/bin/python

FROM ${BASE_IMAGE} AS runtime
ARG SOURCE_DATE_EPOCH
ARG VERSION
ARG REVISION
ARG CREATED
ARG SOURCE
LABEL org.opencontainers.image.title="noe-webhook" \
      org.opencontainers.image.description="Mutating admission webhook placing pods on nodes of an architecture every image supports" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}"
# A numeric non-root user, so runAsNonRoot can verify it without a passwd lookup
# (useradd dates the account from SOURCE_DATE_EPOCH; no lastlog/faillog entry).
# The base's own pip and the wheels ensurepip would install go too.
RUN groupadd --system --gid 10001 noe \
    && useradd --system --no-log-init --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin noe \
    && if python3 -m pip --version > /dev/null 2>&1; then python3 -m pip uninstall --yes pip setuptools wheel; fi \
    && rm -rf /usr/share/python-wheels "$(python3 -c 'import ensurepip, os; print(os.path.dirname(ensurepip.__file__))')"
COPY --from=builder /opt/noe /opt/noe
COPY --from=builder /sbom.cdx.json /usr/share/doc/noe/sbom.cdx.json
ENV PATH="/opt/noe/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
USER 10001:10001
EXPOSE 8443 8080
ENTRYPOINT ["noe"]
CMD ["serve", "--help"]
