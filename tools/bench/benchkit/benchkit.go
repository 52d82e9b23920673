// Package benchkit holds what the benchmarks that run the real broker binary share: building and
// running that binary, a fresh PostgreSQL database per run, free loopback addresses, OSB provisioning requests and the
// broker's Prometheus metrics. Bench tooling, not part of the product.
package benchkit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	_ "github.com/lib/pq"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The plan and service every bench provisions (the AWS plan of the default catalog).
const (
	ServiceID = "47c9dcbf-ff30-448e-ab36-d3bad66ba281"
	AWSPlanID = "361c511f-f939-4621-b228-d0fb79a1fe15"
)

// FreshDatabase creates a database named prefix_<random> on the server of serverURL and returns
// its URL and a drop function (which also forces other sessions off it).
func FreshDatabase(ctx context.Context, serverURL, prefix string) (string, func(), error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", nil, fmt.Errorf("parsing the server URL: %w", err)
	}
	admin, err := sql.Open("postgres", serverURL)
	if err != nil {
		return "", nil, err
	}
	name := prefix + "_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	drop := func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(c, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "dropping database %s: %v\n", name, err)
		}
		admin.Close()
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// FreeAddress is a loopback host:port nothing listens on right now.
func FreeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Client calls the broker's OSB API with basic auth.
type Client struct {
	HTTP               *http.Client
	Base               string
	Username, Password string
}

// Call sends one OSB request and decodes a 2xx answer's body into out (when not nil); it
// returns the status and, for other answers, the body in the error's place of the caller.
func (c Client) Call(ctx context.Context, method, path string, body []byte, out any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(c.Username, c.Password)
	req.Header.Set("X-Broker-API-Version", "2.16")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 300 && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return 0, raw, fmt.Errorf("%s %s: decoding %q: %w", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw, nil
}

// Provision starts provisioning instance number i (names and accounts derived from prefix and
// i, global accounts spread over accounts) and returns its instance and operation IDs.
func (c Client) Provision(ctx context.Context, prefix string, i, accounts int) (string, string, error) {
	id := uuid.NewString()
	body, err := json.Marshal(map[string]any{
		"service_id": ServiceID, "plan_id": AWSPlanID,
		"parameters": map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i), "region": "eu-central-1"},
		"context": map[string]any{"platform": "sapcp", "globalaccount_id": fmt.Sprintf("%s-ga-%d", prefix, i%accounts),
			"subaccount_id": fmt.Sprintf("%s-sa-%d", prefix, i), "user_id": prefix + "@example.com"},
	})
	if err != nil {
		return "", "", err
	}
	var accepted struct {
		Operation string `json:"operation"`
	}
	status, raw, err := c.Call(ctx, http.MethodPut, "/v2/service_instances/"+id+"?accepts_incomplete=true", body, &accepted)
	if err != nil {
		return "", "", fmt.Errorf("provisioning %s: %w", id, err)
	}
	if status != http.StatusAccepted {
		return "", "", fmt.Errorf("provisioning %s: HTTP %d %s", id, status, bytes.TrimSpace(raw))
	}
	return id, accepted.Operation, nil
}

// Metrics are the broker's /metrics, parsed.
type Metrics map[string]*dto.MetricFamily

// ReadMetrics reads and parses base/metrics.
func ReadMetrics(ctx context.Context, client *http.Client, base string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the broker's metrics: %w", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the broker's metrics: %w", err)
	}
	return Metrics(families), nil
}

// Sum adds up the counter, gauge or untyped values (a histogram's or summary's sample count)
// of name whose labels include every label of match.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	f, ok := m[name]
	if !ok {
		return 0
	}
	var sum float64
	for _, metric := range f.GetMetric() {
		if !hasLabels(metric, match) {
			continue
		}
		switch {
		case metric.Counter != nil:
			sum += metric.Counter.GetValue()
		case metric.Gauge != nil:
			sum += metric.Gauge.GetValue()
		case metric.Untyped != nil:
			sum += metric.Untyped.GetValue()
		case metric.Histogram != nil:
			sum += float64(metric.Histogram.GetSampleCount())
		case metric.Summary != nil:
			sum += float64(metric.Summary.GetSampleCount())
		}
	}
	return sum
}

// SumBy is Sum of name per value of label (metrics without it under "").
func (m Metrics) SumBy(name, label string) map[string]float64 {
	out := map[string]float64{}
	f, ok := m[name]
	if !ok {
		return out
	}
	for _, metric := range f.GetMetric() {
		v := ""
		for _, l := range metric.GetLabel() {
			if l.GetName() == label {
				v = l.GetValue()
			}
		}
		if _, seen := out[v]; !seen {
			out[v] = m.Sum(name, map[string]string{label: v})
		}
	}
	return out
}

func hasLabels(metric *dto.Metric, match map[string]string) bool {
	found := 0
	for _, l := range metric.GetLabel() {
		if v, ok := match[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(match)
}
