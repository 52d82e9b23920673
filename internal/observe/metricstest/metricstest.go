// Package metricstest reads a process's /metrics in tests and checks that its labels stay low
// in cardinality: no label value names an ID.
package metricstest

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// UUID matches a UUID anywhere in a label value.
var UUID = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// Scrape reads url (a /metrics endpoint) as Prometheus's text format.
func Scrape(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err)
	return families
}

// AssertNoIDs fails t for every label value that is or holds a UUID or contains one of ids.
func AssertNoIDs(t testing.TB, families map[string]*dto.MetricFamily, ids ...string) {
	t.Helper()
	for name, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				assert.False(t, UUID.MatchString(v), "%s{%s=%q} carries an ID", name, l.GetName(), v)
				for _, id := range ids {
					if id != "" {
						assert.NotContains(t, v, id, "%s{%s=%q} carries an ID", name, l.GetName(), v)
					}
				}
			}
		}
	}
}

// LabelValues are the values label takes in family.
func LabelValues(families map[string]*dto.MetricFamily, family, label string) map[string]bool {
	out := map[string]bool{}
	for _, m := range families[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = true
			}
		}
	}
	return out
}
