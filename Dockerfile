# syntax=docker/dockerfile:1
#
# The noe webhook image, built from a clean checkout (nothing vendored or
# pre-built): the wheel is built and installed with pip in a builder stage,
# the runtime stage gets only the virtual environment.
#
# Multi-arch (the webhook may itself land on arm64 nodes):
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/noe:0.1.0 --push .
# Single platform, local:
#   docker build -t noe:dev .
#
# Nothing here downloads an architecture-specific file: the Python base image
# is multi-arch and pip picks the wheels (cryptography, ...) for the build
# platform, so every platform buildx builds gets native code.

ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/noe
COPY setup.cfg pyproject.toml README.md ./
COPY noe_core/ noe_core/
COPY noe_web/ noe_web/
RUN /opt/noe/bin/pip install --upgrade pip setuptools wheel \
    && /opt/noe/bin/pip install ".[web]" \
    && /opt/noe/bin/noe --help > /dev/null

FROM python:${PYTHON_VERSION}-slim AS runtime
LABEL org.opencontainers.image.title="noe-webhook" \
      org.opencontainers.image.description="Mutating admission webhook placing pods on nodes of an architecture every image supports" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
# A numeric non-root user, so runAsNonRoot can verify it without a passwd lookup.
RUN groupadd --system --gid 10001 noe \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin noe
COPY --from=builder /opt/noe /opt/noe
ENV PATH="/opt/noe/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
USER 10001:10001
EXPOSE 8443 8080
ENTRYPOINT ["noe"]
CMD ["serve", "--help"]
