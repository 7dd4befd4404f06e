# The prefetch service image: a release build on the Swift 6 bookworm image (OTLP export included, as in every build),
# run on bookworm-slim with only the C libraries it links (libcurl, hiredis, libcrypto from OpenSSL 3), CA
# certificates and time zones, as a non-root user.
# scripts/verify-runtime.sh rehearses the runtime stage without a Docker engine.

FROM swift:6.3-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends libcurl4-openssl-dev libhiredis-dev libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --static-swift-stdlib --product prefetch \
    && mkdir -p /staging \
    && cp .build/release/prefetch /staging/ \
    && cp -R .build/release/prefetch_PageAPI.resources /staging/

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends libcurl4 libhiredis0.14 libssl3 ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin prefetch
# The resource bundle (openapi.yaml, client.js, the debug view) must sit next to the binary.
COPY --from=build /staging/ /usr/local/bin/
WORKDIR /app
COPY configs/ /app/configs/
USER 10001
# 8080: the page surface. 8081: the operator surface (metrics, debug, config), on loopback unless
# --admin-host says otherwise (see SECURITY.md).
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["prefetch", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["prefetch"]
CMD ["serve", "--host", "0.0.0.0"]
