package sqlstore

import (
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// appendProgress encodes p exactly as encoding/json does (same fields, omissions, sorted map
// keys, string escaping and RFC 3339 times), without reflection: every save of an operation
// writes its progress, which grows with the steps it ran, and json.Marshal's reflection and key
// sorting were the largest cost of a save in the engine's profile. The test compares both.
func appendProgress(b []byte, p storage.Progress) ([]byte, error) {
	var err error
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	if len(p.FinishedStages) > 0 {
		field("finished_stages")
		b = appendStrings(b, p.FinishedStages)
	}
	if len(p.StageStartedAt) > 0 {
		field("stage_started_at")
		if b, err = appendMap(b, p.StageStartedAt, appendTime); err != nil {
			return nil, err
		}
	}
	if len(p.Steps) > 0 {
		field("steps")
		if b, err = appendMap(b, p.Steps, appendStepProgress); err != nil {
			return nil, err
		}
	}
	if len(p.ExecutedButNotCompleted) > 0 {
		field("executed_but_not_completed")
		b = appendStrings(b, p.ExecutedButNotCompleted)
	}
	return append(b, '}'), nil
}

func appendStepProgress(b []byte, sp storage.StepProgress) ([]byte, error) {
	var err error
	b = append(b, `{"first_attempt":`...)
	if b, err = appendTime(b, sp.FirstAttempt); err != nil {
		return nil, err
	}
	if !sp.LastHealthy.IsZero() {
		b = append(b, `,"last_healthy":`...)
		if b, err = appendTime(b, sp.LastHealthy); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(sp.Attempts), 10)
	if sp.Done {
		b = append(b, `,"done":true`...)
	}
	if sp.Skipped {
		b = append(b, `,"skipped":true`...)
	}
	if sp.RetryUntil != nil {
		b = append(b, `,"retry_until":`...)
		if b, err = appendTime(b, *sp.RetryUntil); err != nil {
			return nil, err
		}
	}
	if sp.RetryWithoutFail {
		b = append(b, `,"retry_without_fail":true`...)
	}
	if sp.LastError != "" {
		b = append(b, `,"last_error":`...)
		b = appendJSONString(b, sp.LastError)
	}
	if sp.LastWait != "" {
		b = append(b, `,"last_wait":`...)
		b = appendJSONString(b, sp.LastWait)
	}
	return append(b, '}'), nil
}

// appendMap writes m as a JSON object with its keys sorted, as encoding/json does.
func appendMap[V any](b []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendJSONString(b, k), ':')
		var err error
		if b, err = value(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendTime is time.Time's MarshalJSON (it refuses years outside 0-9999 the same way).
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b, err := t.AppendText(append(b, '"'))
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does: HTML-safe, invalid UTF-8 as U+FFFD, U+2028
// and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
