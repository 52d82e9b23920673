# Builds the broker as a static binary on a distroless base. The SQLite driver is pure Go, so
# CGO stays off.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/broker ./cmd/broker

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/broker /broker
# The embedded default keeps its SQLite file in the working directory.
WORKDIR /data
USER nonroot
ENTRYPOINT ["/broker"]
