# fleetgate container image: build with the Makefile on Debian 12, run as a non-root user.
#   docker build -t fleetgate .
#   docker run -p 8080:8080 -v $PWD/conf/prod.json:/etc/fleetgate/fleetgate.json fleetgate

FROM debian:bookworm-slim AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential pkg-config git ca-certificates nodejs npm \
      libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev libhiredis-dev libssl-dev libjwt-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make clean && make -j"$(nproc)" build/fleetgate && make docs

FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 libjansson4 libcurl4 libhiredis0.14 libssl3 libjwt0 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system fleetgate \
 && useradd --system --gid fleetgate --home-dir /nonexistent --shell /usr/sbin/nologin fleetgate
COPY --from=build /src/build/fleetgate /usr/local/bin/fleetgate
COPY api/openapi.yaml /usr/share/fleetgate/openapi.yaml
COPY --from=build /src/build/docs/index.html /usr/share/fleetgate/docs/index.html
COPY conf/container.json /etc/fleetgate/fleetgate.json
USER fleetgate:fleetgate
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=2s --start-period=5s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/fleetgate"]
CMD ["-c", "/etc/fleetgate/fleetgate.json"]
