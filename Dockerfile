# The zkconsumer image: the package and its CLIs (zkconsumer, zkmigrate), built once (docker compose build).
FROM python:3.11-slim
WORKDIR /src
COPY setup.cfg setup.py pyproject.toml README.md LICENSE ./
COPY zkconsumer ./zkconsumer
COPY migrate ./migrate
# gcc builds the C record decoder (zkconsumer/_records.c; optional: without it the Python decoder is used) and goes
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
 && pip install --no-cache-dir --disable-pip-version-check --root-user-action=ignore . \
 && python -c "from zkconsumer.kafka import fast_records as f; assert f.DECODER == 'c', f.DECODER" \
 && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/* /src
WORKDIR /
ENTRYPOINT ["zkconsumer"]
CMD ["--help"]
