# syntax=docker/dockerfile:1
# netfleet's two images, built from one stage:
#
#   docker build --target operator   -t ghcr.io/netfleet/operator:0.1.0 .
#   docker build --target gameserver -t ghcr.io/netfleet/gameserver:0.1.0 .
#
# The operator builds without cgo and runs on distroless static. The game server links the system
# ENet library through cgo, so it builds against Debian's libenet-dev and runs on Debian slim with
# the matching libenet7. Both run as the non-root user 65532.

FROM golang:1.26-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libenet-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/operator ./cmd/operator \
 && CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/gameserver ./cmd/gameserver

FROM gcr.io/distroless/static-debian12:nonroot AS operator
COPY --from=build /out/operator /operator
USER 65532:65532
ENTRYPOINT ["/operator"]

FROM debian:bookworm-slim AS gameserver
RUN apt-get update \
 && apt-get install -y --no-install-recommends libenet7 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 gameserver \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gameserver
COPY --from=build /out/gameserver /usr/local/bin/gameserver
USER 65532:65532
# The game's UDP port and the admin API (NETFLEET_GAME_PORT, NETFLEET_ADMIN_PORT); the operator
# sets both in the Pod.
EXPOSE 7777/udp 8080/tcp
ENTRYPOINT ["/usr/local/bin/gameserver"]
