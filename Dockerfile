# Quiver gateway image. Build: docker build -t quiver .  Run: docker compose up
# The install step is scripts/install.sh, the same script tests/test_packaging.py runs in a fresh venv.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/quiver
RUN useradd --create-home --uid 10001 quiver
COPY pyproject.toml README.md ./
COPY app ./app
COPY scripts/install.sh ./scripts/install.sh
RUN PYTHON=python scripts/install.sh
USER 10001
ENV QUIVER_HOST=0.0.0.0 QUIVER_PORT=8000 QUIVER_DATA_DIR=/home/quiver/data
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz').status == 200 else 1)"]
CMD ["quiver", "serve"]
