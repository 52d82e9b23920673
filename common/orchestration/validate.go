package orchestration

import (
	"fmt"
	"regexp"
	"time"
)

// MaxVersionLength bounds an upgrade's versions as provisioning bounds kymaVersion.
const MaxVersionLength = 64

// versionPattern is provisioning's kymaVersion pattern: the versions reach the Reconciler and
// Gardener, in URLs and names.
var versionPattern = regexp.MustCompile(`^[a-zA-Z0-9._+-]+$`)

// CheckVersion reports, naming field, why v cannot be an upgrade's version.
func CheckVersion(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s: is required", field)
	case len(v) > MaxVersionLength:
		return fmt.Errorf("%s: at most %d characters, got %d", field, MaxVersionLength, len(v))
	case !versionPattern.MatchString(v):
		return fmt.Errorf("%s: may contain only letters, digits, '.', '_', '+' and '-', got %q", field, v)
	}
	return nil
}

// ParseTime reads an RFC 3339 time with RFC 3339's offsets (hours 00-23, minutes 00-59):
// time.Parse also takes +24:00 and +23:60.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, err
	}
	if n := len(s); s[n-1] != 'Z' && s[n-1] != 'z' {
		// time.Parse checked the form ±hh:mm at the end.
		hh, mm := (s[n-5]-'0')*10+(s[n-4]-'0'), (s[n-2]-'0')*10+(s[n-1]-'0')
		if hh > 23 || mm > 59 {
			return time.Time{}, fmt.Errorf("time zone offset %s out of range (hours 00-23, minutes 00-59)", s[n-6:])
		}
	}
	return t, nil
}
