# syntax=docker/dockerfile:1
#
# The noe webhook image, built from a clean checkout (nothing vendored or
# pre-built): the wheel is built and installed with pip in a builder stage,
# the runtime stage gets only the virtual environment, without pip or
# setuptools (nothing in the running image can install code).
#
# deploy/image/build.sh builds it without a daemon (buildah) and passes the
# release build arguments: VERSION (setup.cfg's version, checked below against
# what pip installed), REVISION (the git commit), CREATED, SOURCE. With docker:
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     $(deploy/image/build.sh --print-build-args) -t REGISTRY/noe:0.1.0 --push .
#
# Nothing here downloads an architecture-specific file: the Python base image
# is multi-arch and pip picks the wheels (cryptography, ...) for the build
# platform, so every platform buildx builds gets native code.

ARG PYTHON_VERSION=3.12
# Any Debian-like image with python3 (and its venv module) fits; the tests use
# a local debootstrap base (tests/support/image_base.py).
ARG BASE_IMAGE=python:${PYTHON_VERSION}-slim

FROM ${BASE_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python3 -m venv /opt/noe
COPY setup.cfg pyproject.toml README.md ./
COPY noe_core/ noe_core/
COPY noe_web/ noe_web/
# Behind a TLS-intercepting proxy pip needs that proxy's CA: give it as the build
# secret `pip-ca` (build.sh passes $PIP_CERT; docker: --secret id=pip-ca,src=FILE).
# A secret is mounted for this step only and never stored in the image.
RUN --mount=type=secret,id=pip-ca \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
    && /opt/noe/bin/pip install ".[web]" \
    && /opt/noe/bin/noe --help > /dev/null
# The version label must name what was installed: refuse a missing or different VERSION.
ARG VERSION
RUN test "$(/opt/noe/bin/noe --version)" = "noe ${VERSION}" \
    || { echo "VERSION build arg '${VERSION}' is not the installed $(/opt/noe/bin/noe --version); pass --build-arg VERSION=<setup.cfg version> (deploy/image/build.sh does)" >&2; exit 1; }
# The runtime needs neither pip nor setuptools.
RUN /opt/noe/bin/python -m pip uninstall --yes pip setuptools wheel

FROM ${BASE_IMAGE} AS runtime
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
# A numeric non-root user, so runAsNonRoot can verify it without a passwd lookup.
# The base's own pip and the wheels ensurepip would install go too.
RUN groupadd --system --gid 10001 noe \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin noe \
    && if python3 -m pip --version > /dev/null 2>&1; then python3 -m pip uninstall --yes pip setuptools wheel; fi \
    && rm -rf /usr/share/python-wheels "$(python3 -c 'import ensurepip, os; print(os.path.dirname(ensurepip.__file__))')"
COPY --from=builder /opt/noe /opt/noe
ENV PATH="/opt/noe/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
USER 10001:10001
EXPOSE 8443 8080
ENTRYPOINT ["noe"]
CMD ["serve", "--help"]
