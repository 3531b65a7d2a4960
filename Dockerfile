# pykafka-broker: a single-node Kafka-compatible broker.
#   docker build -t pykafka-broker .
#   docker run -p 9092:9092 -p 9404:9404 -v kafka-data:/var/lib/kafka/data pykafka-broker
# Every broker property can be set with a KAFKA_* variable (KAFKA_NUM_PARTITIONS=3 ...);
# see README.md, "Running in a container".
ARG PYTHON_VERSION=3.11

# --- build: wheels of the dependencies (cached until pyproject.toml changes), then the project's
FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > requirements.txt \
 && pip wheel --wheel-dir /wheels -r requirements.txt
COPY broker ./broker
COPY protocol ./protocol
COPY storage ./storage
COPY coordinator ./coordinator
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && cd /wheels && sha256sum *.whl > /wheels.sha256

# --- runtime: the wheels installed on a clean slim base, no compilers, no pip cache
FROM python:${PYTHON_VERSION}-slim
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 1000 kafka \
 && useradd --system --uid 1000 --gid kafka --home-dir /var/lib/kafka --no-create-home \
        --shell /usr/sbin/nologin kafka
# The wheels are bind-mounted, not copied, so they take no space in the image; the manifest
# is copied so that the layer cache notices when a wheel changes (and pip installs exactly it).
COPY --from=build /wheels.sha256 /usr/local/share/pykafka-broker/wheels.sha256
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    cd /wheels && sha256sum --check --quiet /usr/local/share/pykafka-broker/wheels.sha256 \
 && pip install --no-index --find-links=/wheels pykafka-broker \
 && rm -rf /root/.cache
COPY docker/server.properties /etc/kafka/server.properties
COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN mkdir -p /var/lib/kafka/data && chown -R kafka:kafka /var/lib/kafka
USER kafka
WORKDIR /var/lib/kafka
VOLUME ["/var/lib/kafka/data"]
# 9092: the PLAINTEXT listener; 9404: Prometheus /metrics (metrics.port)
EXPOSE 9092 9404
# A real ApiVersions round trip on the first client listener, not a port probe.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-m", "broker.ops.healthcheck"]
# SIGTERM is the broker's clean shutdown: in-flight requests finish, logs are flushed and
# closed with producer snapshots and checkpoints, so the next start skips recovery.
STOPSIGNAL SIGTERM
ENTRYPOINT ["docker-entrypoint.sh"]
CMD []
