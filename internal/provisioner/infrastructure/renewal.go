package infrastructure

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// KubeconfigRenewer is implemented by backends whose admin kubeconfigs expire (gardener's come
// from Gardener's shoots/adminkubeconfig subresource, valid for a bounded time). The
// provisioner keeps a runtime's kubeconfig with the runtime and, before handing it out or using
// it, asks for a new one once it is due (RenewKubeconfig).
type KubeconfigRenewer interface {
	// KubeconfigCredentials returns an admin kubeconfig of the runtime and when it expires.
	KubeconfigCredentials(ctx context.Context, spec Spec) (Credentials, error)
}

// KubeconfigValidity reads when the credentials of kubeconfig's current user start and stop
// being valid: from its client certificate (Gardener's admin kubeconfigs) or the iat/nbf and
// exp claims of its bearer token (ServiceAccount tokens). ok is false when the kubeconfig
// carries neither (a static token, or no kubeconfig at all).
func KubeconfigValidity(kubeconfig string) (notBefore, notAfter time.Time, ok bool) {
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return time.Time{}, time.Time{}, false
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return time.Time{}, time.Time{}, false
	}
	user := cfg.AuthInfos[ctx.AuthInfo]
	if user == nil {
		return time.Time{}, time.Time{}, false
	}
	if len(user.ClientCertificateData) > 0 {
		if block, _ := pem.Decode(user.ClientCertificateData); block != nil {
			if cert, err := x509.ParseCertificate(block.Bytes); err == nil {
				return cert.NotBefore, cert.NotAfter, true
			}
		}
	}
	if parts := strings.Split(user.Token, "."); len(parts) == 3 {
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			return time.Time{}, time.Time{}, false
		}
		var claims struct {
			IssuedAt  int64 `json:"iat"`
			NotBefore int64 `json:"nbf"`
			Expires   int64 `json:"exp"`
		}
		if json.Unmarshal(payload, &claims) != nil || claims.Expires == 0 {
			return time.Time{}, time.Time{}, false
		}
		start := claims.NotBefore
		if start == 0 {
			start = claims.IssuedAt
		}
		return time.Unix(start, 0), time.Unix(claims.Expires, 0), true
	}
	return time.Time{}, time.Time{}, false
}

// KubeconfigDue reports whether an expiring kubeconfig should be replaced at now: once two
// thirds of its validity have passed, so that whoever gets it still has a third of it to
// work with; a kubeconfig whose validity cannot be read is due (it may be a static one that
// Gardener no longer honours).
func KubeconfigDue(kubeconfig string, now time.Time) bool {
	start, end, ok := KubeconfigValidity(kubeconfig)
	if !ok {
		return true
	}
	return !now.Before(RenewAt(start, end))
}

// RenewAt is when credentials valid from start to end are due for renewal.
func RenewAt(start, end time.Time) time.Time {
	return end.Add(-end.Sub(start) / 3)
}
