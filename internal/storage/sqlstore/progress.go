package sqlstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kyma-project/kyma-environment-broker/internal/jsonappend"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// The progress document is written compactly (version 2): every save of an operation rewrites
// it whole, and it grows with the steps run (version 1, encoding/json's form of
// storage.Progress, took ~2.1 KB after a provisioning's 20 steps: over PostgreSQL's 2 KB
// threshold, so it was compressed on every save). Version 2 is JSON too, with the same
// top-level keys (a LIKE on "executed_but_not_completed" still finds it):
//
//	{"v":2,"t":BASE,"finished_stages":[...],"stage_started_at":{"stage":T},
//	 "steps":{"name":[FIRST,ATTEMPTS,FLAGS,HEALTHY,RETRY_UNTIL,"last error","last wait",DUE,LATE,GIVES_UP]},
//	 "executed_but_not_completed":[...]}
//
// BASE is Unix nanoseconds; every time T is nanoseconds after BASE (null for a zero time); FLAGS
// is done 1, skipped 2, retry without fail 4, slow warned 8; LATE is nanoseconds; a step's trailing defaults are
// left out. Times come
// back in UTC. Version 1 documents are read as before; a progress with a time outside
// 1970-2200 (nanoseconds would overflow) is written as version 1.
const progressV2Prefix = `{"v":2,`

const (
	stepDone = 1 << iota
	stepSkipped
	stepRetryWithoutFail
	stepSlowWarned
)

// encodeProgress writes p compactly (version 2), or as version 1 when a time is out of range.
func encodeProgress(b []byte, p storage.Progress) ([]byte, error) {
	base, ok := progressBase(p)
	if !ok {
		return appendProgress(b, p)
	}
	b = append(b, progressV2Prefix...)
	b = append(b, `"t":`...)
	b = strconv.AppendInt(b, base, 10)
	if len(p.FinishedStages) > 0 {
		b = appendStrings(append(b, `,"finished_stages":`...), p.FinishedStages)
	}
	if len(p.StageStartedAt) > 0 {
		b = appendObject(append(b, `,"stage_started_at":`...), p.StageStartedAt, func(b []byte, t time.Time) []byte { return appendDelta(b, t, base) })
	}
	if len(p.Steps) > 0 {
		b = appendObject(append(b, `,"steps":`...), p.Steps, func(b []byte, sp storage.StepProgress) []byte { return appendStepV2(b, sp, base) })
	}
	if len(p.ExecutedButNotCompleted) > 0 {
		b = appendStrings(append(b, `,"executed_but_not_completed":`...), p.ExecutedButNotCompleted)
	}
	return append(b, '}'), nil
}

// appendObject writes m as a JSON object, in map order (readers do not depend on it).
func appendObject[V any](b []byte, m map[string]V, value func([]byte, V) []byte) []byte {
	b = append(b, '{')
	first := true
	for k, v := range m {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = value(append(jsonappend.String(b, k), ':'), v)
	}
	return append(b, '}')
}

func appendStepV2(b []byte, sp storage.StepProgress, base int64) []byte {
	flags := 0
	if sp.Done {
		flags |= stepDone
	}
	if sp.Skipped {
		flags |= stepSkipped
	}
	if sp.RetryWithoutFail {
		flags |= stepRetryWithoutFail
	}
	if sp.SlowWarned {
		flags |= stepSlowWarned
	}
	b = appendDelta(append(b, '['), sp.FirstAttempt, base)
	b = strconv.AppendInt(append(b, ','), int64(sp.Attempts), 10)
	b = strconv.AppendInt(append(b, ','), int64(flags), 10)
	// The rest only up to the last one set.
	last := 0
	switch {
	case !sp.GivesUpAt.IsZero():
		last = 10
	case sp.Late != 0:
		last = 9
	case !sp.Due.IsZero():
		last = 8
	case sp.LastWait != "":
		last = 7
	case sp.LastError != "":
		last = 6
	case sp.RetryUntil != nil:
		last = 5
	case !sp.LastHealthy.IsZero():
		last = 4
	}
	if last >= 4 {
		b = appendDelta(append(b, ','), sp.LastHealthy, base)
	}
	if last >= 5 {
		var until time.Time
		if sp.RetryUntil != nil {
			until = *sp.RetryUntil
		}
		b = appendDelta(append(b, ','), until, base)
	}
	if last >= 6 {
		b = jsonappend.String(append(b, ','), sp.LastError)
	}
	if last >= 7 {
		b = jsonappend.String(append(b, ','), sp.LastWait)
	}
	if last >= 8 {
		b = appendDelta(append(b, ','), sp.Due, base)
	}
	if last >= 9 {
		b = strconv.AppendInt(append(b, ','), int64(sp.Late), 10)
	}
	if last >= 10 {
		b = appendDelta(append(b, ','), sp.GivesUpAt, base)
	}
	return append(b, ']')
}

