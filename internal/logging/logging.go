// Package logging builds the processes' loggers: the format and level from APP_LOG_FORMAT and
// APP_LOG_LEVEL, and one hook through which every log line passes, which redacts secret fields and
// bounds what a line can carry. Request data (OSB details, contexts, parameters) reaches the log
// through many packages; redacting in one place means no package can forget.
package logging

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/kelseyhightower/envconfig"
	"github.com/sirupsen/logrus"
)

// Config is the logging configuration of a process.
type Config struct {
	// Format: "json", "text", or "auto" (text on a terminal, JSON otherwise).
	Format string `envconfig:"LOG_FORMAT" default:"auto"`
	// Level: panic, fatal, error, warn, info, debug or trace.
	Level string `envconfig:"LOG_LEVEL" default:"info"`
}

// Defaults of the bounds.
const (
	// MaxFieldBytes bounds one field's value as logged.
	MaxFieldBytes = 2048
	// MaxMessageBytes bounds a line's message.
	MaxMessageBytes = 4096
)

// New returns a logger configured by cfg, with the redacting hook installed.
func New(cfg Config) (*logrus.Logger, error) {
	log := logrus.New()
	switch cfg.Format {
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{})
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "", "auto":
		if IsTerminal(os.Stderr) {
			log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
		} else {
			log.SetFormatter(&logrus.JSONFormatter{})
		}
	default:
		return nil, fmt.Errorf("APP_LOG_FORMAT: must be json, text or auto, got %q", cfg.Format)
	}
	if cfg.Level != "" {
		lvl, err := logrus.ParseLevel(cfg.Level)
		if err != nil {
			return nil, fmt.Errorf("APP_LOG_LEVEL: %w", err)
		}
		log.SetLevel(lvl)
	}
	log.AddHook(Redactor{})
	log.AddHook(TraceHook{})
	return log, nil
}

// IsTerminal tells whether f is a terminal (a character device).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Redactor is a logrus hook: it replaces the values of secret fields (at any depth of a structured
// value) by "[redacted]" and bounds every field and the message.
type Redactor struct{}

// Levels implements logrus.Hook: every level.
func (Redactor) Levels() []logrus.Level { return logrus.AllLevels }

// Fire implements logrus.Hook.
func (Redactor) Fire(e *logrus.Entry) error {
	data := make(logrus.Fields, len(e.Data))
	for k, v := range e.Data {
		data[k] = redactValue(k, v)
	}
	e.Data = data
	e.Message = bound(e.Message, MaxMessageBytes)
	return nil
}

// maxParsedBytes bounds the JSON text the redactor parses to look for secrets.
const maxParsedBytes = 64 << 10

// Redacted is what a secret value is logged as.
const Redacted = "[redacted]"

// secretKey tells whether a field name holds a secret: passwords, client secrets, tokens,
// kubeconfigs, credentials (the OSB context's sm_operator_credentials included).
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"secret", "password", "passwd", "token", "kubeconfig", "credential", "authorization", "private_key", "privatekey"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func redactValue(key string, v any) any {
	if secretKey(key) {
		return Redacted
	}
	switch x := v.(type) {
	case nil, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return v
	case string:
		return bound(redactTree(x).(string), MaxFieldBytes)
	case error:
		return bound(x.Error(), MaxFieldBytes)
	case fmt.Stringer:
		return bound(x.String(), MaxFieldBytes)
	}
	// Structured values (request details, maps, raw JSON): walk them as JSON.
	raw, err := json.Marshal(v)
	if err != nil {
		return bound(fmt.Sprint(v), MaxFieldBytes)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return bound(string(raw), MaxFieldBytes)
	}
	tree = redactTree(tree)
	out, err := json.Marshal(tree)
	if err != nil {
		return Redacted
	}
	return bound(string(out), MaxFieldBytes)
}

func redactTree(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if secretKey(k) {
				x[k] = Redacted
				continue
			}
			x[k] = redactTree(child)
		}
		return x
	case []any:
		for i := range x {
			x[i] = redactTree(x[i])
		}
		return x
	case string:
		// Raw JSON kept as a string (json.RawMessage inside a struct marshals as JSON already).
		if t := strings.TrimSpace(x); strings.HasPrefix(t, "{") {
			if len(t) > maxParsedBytes {
				// Too large to look into cheaply; what it holds cannot be vouched for.
				return fmt.Sprintf("[JSON value of %d bytes omitted]", len(t))
			}
			var inner any
			if json.Unmarshal([]byte(t), &inner) == nil {
				if out, err := json.Marshal(redactTree(inner)); err == nil {
					return string(out)
				}
			}
		}
		return x
	}
	return v
}

// bound cuts s to at most n bytes (on a rune boundary), saying how much was cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d more bytes)", s[:cut], len(s)-cut)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// FromEnv is New with the configuration from APP_LOG_FORMAT and APP_LOG_LEVEL.
func FromEnv() (*logrus.Logger, error) {
	var cfg Config
	if err := envconfig.Process("APP", &cfg); err != nil {
		return nil, fmt.Errorf("reading the logging configuration: %w", err)
	}
	return New(cfg)
}
