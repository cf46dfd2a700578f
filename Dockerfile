# syntax=docker/dockerfile:1
# The Mindloop worker image (docker-compose.yml runs it once per task queue, choosing the
# queue with MINDLOOP_QUEUES). Source runs through tsx, as on a laptop: no build step.
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

# Code stays owned by root (read-only to the app); only the state folders are writable.
COPY . .
RUN mkdir -p .data .tools && chown node:node .data .tools

USER node
CMD ["npx", "tsx", "workers/main.ts"]
