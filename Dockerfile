# Builds every command the Helm chart (resources/chart/keb) deploys as static binaries on a
# distroless, non-root base: /broker (the entrypoint), /provisioner, /runtime-agent and /sandbox
# (see docs/user/docker.md and docs/user/deploy.md). The SQLite driver is pure Go, so CGO stays off.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN for cmd in broker provisioner runtime-agent sandbox; do \
		CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/$cmd ./cmd/$cmd || exit 1; \
	done \
	&& mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/broker /broker
COPY --from=build /out/provisioner /provisioner
COPY --from=build /out/runtime-agent /runtime-agent
COPY --from=build /out/sandbox /sandbox
# The embedded default keeps its SQLite file (and its encryption key) in the working directory,
# which must belong to the nonroot user: mount a volume here to keep them across containers.
COPY --from=build --chown=nonroot:nonroot /out/data /data
WORKDIR /data
VOLUME /data
# Inside a container the broker listens on every interface (outside one it keeps to loopback),
# with probes and metrics on a status port of their own. The embedded sandbox is off: production
# talks to the real systems. Turned on (APP_SANDBOX_ENABLED=true) it listens on every interface
# too, which it refuses without APP_SANDBOX_ADMIN_PASSWORD guarding its fault injection and reset.
ENV APP_HOST=0.0.0.0 APP_STATUS_ADDRESS=0.0.0.0:8081 APP_SANDBOX_ENABLED=false \
	APP_SANDBOX_ADDRESS=0.0.0.0:8090 APP_SANDBOX_TLS_ADDRESS=0.0.0.0:8443
EXPOSE 8080 8081 8090 8443
USER nonroot
ENTRYPOINT ["/broker"]
