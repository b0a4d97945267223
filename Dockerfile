# syntax=docker/dockerfile:1
# The payments service, compiled. Every step below is an npm script that CI runs too
# (test/deploy/production-build.test.ts): the production install, `npm run build`, `npm run migrate:prod`,
# `npm run start:prod` and `npm run healthcheck` — so a green CI means this image's steps work.
#   docker build -t payments .
#   docker run -e DATABASE_URL=… -e ENCRYPTION_KEY=… -e PUBLIC_BASE_URL=… -p 3000:3000 payments

# ---- build: every dependency, then tsc into dist/ ----
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY contract ./contract
COPY server ./server
RUN npm run build

# ---- runtime: production dependencies and the compiled server, as the unprivileged `node` user ----
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force
COPY README.md ./
COPY dashboard ./dashboard
COPY --from=build /app/dist ./dist
USER node
# 3000: the API (ROLE=api or all); 3001: a worker's /healthz, /readyz and /metrics (ROLE=worker).
EXPOSE 3000 3001
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 CMD ["node", "dist/server/healthcheck.js"]
CMD ["node", "--max-old-space-size=1024", "--max-semi-space-size=32", "dist/server/main.js"]
