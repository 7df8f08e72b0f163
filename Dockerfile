# kafka-sidecar as a small container image.
#
#   docker build -t kafka-sidecar .
#   docker run -p 127.0.0.1:9092:9092 -p 127.0.0.1:8080:8080 -e KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 kafka-sidecar
#   (the web console on http://127.0.0.1:8080/)
#
# Configured like the apache/kafka image, by KAFKA_* environment variables (README: "Running it
# yourself"): KAFKA_LISTENERS (default PLAINTEXT://:9092, every interface of the container),
# KAFKA_ADVERTISED_LISTENERS (what clients are told: set it to the host:port they use; unset, a
# wildcard listener advertises 127.0.0.1), KAFKA_LISTENER_SECURITY_PROTOCOL_MAP, KAFKA_LOG_DIRS
# (default /data, the volume), KAFKA_LOG_SEGMENT_BYTES=..., and so on. CMD passes no --listen or
# --data-dir, which would win over them. Arguments after the image name replace CMD: keep
# --metrics-port 9308 there, the healthcheck asks it. Prometheus metrics: :9308/metrics. The web
# console (read-only; add --console-allow-writes to CMD for its produce and delete forms): :8080,
# published only with -p 127.0.0.1:8080:8080; with SASL listeners it asks for a SASL user's login.
# compose/two-listeners.yml: one listener for clients on the host, one for other containers.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KAFKA_LISTENERS=PLAINTEXT://:9092 \
    KAFKA_LOG_DIRS=/data

WORKDIR /build
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY storage ./storage
COPY client ./client
COPY server ./server
COPY spark ./spark
RUN pip install . && cd / && rm -rf /build

RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin sidecar \
    && mkdir -p /data && chown sidecar:sidecar /data

USER sidecar
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9092 9308 8080

# Healthy = /readyz answers 200: the logs are loaded and the listeners accept connections. It
# answers 503 while the logs load, and the endpoint is up before they do. The start period is
# long because a start after a crash (no .kafka_cleanshutdown) recovers every partition's
# unflushed segments first, which takes minutes with thousands of partitions or big segments;
# failures inside the period do not count and the first success ends it, so a normal start is
# healthy within one interval. (urllib: a slim image has no curl; a 503 raises, exit 1.)
HEALTHCHECK --interval=5s --timeout=3s --start-period=600s --retries=3 \
    CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:9308/readyz', timeout=2)"]

ENTRYPOINT ["kafka-sidecar"]
# The metrics endpoint and the console on every interface of the container (published only with -p).
CMD ["serve", "--metrics-port", "9308", "--metrics-host", "0.0.0.0", "--console-port", "8080", "--console-host", "0.0.0.0"]
