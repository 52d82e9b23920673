package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/kyma-environment-broker/internal/testenv"
)

const clientID = "kcp-cli"

// loginEnv runs the built kcp with an OIDC issuer and its own config directory.
type loginEnv struct {
	t       *testing.T
	bin     string
	env     []string
	confDir string
}

type proc struct {
	cmd      *exec.Cmd
	out, err *testenv.SyncBuffer
	done     chan error
}

func (e loginEnv) start(args ...string) *proc { return startKcp(e.t, e.bin, e.env, args...) }

// startKcp starts the built kcp with env added to this process's environment.
func startKcp(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	p := &proc{cmd: exec.CommandContext(ctx, bin, args...), out: &testenv.SyncBuffer{}, err: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.err
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// wait returns the exit code.
func (p *proc) wait(t *testing.T) int { t.Helper(); return p.exit(t, time.Minute) }

// exit waits for the process and returns its exit code.
func (p *proc) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case err := <-p.done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(within):
		t.Fatalf("kcp did not end within %s: %s", within, p.err.String())
		return -1
	}
}

// await polls the standard error for re and returns its first group.
func (p *proc) await(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	require.Eventually(t, func() bool {
		m = re.FindStringSubmatch(p.err.String())
		return m != nil
	}, 30*time.Second, 20*time.Millisecond, "kcp never printed %s: %s", re, p.err.String())
	return m[1]
}

func (e loginEnv) run(args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	p := e.start(args...)
	code = p.wait(e.t)
	return p.out.String(), p.err.String(), code
}

func (e loginEnv) cache() (path string, tok map[string]any) {
	e.t.Helper()
	files, err := filepath.Glob(filepath.Join(e.confDir, "kcp", "oidc", "*.json"))
	require.NoError(e.t, err)
	require.Len(e.t, files, 1)
	raw, err := os.ReadFile(files[0])
	require.NoError(e.t, err)
	require.NoError(e.t, json.Unmarshal(raw, &tok))
	return files[0], tok
}

var (
	deviceURL  = regexp.MustCompile(`To log in, open (\S+user_code=\S+)`)
	browserURL = regexp.MustCompile(`To log in, open (http://localhost:\d+/) in a browser`)
)

// deviceLogin logs in with the device flow, the test approving the code as the user would.
func (e loginEnv) deviceLogin() string {
	e.t.Helper()
	p := e.start("login", "--grant-type", "device-code")
	resp, err := http.Get(p.await(e.t, deviceURL))
	require.NoError(e.t, err)
	resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	require.Equal(e.t, 0, p.wait(e.t), p.err.String())
	return p.out.String()
}

// browserLogin logs in with the authorization code flow, the test being the browser.
func (e loginEnv) browserLogin() string {
	e.t.Helper()
	p := e.start("login", "--listen-address", "127.0.0.1:0", "--skip-open-browser")
	resp, err := http.Get(p.await(e.t, browserURL)) // follows: kcp -> issuer -> kcp's redirect
	require.NoError(e.t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode, string(body))
	assert.Contains(e.t, string(body), "Logged in to kcp")
	require.Equal(e.t, 0, p.wait(e.t), p.err.String())
	return p.out.String()
}