func appendDelta(b []byte, t time.Time, base int64) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, t.UnixNano()-base, 10)
}

var (
	progressMin = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	progressMax = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// progressBase is the earliest time in p in Unix nanoseconds (0 when p has none); false when a
// time is outside 1970-2200 (or a retry window ends at the zero time, which version 2 cannot
// tell from none).
func progressBase(p storage.Progress) (int64, bool) {
	var base time.Time
	ok := true
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if t.Before(progressMin) || !t.Before(progressMax) {
			ok = false
		}
		if base.IsZero() || t.Before(base) {
			base = t
		}
	}
	for _, t := range p.StageStartedAt {
		see(t)
	}
	for _, sp := range p.Steps {
		see(sp.FirstAttempt)
		see(sp.LastHealthy)
		see(sp.Due)
		see(sp.GivesUpAt)
		if sp.RetryUntil != nil {
			if sp.RetryUntil.IsZero() {
				return 0, false
			}
			see(*sp.RetryUntil)
		}
	}
	if !ok {
		return 0, false
	}
	if base.IsZero() {
		return 0, true
	}
	return base.UnixNano(), true
}

// decodeProgress reads a progress document of either version.
func decodeProgress(b []byte) (storage.Progress, error) {
	var p storage.Progress
	if !bytes.HasPrefix(b, []byte(progressV2Prefix)) {
		err := json.Unmarshal(b, &p)
		return p, err
	}
	// Read with gjson, without reflection: decoding with encoding/json (a map of raw fields, then
	// a json.Unmarshal per field) made reading operations' progress a visible share of the
	// broker's CPU with many operations in flight (claims read it for every operation they lease).
	if !gjson.ValidBytes(b) {
		return p, errors.New("progress is not valid JSON")
	}
	doc := gjson.ParseBytes(b)
	baseField := doc.Get("t")
	if baseField.Type != gjson.Number {
		return p, errors.New("progress has no base time")
	}
	base, err := strconv.ParseInt(baseField.Raw, 10, 64)
	if err != nil {
		return p, fmt.Errorf("base time: %w", err)
	}
	at := func(f gjson.Result) (time.Time, error) {
		switch f.Type {
		case gjson.Null:
			return time.Time{}, nil
		case gjson.Number:
			d, err := strconv.ParseInt(f.Raw, 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(0, base+d).UTC(), nil
		}
		return time.Time{}, fmt.Errorf("a time is a number or null, not %s", f.Type)
	}
	if p.FinishedStages, err = stringList(doc.Get("finished_stages")); err != nil {
		return p, fmt.Errorf("finished stages: %w", err)
	}
	if p.ExecutedButNotCompleted, err = stringList(doc.Get("executed_but_not_completed")); err != nil {
		return p, fmt.Errorf("steps not completed: %w", err)
	}
	if started := doc.Get("stage_started_at"); started.IsObject() {
		p.StageStartedAt = map[string]time.Time{}
		started.ForEach(func(k, v gjson.Result) bool {
			p.StageStartedAt[k.String()], err = at(v)
			if err != nil {
				err = fmt.Errorf("stage %q: %w", k.String(), err)
			}
			return err == nil
		})
		if err != nil {
			return p, err
		}
		if len(p.StageStartedAt) == 0 {
			p.StageStartedAt = nil
		}
	}
	if steps := doc.Get("steps"); steps.IsObject() {
		p.Steps = map[string]storage.StepProgress{}
		steps.ForEach(func(k, v gjson.Result) bool {
			var sp storage.StepProgress
			if sp, err = decodeStepV2(v, at); err != nil {
				err = fmt.Errorf("step %q: %w", k.String(), err)
				return false
			}
			p.Steps[k.String()] = sp
			return true
		})
		if err != nil {
			return p, err
		}
		if len(p.Steps) == 0 {
			p.Steps = nil
		}
	}
	return p, nil
}

// stringList reads an array of strings (absent or null: nil).
func stringList(f gjson.Result) ([]string, error) {
	switch {
	case !f.Exists() || f.Type == gjson.Null:
		return nil, nil
	case !f.IsArray():
		return nil, fmt.Errorf("not an array: %s", f.Raw)
	}
	var out []string
	var err error
	f.ForEach(func(_, v gjson.Result) bool {
		if v.Type != gjson.String {
			err = fmt.Errorf("not a string: %s", v.Raw)
			return false
		}
		out = append(out, v.String())
		return true
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// decodeStepV2 reads a step's fields (see appendStepV2).
func decodeStepV2(v gjson.Result, at func(gjson.Result) (time.Time, error)) (storage.StepProgress, error) {
	var sp storage.StepProgress
	if !v.IsArray() {
		return sp, fmt.Errorf("not an array: %s", v.Raw)
	}
	i := 0
	var err error
	v.ForEach(func(_, f gjson.Result) bool {
		switch i {
		case 0:
			sp.FirstAttempt, err = at(f)
		case 1, 2:
			var n int64
			if n, err = stepInt(f); i == 1 {
				sp.Attempts = int(n)
			} else {
				sp.Done, sp.Skipped, sp.RetryWithoutFail = n&stepDone != 0, n&stepSkipped != 0, n&stepRetryWithoutFail != 0
				sp.SlowWarned = n&stepSlowWarned != 0
			}
		case 3:
			sp.LastHealthy, err = at(f)
		case 4:
			if f.Type != gjson.Null {
				var until time.Time
				until, err = at(f)
				sp.RetryUntil = &until
			}
		case 5:
			sp.LastError, err = stepString(f)
		case 6:
			sp.LastWait, err = stepString(f)
		case 7:
			sp.Due, err = at(f)
		case 8:
			var n int64
			n, err = stepInt(f)
			sp.Late = time.Duration(n)
		case 9:
			sp.GivesUpAt, err = at(f)
		default:
			err = errors.New("more than 10 fields")
		}
		if err != nil {
			err = fmt.Errorf("field %d: %w", i, err)
		}
		i++
		return err == nil
	})
	if err == nil && i < 3 {
		err = fmt.Errorf("%d fields", i)
	}
	if err != nil {
		return storage.StepProgress{}, err
	}
	return sp, nil
}

func stepInt(f gjson.Result) (int64, error) {
	if f.Type != gjson.Number {
		return 0, fmt.Errorf("not a number: %s", f.Raw)
	}
	return strconv.ParseInt(f.Raw, 10, strconv.IntSize)
}

func stepString(f gjson.Result) (string, error) {
	if f.Type != gjson.String {
		return "", fmt.Errorf("not a string: %s", f.Raw)
	}
	return f.String(), nil
}

// appendProgress (version 1) encodes p exactly as encoding/json does (same fields, omissions, sorted map
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
		if b, err = jsonappend.SortedMap(b, p.StageStartedAt, appendTime); err != nil {
			return nil, err
		}
	}
	if len(p.Steps) > 0 {
		field("steps")
		if b, err = jsonappend.SortedMap(b, p.Steps, appendStepProgress); err != nil {
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
		b = jsonappend.String(b, sp.LastError)
	}
	if sp.LastWait != "" {
		b = append(b, `,"last_wait":`...)
		b = jsonappend.String(b, sp.LastWait)
	}
	if sp.SlowWarned {
		b = append(b, `,"slow_warned":true`...)
	}
	if !sp.Due.IsZero() {
		b = append(b, `,"due":`...)
		if b, err = appendTime(b, sp.Due); err != nil {
			return nil, err
		}
	}
	if sp.Late != 0 {
		b = append(b, `,"late":`...)
		b = strconv.AppendInt(b, int64(sp.Late), 10)
	}
	if !sp.GivesUpAt.IsZero() {
		b = append(b, `,"gives_up_at":`...)
		if b, err = appendTime(b, sp.GivesUpAt); err != nil {
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
		b = jsonappend.String(b, s)
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
