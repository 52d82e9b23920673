package clientkit

import (
	"errors"
	"net/url"
)

// CheckURL reports a missing value or one that is not an absolute http(s) URL, naming the
// variable it came from (e.g. APP_AVS_URL); nil when it is fine.
func CheckURL(name, value string) error {
	if value == "" {
		return errors.New(name + " is required")
	}
	if p, err := url.Parse(value); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return errors.New(name + " must be an absolute http(s) URL")
	}
	return nil
}

// Require reports an empty value, naming the variable it came from; nil otherwise.
func Require(name, value string) error {
	if value == "" {
		return errors.New(name + " is required")
	}
	return nil
}