// kcp login against a real OIDC provider on loopback, and the broker binary verifying the ID
// token kcp then sends: device and browser flows, the 0600 cache, a refresh without the user
// when the token expires, a revoked session, and an issuer that is down, broken or wrong.
func TestLoginThroughBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kcp and the broker")
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/kcp", "./cmd/broker")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	iss := newIssuer(t, clientID)
	brokerURL := startBroker(t, filepath.Join(bin, "broker"), iss.URL())

	newEnv := func(t *testing.T, issuerURL string, extra ...string) loginEnv {
		conf := t.TempDir()
		return loginEnv{t: t, bin: filepath.Join(bin, "kcp"), confDir: conf, env: append([]string{
			"XDG_CONFIG_HOME=" + conf, "HOME=" + conf, "KCP_URL=" + brokerURL,
			"KCP_OIDC_ISSUER_URL=" + issuerURL, "KCP_OIDC_CLIENT_ID=" + clientID,
			"KCP_USERNAME=", "KCP_PASSWORD=", "KCP_TOKEN=",
		}, extra...)}
	}

	t.Run("device flow, cache, calls, refresh, revoked", func(t *testing.T) {
		e := newEnv(t, iss.URL())
		_, errs, code := e.run("runtimes")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "not logged in to "+iss.URL()+": run kcp login")

		assert.Contains(t, e.deviceLogin(), "Logged in to "+iss.URL()+" as operator@example.com")
		path, tok := e.cache()
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the cache holds a refresh token")
		dir, err := os.Stat(filepath.Dir(path))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm())
		assert.NotEmpty(t, tok["refresh_token"])
		first := tok["id_token"]

		refreshes := iss.grantCount("refresh_token")
		stdout, errs, code := e.run("runtimes", "-o", "json")
		require.Equal(t, 0, code, errs)
		assert.Contains(t, stdout, `"totalCount": 0`)
		assert.Equal(t, refreshes, iss.grantCount("refresh_token"), "a fresh token is sent as it is")
		_, tok = e.cache()
		assert.Equal(t, first, tok["id_token"])

		// A token about to expire is refreshed before the call, without the user.
		iss.set(func(i *issuer) { i.ttl = 5 * time.Second })
		e.deviceLogin()
		iss.set(func(i *issuer) { i.ttl = time.Hour })
		_, short := e.cache()
		_, errs, code = e.run("runtimes")
		require.Equal(t, 0, code, errs)
		assert.Equal(t, refreshes+1, iss.grantCount("refresh_token"))
		_, tok = e.cache()
		assert.NotEqual(t, short["id_token"], tok["id_token"], "the refreshed token is cached")
		assert.NotEqual(t, short["refresh_token"], tok["refresh_token"], "the rotated refresh token is cached")
		_, errs, code = e.run("runtimes")
		require.Equal(t, 0, code, errs)
		assert.Equal(t, refreshes+1, iss.grantCount("refresh_token"), "the refreshed token is reused")

		// The session revoked at the issuer: a clear error, nothing sent to the broker.
		iss.set(func(i *issuer) { i.ttl = 5 * time.Second })
		e.deviceLogin()
		iss.set(func(i *issuer) { i.ttl = time.Hour })
		iss.revokeAll()
		_, errs, code = e.run("runtimes")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "Error: the login to "+iss.URL()+" expired and the issuer refused to refresh it (invalid_grant")
		assert.Contains(t, errs, "run kcp login again")
	})

	t.Run("browser flow with PKCE", func(t *testing.T) {
		e := newEnv(t, iss.URL())
		codes := iss.grantCount("authorization_code")
		assert.Contains(t, e.browserLogin(), "Logged in to "+iss.URL()+" as operator@example.com")
		assert.Equal(t, codes+1, iss.grantCount("authorization_code"))
		_, errs, code := e.run("runtimes")
		require.Equal(t, 0, code, errs)
		// The broker refuses a request without the login (the route needs credentials).
		_, errs, code = newEnv(t, "").run("runtimes")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "unauthorized (401)")
	})

	t.Run("issuer down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		down := "http://" + ln.Addr().String()
		require.NoError(t, ln.Close())
		e := newEnv(t, down)
		_, errs, code := e.run("login", "--grant-type", "device-code")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "reading the OIDC discovery document of "+down+" (is the issuer URL right and reachable?)")
		assert.Contains(t, errs, "connection refused")
	})

	t.Run("bad JSON", func(t *testing.T) {
		iss.set(func(i *issuer) { i.badDiscovery = true })
		defer iss.set(func(i *issuer) { i.badDiscovery = false })
		e := newEnv(t, iss.URL())
		_, errs, code := e.run("login", "--grant-type", "device-code")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "decoding the OIDC discovery document "+iss.URL()+"/.well-known/openid-configuration")

		// The token endpoint's answer broken: the login fails and nothing is cached.
		iss.set(func(i *issuer) { i.badDiscovery, i.badToken = false, true })
		defer iss.set(func(i *issuer) { i.badToken = false })
		p := e.start("login", "--grant-type", "device-code")
		resp, err := http.Get(p.await(t, deviceURL))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, p.wait(t))
		assert.Contains(t, p.err.String(), "Error: waiting for the device login: oauth2: cannot parse json")
		files, _ := filepath.Glob(filepath.Join(e.confDir, "kcp", "oidc", "*.json"))
		assert.Empty(t, files)
	})

	t.Run("wrong audience", func(t *testing.T) {
		iss.set(func(i *issuer) { i.audience = "another-client" })
		defer iss.set(func(i *issuer) { i.audience = "" })
		e := newEnv(t, iss.URL())
		p := e.start("login", "--grant-type", "device-code")
		resp, err := http.Get(p.await(t, deviceURL))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 1, p.wait(t))
		assert.Contains(t, p.err.String(), "the issuer's ID token does not verify (issuer "+iss.URL()+", audience kcp-cli = the client ID")
		assert.Contains(t, p.err.String(), "its aud is another-client")
		files, _ := filepath.Glob(filepath.Join(e.confDir, "kcp", "oidc", "*.json"))
		assert.Empty(t, files, "a refused token is not cached")
	})

	t.Run("usage", func(t *testing.T) {
		e := newEnv(t, "")
		_, errs, code := e.run("login")
		assert.Equal(t, 2, code)
		assert.Contains(t, errs, "no OIDC issuer: set --oidc-issuer-url, KCP_OIDC_ISSUER_URL or oidc-issuer-url in the config file")
		_, errs, code = e.run("login", "--oidc-issuer-url", iss.URL(), "--oidc-client-id", clientID, "--grant-type", "implicit")
		assert.Equal(t, 2, code)
		assert.Contains(t, errs, "--grant-type: must be authcode or device-code")
	})
}

