# syntax=docker/dockerfile:1
# The atrium-server image: the API server and its admin CLI (migrate, create-tenant, ...).
#   docker build -t atrium/atrium-server:$(node -p 'require("./package.json").version') .
# Runs as a non-root user on a read-only root filesystem: the only writable places are the data
# volume (/var/lib/atrium) and /tmp (a tmpfs or emptyDir). It runs the compiled server (`npm run
# build`), not TypeScript through tsx: faster to start, some 75 MB smaller at rest.

# Node 24 LTS, pinned to a patch release so a rebuild gets the same runtime.
ARG NODE_IMAGE=docker.io/library/node:24.11.1-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
# No install scripts run (none of the dependencies needs one). Our fixes to dependencies are
# applied (patches/README.md says what each fixes and why).
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npx --no-install patch-package --error-on-fail

# The production dependencies only: a layer that changes with the lockfile, not with the sources.
FROM deps AS prod-deps
RUN npm prune --omit=dev --no-audit --no-fund && npm cache clean --force

FROM deps AS build
COPY common ./common
COPY server ./server
COPY config ./config
COPY licenses ./licenses
# The JavaScript in dist/, readable by the app's user whatever the build context's file modes
# (a checkout made under umask 077 has none for others).
RUN npm run build \
 && chmod -R a+rX dist

FROM ${NODE_IMAGE} AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="atrium-server" \
      org.opencontainers.image.description="Atrium API server and admin CLI" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="LicenseRef-Atrium-Commercial"
ENV NODE_ENV=production \
    PORT=8080 \
    HOST=0.0.0.0 \
    DATA_DIR=/var/lib/atrium \
    MALLOC_ARENA_MAX=2 \
    NPM_CONFIG_UPDATE_NOTIFIER=false
WORKDIR /app
RUN groupadd --system --gid 10001 atrium \
 && useradd --system --uid 10001 --gid atrium --home-dir /var/lib/atrium --shell /usr/sbin/nologin atrium \
 && mkdir -p /var/lib/atrium \
 && chown atrium:atrium /var/lib/atrium
# Owned by root and not writable by the app: the code cannot be changed at run time.
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./
USER 10001:10001
VOLUME ["/var/lib/atrium"]
EXPOSE 8080
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=6 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "--max-semi-space-size=8", "/app/server/cli.js"]
CMD ["serve"]
