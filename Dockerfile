# Swell single-node server: pgwire on 4566, webhooks on 4560, state in the /data volume.
#   docker build -t swell .
#   docker run -p 4566:4566 -p 4560:4560 -p 1250:1250 -p 5691:5691 -v swell-data:/data swell
#   (1250: Prometheus /metrics; 5691: the web dashboard, http://127.0.0.1:5691/)
#   psql -h 127.0.0.1 -p 4566 -U root dev
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/swell
# Only what the package needs (no .venv, .git or tests in the image).
COPY pyproject.toml README.md ./
COPY engine ./engine
COPY pgwire ./pgwire
COPY connectors ./connectors
RUN pip install . \
    && useradd --system --uid 10001 --home-dir /data swell \
    && mkdir -p /data \
    && chown swell /data

USER swell
EXPOSE 4566 4560 1250 5691
VOLUME /data

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
    CMD ["python", "-c", "import socket; socket.create_connection(('127.0.0.1', 4566), 2).close()"]

# Listen on all interfaces: inside a container, loopback is unreachable from the host.
CMD ["swell", "playground", "--data-dir", "/data", "--listen-addr", "0.0.0.0:4566", "--webhook-listen-addr", "0.0.0.0:4560", "--prometheus-listener-addr", "0.0.0.0:1250", "--dashboard-listen-addr", "0.0.0.0:5691"]
