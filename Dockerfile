# ctda image: the CLI and the web UI, talking to a Neo4j store (see docker-compose.yml).
#   docker build -t ctda .
#   docker run --rm -e NEO4J_AUTH=neo4j/secret ctda runs --db bolt://host:7687
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# numba caches compiled kernels next to the package unless told otherwise
ENV NUMBA_CACHE_DIR=/tmp/numba-cache

WORKDIR /src
COPY pyproject.toml README.md ./
COPY ctda ./ctda
RUN pip install ".[neo4j,embedded,ui]" && rm -rf /src

RUN useradd --create-home --uid 1000 ctda && mkdir -p /data/uploads && chown -R ctda /data
USER ctda
WORKDIR /home/ctda
EXPOSE 8501
ENTRYPOINT ["ctda"]
# the container listens on all its interfaces; publish it on loopback only
# (docker run -p 127.0.0.1:8501:8501): the UI has no login (README, The UI)
CMD ["ui", "--db", "bolt://neo4j:7687", "--port", "8501", "--host", "0.0.0.0"]