// startBroker runs the broker binary on its embedded default with bearer auth from issuerURL.
func startBroker(t *testing.T, bin, issuerURL string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, ln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = t.TempDir()
	logs := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "APP_PORT="+port, "APP_SANDBOX_ADDRESS=127.0.0.1:0", "APP_SANDBOX_TLS_ADDRESS=127.0.0.1:0",
		"APP_BROKER_USERNAME=", "APP_BROKER_PASSWORD=",
		"APP_BROKER_OIDC_ISSUER="+issuerURL, "APP_BROKER_OIDC_AUDIENCE="+clientID)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	url := "http://127.0.0.1:" + port
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 50*time.Millisecond, "the broker did not get ready: %s", logs)
	return url
}

// kcp login takes the settings KEB's own kcp takes (testdata/keb-kcp-login.yaml): the flags, the
// variables, the config file keys and the loopback addresses of the redirect.
func TestLoginSettingsMatchKEBsKcp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "keb-kcp-login.yaml"))
	require.NoError(t, err)
	var facts struct {
		Flags           []string `json:"flags"`
		Env             []string `json:"env"`
		ConfigKeys      []string `json:"config_keys"`
		ListenAddresses []string `json:"listen_addresses"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &facts))
	require.NotEmpty(t, facts.Flags)
	help := kcp{t: t}.ok("login", "--help")
	for _, f := range append(facts.Flags, facts.Env...) {
		assert.Contains(t, help, f)
	}
	assert.Contains(t, help, "[127.0.0.1:8000,127.0.0.1:18000]")
	assert.Equal(t, []string{"127.0.0.1:8000", "127.0.0.1:18000"}, facts.ListenAddresses)

	// The config file keys are read: a config with them and no other setting asks for a login.
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yaml")
	body := "url: http://127.0.0.1:1\n"
	for _, k := range facts.ConfigKeys {
		body += k + ": " + map[string]string{"oidc-issuer-url": "http://127.0.0.1:1", "oidc-client-id": "kcp", "oidc-client-secret": "s"}[k] + "\n"
	}
	require.NoError(t, os.WriteFile(conf, []byte(body), 0o600))
	_, errs, code := kcp{t: t, env: map[string]string{"KCP_CONFIG": conf, "XDG_CONFIG_HOME": dir}}.run("runtimes")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "not logged in to http://127.0.0.1:1: run kcp login")
}
