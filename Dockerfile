# kafka-sidecar as a small container image.
#
#   docker build -t kafka-sidecar .
#   docker run -p 127.0.0.1:9092:9092 -e KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:9092 kafka-sidecar
#
# Configuration as in the README: KAFKA_* environment variables (KAFKA_LOG_SEGMENT_BYTES=...),
# or arguments after the image name (they replace CMD: serve --data-dir /data --listen 0.0.0.0:9092).
# Clients are told the address in KAFKA_ADVERTISED_LISTENERS (default: the listener's own,
# which a client outside the container usually cannot reach: set it to the host:port it uses).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /build
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY server ./server
COPY spark ./spark
RUN pip install . && cd / && rm -rf /build

RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin sidecar \
    && mkdir -p /data && chown sidecar:sidecar /data

USER sidecar
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9092

HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 \
    CMD ["python", "-c", "import socket; socket.create_connection(('127.0.0.1', 9092), timeout=2).close()"]

ENTRYPOINT ["kafka-sidecar"]
CMD ["serve", "--data-dir", "/data", "--listen", "0.0.0.0:9092"]
