# syntax=docker/dockerfile:1
#
# Drover's images (see charts/drover/README.md):
#
#   drover       (default) controller, worker and demo-agent in PATH, on Debian slim with
#                git, openssh-client and ca-certificates; tini as PID 1 runs the
#                arguments, so one image serves both roles:
#                  docker run IMAGE controller serve …   docker run IMAGE worker run …
#   drover-clis  drover plus Node.js and coding-agent CLIs from npm, for workers:
#                  docker build --target drover-clis \
#                    --build-arg CLIS="@anthropic-ai/claude-code@2.0.0 @openai/codex" .
#
# Both run as the non-root user drover (uid/gid 10001, HOME /home/drover).
# `docker build -t drover .` needs BuildKit (the cache mounts).

ARG GO_VERSION=1.26.8
ARG DEBIAN=bookworm
ARG NODE_VERSION=22

FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# With cgo (glibc, which the runtime image has): the sandbox's re-exec step
# then runs as a C constructor before the Go runtime starts, about 2 ms
# less per confined process than without cgo (docs/benchmarks.md).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/ \
      ./cmd/controller ./cmd/worker ./cmd/demo-agent

FROM debian:${DEBIAN}-slim AS drover
# git: worktrees and pushes; openssh-client: pushes over ssh; tini: reaps the
# processes agent CLIs leave behind, which a Go PID 1 would not.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git openssh-client tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 drover \
 && useradd --uid 10001 --gid 10001 --home-dir /home/drover --create-home --shell /usr/sbin/nologin drover \
 && install -d -o drover -g drover /var/lib/drover
COPY --from=build /out/ /usr/local/bin/
ENV HOME=/home/drover
WORKDIR /home/drover
USER 10001:10001
# 8080: http.listen in the Helm chart (/metrics, /healthz, /readyz); 4222: an embedded
# nats-server opened with --nats-listen 0.0.0.0:4222.
EXPOSE 8080 4222
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["controller", "--help"]

# Node.js from the official image of the same Debian release, so its binary runs here.
FROM node:${NODE_VERSION}-${DEBIAN}-slim AS node

FROM drover AS drover-clis
USER root
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx
# The CLIs to install (npm package names, pinned versions recommended). The seven the
# built-in runtimes know: @anthropic-ai/claude-code @openai/codex opencode-ai
# @kilocode/cli @google/gemini-cli @mariozechner/pi-coding-agent @github/copilot
# (kilo: pin @kilocode/cli@7.7.7, 7.8.1 does not install; see docs/runtimes.md#kilo).
ARG CLIS="@anthropic-ai/claude-code @openai/codex"
RUN npm install --global --no-fund --no-audit --update-notifier=false ${CLIS} \
 && npm cache clean --force \
 && rm -rf /root/.npm
USER 10001:10001
