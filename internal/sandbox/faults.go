package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Faults is the fault injection configured for one system. The zero value injects nothing.
type Faults struct {
	// ErrorRate is the fraction of requests, in [0, 1], answered with 503 or 500 (chosen at random)
	// without reaching the stand-in.
	ErrorRate float64
	// LostResponseRate is the fraction of the remaining requests, in [0, 1], that the stand-in
	// handles but whose answer is replaced by a 502: the change happened and the client does not
	// know, which only an idempotent client survives without duplicates.
	LostResponseRate float64
	// Latency delays every request before it is handled; the delay ends early when the client goes away.
	Latency time.Duration
	// OutageFrom and OutageUntil bound a window in which every request is answered with 503.
	// A zero bound is open: only OutageUntil set means "down until then", only OutageFrom set means
	// "down from then on". Both zero means no outage.
	OutageFrom  time.Time
	OutageUntil time.Time
}

type faultsJSON struct {
	ErrorRate        float64    `json:"errorRate"`
	LostResponseRate float64    `json:"lostResponseRate,omitempty"`
	Latency          string     `json:"latency,omitempty"`
	OutageFrom       *time.Time `json:"outageFrom,omitempty"`
	OutageUntil      *time.Time `json:"outageUntil,omitempty"`
}

// MarshalJSON encodes the faults as {"errorRate": 0.3, "latency": "2s", "outageFrom": RFC3339, "outageUntil": RFC3339}.
func (f Faults) MarshalJSON() ([]byte, error) {
	out := faultsJSON{ErrorRate: f.ErrorRate, LostResponseRate: f.LostResponseRate}
	if f.Latency > 0 {
		out.Latency = f.Latency.String()
	}
	if !f.OutageFrom.IsZero() {
		t := f.OutageFrom
		out.OutageFrom = &t
	}
	if !f.OutageUntil.IsZero() {
		t := f.OutageUntil
		out.OutageUntil = &t
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes the form written by MarshalJSON; latency is a Go duration string and
// unknown fields are rejected.
func (f *Faults) UnmarshalJSON(data []byte) error {
	var in faultsJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return err
	}
	out := Faults{ErrorRate: in.ErrorRate, LostResponseRate: in.LostResponseRate}
	if in.Latency != "" {
		d, err := time.ParseDuration(in.Latency)
		if err != nil {
			return fmt.Errorf("latency: %w", err)
		}
		out.Latency = d
	}
	if in.OutageFrom != nil {
		out.OutageFrom = *in.OutageFrom
	}
	if in.OutageUntil != nil {
		out.OutageUntil = *in.OutageUntil
	}
	*f = out
	return nil
}

// Validate reports faults that cannot be applied.
func (f Faults) Validate() error {
	var errs []error
	if f.ErrorRate < 0 || f.ErrorRate > 1 {
		errs = append(errs, fmt.Errorf("errorRate %v is not in [0, 1]", f.ErrorRate))
	}
	if f.LostResponseRate < 0 || f.LostResponseRate > 1 {
		errs = append(errs, fmt.Errorf("lostResponseRate %v is not in [0, 1]", f.LostResponseRate))
	}
	if f.Latency < 0 {
		errs = append(errs, fmt.Errorf("latency %v is negative", f.Latency))
	}
	if !f.OutageFrom.IsZero() && !f.OutageUntil.IsZero() && !f.OutageUntil.After(f.OutageFrom) {
		errs = append(errs, fmt.Errorf("outageUntil %s is not after outageFrom %s",
			f.OutageUntil.Format(time.RFC3339), f.OutageFrom.Format(time.RFC3339)))
	}
	return errors.Join(errs...)
}

// InOutage tells whether now falls in the outage window.
func (f Faults) InOutage(now time.Time) bool {
	if f.OutageFrom.IsZero() && f.OutageUntil.IsZero() {
		return false
	}
	if !f.OutageFrom.IsZero() && now.Before(f.OutageFrom) {
		return false
	}
	if !f.OutageUntil.IsZero() && !now.Before(f.OutageUntil) {
		return false
	}
	return true
}
