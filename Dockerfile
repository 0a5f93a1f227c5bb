# Quiver gateway image. Build: docker build -t quiver .  Run: docker compose up
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/quiver
RUN useradd --create-home --uid 10001 quiver
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
RUN pip install --upgrade pip && pip install .
USER quiver
ENV QUIVER_HOST=0.0.0.0 QUIVER_PORT=8000 QUIVER_DATA_DIR=/home/quiver/data
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/readyz').status == 200 else 1)"
CMD ["quiver", "serve"]
