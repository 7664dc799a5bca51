# The zkconsumer image: the package and its CLIs (zkconsumer, zkmigrate), built once (docker compose build).
FROM python:3.11-slim
WORKDIR /src
COPY setup.cfg pyproject.toml README.md LICENSE ./
COPY zkconsumer ./zkconsumer
COPY migrate ./migrate
RUN pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore . && rm -rf /src
WORKDIR /
ENTRYPOINT ["zkconsumer"]
CMD ["--help"]
