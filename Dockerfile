# The image compose.yaml runs as `web` and `worker`.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git bash && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY proctor proctor
COPY evals_app evals_app
COPY runner runner
COPY dashboard dashboard
COPY templates templates
COPY static static
RUN pip install --no-cache-dir .
ENV PROCTOR_HOME=/data
VOLUME /data
EXPOSE 8000
# Serving beyond loopback needs DJANGO_SECRET_KEY set (compose.yaml sets one): `serve` refuses
# the built-in key there.
CMD ["proctor", "serve", "0.0.0.0:8000"]
