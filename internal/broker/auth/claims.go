package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Claims is what a handler learns about the caller of a request that passed
// a Verifier middleware. Basic-authenticated requests carry no Claims.
type Claims struct {
	Subject   string
	Issuer    string
	Audience  []string
	Email     string
	Groups    []string
	Scopes    []string
	ExpiresAt time.Time
}

// HasScope reports whether the token granted scope.
func (c Claims) HasScope(scope string) bool { return slices.Contains(c.Scopes, scope) }

// HasGroup reports whether the caller is in group.
func (c Claims) HasGroup(group string) bool { return slices.Contains(c.Groups, group) }

type claimsKey struct{}

// ClaimsFrom returns the verified token's claims stored in ctx by Require,
// RequireGroup or Authenticate.
func ClaimsFrom(ctx context.Context) (Claims, bool) {
	c, ok := ctx.Value(claimsKey{}).(Claims)
	return c, ok
}

// ContextWithClaims stores c in ctx the way the middlewares do (for tests of
// handlers that read ClaimsFrom).
func ContextWithClaims(ctx context.Context, c Claims) context.Context {
	return context.WithValue(ctx, claimsKey{}, c)
}

// tokenClaims is the JSON shape of the token payload the verifier reads.
type tokenClaims struct {
	jwt.RegisteredClaims
	Email  string    `json:"email,omitempty"`
	Groups groupList `json:"groups,omitempty"`
	Scope  scopeList `json:"scope,omitempty"`
	Scp    scopeList `json:"scp,omitempty"`
}

func (t *tokenClaims) toClaims() Claims {
	c := Claims{
		Subject:  t.Subject,
		Issuer:   t.Issuer,
		Audience: []string(t.Audience),
		Email:    t.Email,
		Groups:   []string(t.Groups),
	}
	for _, s := range append(slices.Clone([]string(t.Scope)), t.Scp...) {
		if !slices.Contains(c.Scopes, s) {
			c.Scopes = append(c.Scopes, s)
		}
	}
	if t.ExpiresAt != nil {
		c.ExpiresAt = t.ExpiresAt.Time
	}
	return c
}

// scopeList accepts a space-separated string (RFC 8693 "scope", Azure "scp")
// or an array of strings.
type scopeList []string

func (s *scopeList) UnmarshalJSON(b []byte) error {
	list, err := decodeStrings(b, strings.Fields)
	*s = list
	return err
}

// groupList accepts an array of strings or a single string.
type groupList []string

func (g *groupList) UnmarshalJSON(b []byte) error {
	list, err := decodeStrings(b, func(s string) []string {
		if s == "" {
			return nil
		}
		return []string{s}
	})
	*g = list
	return err
}

func decodeStrings(b []byte, split func(string) []string) ([]string, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		return split(t), nil
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("claim array holds a %T, want strings", e)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("claim is a %T, want a string or an array of strings", v)
	}
}
