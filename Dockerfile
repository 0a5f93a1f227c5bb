# Quiver gateway image. Build: docker build -t quiver .  Run: docker compose up
# With Node.js for npm MCP servers over stdio (npx @modelcontextprotocol/server-…):
#   docker build --target with-node -t quiver:node .
# The install step is scripts/install.sh, the same script tests/test_packaging.py runs in a fresh venv.
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/quiver
RUN useradd --create-home --uid 10001 quiver
COPY pyproject.toml README.md ./
COPY app ./app
COPY scripts/install.sh ./scripts/install.sh
RUN PYTHON=python scripts/install.sh
ENV QUIVER_HOST=0.0.0.0 QUIVER_PORT=8000 QUIVER_DATA_DIR=/home/quiver/data
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz').status == 200 else 1)"]

FROM base AS with-node
# Debian's Node.js and npm, at the versions of the base image's release.
# hadolint ignore=DL3008
RUN apt-get update \
  && apt-get install -y --no-install-recommends nodejs npm \
  && rm -rf /var/lib/apt/lists/*
USER 10001
CMD ["quiver", "serve"]

FROM base AS gateway
USER 10001
CMD ["quiver", "serve"]
