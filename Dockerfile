# The product image: quorum-controller, broker-agent and quorumctl (the chart's
# image.repository/image.tag). Build from the repository root:
#
#   docker build -t kraft-quorum:0.1.0 .
#
# Two stages: the first generates the protobuf code from proto/ (as `make proto`
# does) and installs the package with its dependencies into a virtualenv; the
# second copies only that virtualenv onto a clean Python and runs as an
# unprivileged user, so the chart's readOnlyRootFilesystem and runAsNonRoot hold.
# Data lives only under the mounted volumes (/var/lib/kraft-quorum).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
RUN python -m venv /opt/kraft-quorum
ENV PATH=/opt/kraft-quorum/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md ./
COPY proto/ proto/
COPY quorum/ quorum/
COPY broker_agent/ broker_agent/
COPY snapshots/ snapshots/
COPY analytics/ analytics/
RUN pip install "grpcio-tools>=1.60" \
 && mkdir -p quorum/gen \
 && python -m grpc_tools.protoc -Iquorum/gen=proto --python_out=. --grpc_python_out=. \
      --pyi_out=. proto/*.proto \
 && touch quorum/gen/__init__.py \
 && pip install '.[analytics]' \
 && quorumctl --help >/dev/null \
 && quorum-controller --help >/dev/null \
 && broker-agent --help >/dev/null

FROM ${PYTHON_IMAGE}
RUN groupadd --gid 10001 quorum \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin quorum
COPY --from=build /opt/kraft-quorum /opt/kraft-quorum
# python3 on PATH is the virtualenv's, so the chart's probe scripts find grpc.
ENV PATH=/opt/kraft-quorum/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/kraft-quorum
# 9093: a controller's gRPC listener; 9090: /metrics (the chart's defaults).
EXPOSE 9093 9090
CMD ["quorum-controller", "--help"]
