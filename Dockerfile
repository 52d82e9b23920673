# Builds the broker as a static binary on a distroless base (see docs/user/docker.md). The SQLite
# driver is pure Go, so CGO stays off.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/broker ./cmd/broker \
	&& mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/broker /broker
# The embedded default keeps its SQLite file (and its encryption key) in the working directory,
# which must belong to the nonroot user: mount a volume here to keep them across containers.
COPY --from=build --chown=nonroot:nonroot /out/data /data
WORKDIR /data
VOLUME /data
# Inside a container the broker and its embedded sandbox listen on every interface; outside one
# they keep to loopback by default.
ENV APP_HOST=0.0.0.0 APP_SANDBOX_ADDRESS=0.0.0.0:8090 APP_SANDBOX_TLS_ADDRESS=0.0.0.0:8443
EXPOSE 8080 8090 8443
USER nonroot
ENTRYPOINT ["/broker"]
