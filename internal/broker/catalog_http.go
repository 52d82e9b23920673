package broker

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/pivotal-cf/brokerapi/v10/domain"
	"github.com/pivotal-cf/brokerapi/v10/domain/apiresponses"
)

// preparedCatalog is one region's GET /v2/catalog answer, encoded once: the catalog is
// static, and encoding it (and rebuilding its plan schemas) was most of the request's cost.
type preparedCatalog struct {
	raw, gz []byte
	etag    string
}

// catalogServer answers GET /v2/catalog from prepared bytes, with ETag / If-None-Match and gzip.
type catalogServer struct {
	b        *Broker
	prepared *regionCache[*preparedCatalog]
}

func newCatalogServer(b *Broker) *catalogServer {
	return &catalogServer{b: b, prepared: newRegionCache[*preparedCatalog]()}
}

// wrap serves the catalog and hands every other request to next (brokerapi).
func (c *catalogServer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v2/catalog" || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
			next.ServeHTTP(w, req)
			return
		}
		region := c.b.region(req.Context())
		pc, err := c.prepared.get(region, func() (*preparedCatalog, error) {
			pc, err := prepareCatalog(c.b.catalog.Services(region))
			if err != nil {
				return nil, fmt.Errorf("preparing the catalog of region %q: %w", region, err)
			}
			return pc, nil
		})
		if err != nil {
			writeDescription(w, req, http.StatusInternalServerError, err.Error())
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("ETag", pc.etag)
		h.Set("Vary", "Accept-Encoding")
		if id := req.Header.Get("X-Broker-API-Request-Identity"); id != "" {
			h.Set("X-Broker-API-Request-Identity", id)
		}
		if etagMatches(req.Header.Get("If-None-Match"), pc.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		body := pc.raw
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			body = pc.gz
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if req.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

// prepareCatalog encodes the catalog exactly as brokerapi does (HTML not escaped, a final
// newline), gzips it and names its content with a strong ETag.
func prepareCatalog(services []domain.Service) (*preparedCatalog, error) {
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(apiresponses.CatalogResponse{Services: services}); err != nil {
		return nil, fmt.Errorf("encoding: %w", err)
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, fmt.Errorf("compressing: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing: %w", err)
	}
	sum := sha256.Sum256(raw.Bytes())
	return &preparedCatalog{raw: raw.Bytes(), gz: gz.Bytes(), etag: `"` + hex.EncodeToString(sum[:16]) + `"`}, nil
}

// etagMatches is If-None-Match's weak comparison (RFC 9110 13.1.2): any listed tag, or "*".
func etagMatches(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether Accept-Encoding lists gzip (or *) without q=0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		if q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}
