package chart_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/kyma-environment-broker/internal/observe"
)

// promtool finds Prometheus's promtool: KEB_PROMTOOL (scripts/with-promtool.sh, which make test
// runs, installs it) or PATH. Without it the test fails: it never skips.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KEB_PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	require.NoError(t, err, "no promtool: run through scripts/with-promtool.sh (make test does), which installs Debian's prometheus package")
	return p
}

// The rendered alert rules pass `promtool check rules`, and `promtool test rules` shows each alert
// firing on the series that should fire it, and not on healthy ones.
func TestAlertRulesPassPromtool(t *testing.T) {
	tool := promtool(t)
	dir := t.TempDir()
	rule := find(t, render(t, "keb-system", nil), "PrometheusRule", "keb")
	data, err := yaml.Marshal(dig(rule, "spec"))
	require.NoError(t, err)
	rules := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(rules, data, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, tool, "check", "rules", rules).CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)

	tests := filepath.Join(dir, "tests.yaml")
	require.NoError(t, os.WriteFile(tests, []byte(ruleTests), 0o600))
	out, err = exec.CommandContext(ctx, tool, "test", "rules", tests).CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
}

// The certificate alert reads the gauge the broker exports, by the label it carries.
func TestCertificateAlertMatchesTheMetric(t *testing.T) {
	var expr string
	for _, r := range alertRules(t, render(t, "keb-system", nil)) {
		if str(r["alert"]) == "KEBCertificateExpiresSoon" {
			expr = str(r["expr"])
		}
	}
	require.Contains(t, expr, observe.CertificateExpiryMetric+"{")
	require.Contains(t, expr, "min by ("+observe.CertificateLabel+")")
}

// ruleTests are promtool unit tests of the rendered rules (namespace keb-system, default bounds).
const ruleTests = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'keb_external_circuit_state{namespace="keb-system",system="edp",pod="a"}'
        values: '0 1x10'
      - series: 'keb_external_circuit_state{namespace="keb-system",system="avs",pod="a"}'
        values: '0 1 1 0x8'
    alert_rule_test:
      - eval_time: 4m
        alertname: KEBCircuitOpen
        exp_alerts: []
      - eval_time: 8m
        alertname: KEBCircuitOpen
        exp_alerts:
          - exp_labels: {severity: critical, system: edp}
            exp_annotations:
              summary: "The circuit to edp has been open for more than 5m"
              description: "Calls to edp fail at once: its steps wait and retry until APP_EXTERNAL_RETRY_TIME. Check the system and keb_external_requests_total by outcome."
  - interval: 1m
    input_series:
      - series: 'keb_operations_finished_total{namespace="keb-system",type="provision",state="failed",pod="a"}'
        values: '0+1x40'
      - series: 'keb_operations_finished_total{namespace="keb-system",type="provision",state="succeeded",pod="a"}'
        values: '0+2x40'
      - series: 'keb_operations_finished_total{namespace="keb-system",type="deprovision",state="succeeded",pod="a"}'
        values: '0+2x40'
    alert_rule_test:
      - eval_time: 40m
        alertname: KEBOperationsFailing
        exp_alerts:
          - exp_labels: {severity: warning, type: provision}
            exp_annotations:
              summary: "More than 10% of provision operations failed in 30 minutes"
              description: "Find the failed step and its last answer with ` + "`kcp runtimes --state failed`" + ` or in the console's events."
  - interval: 1m
    input_series:
      - series: 'keb_operations{namespace="keb-system",type="provision",state="in progress",pod="a"}'
        values: '3x40'
      - series: 'keb_step_duration_seconds_count{namespace="keb-system",type="provision",step="x",outcome="ok",pod="a"}'
        values: '0+1x10 10x30'
      - series: 'keb_due_lag_seconds{namespace="keb-system",pod="a"}'
        values: '0 30 90x40'
    alert_rule_test:
      - eval_time: 12m
        alertname: KEBNoEngineProgress
        exp_alerts: []
      - eval_time: 35m
        alertname: KEBNoEngineProgress
        exp_alerts:
          - exp_labels: {severity: critical}
            exp_annotations:
              summary: "No step ran for 15m while operations are in progress"
              description: "The step engine is stuck or no replica runs it: check the broker pods, their logs and the database."
      - eval_time: 8m
        alertname: KEBDueLagHigh
        exp_alerts: []
      - eval_time: 15m
        alertname: KEBDueLagHigh
        exp_alerts:
          - exp_labels: {severity: warning}
            exp_annotations:
              summary: "Due operations have waited more than 60s for a worker for 10m"
              description: "The engine's workers are behind (1m 30s due lag): raise APP_ENGINE_WORKERS or replicas, or look for slow steps in keb_step_duration_seconds and the queue depth."
  - interval: 1m
    input_series:
      - series: 'keb_certificate_expiry_timestamp_seconds{namespace="keb-system",certificate="sandbox-tls",pod="a"}'
        values: '864000x180'
      - series: 'keb_certificate_expiry_timestamp_seconds{namespace="keb-system",certificate="fresh",pod="a"}'
        values: '31536000x180'
    alert_rule_test:
      - eval_time: 2h
        alertname: KEBCertificateExpiresSoon
        exp_alerts:
          - exp_labels: {severity: warning, certificate: sandbox-tls}
            exp_annotations:
              summary: "The certificate sandbox-tls expires in 9d 22h 0m 0s"
              description: "Renew or rotate it before it expires: calls using it will fail."
`
