package reconciler

import "github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"

// Error is returned by every Client method. It names what was being done (Op, e.g.
// `applying the cluster configuration of runtime "x"`) and tells whether the failure is temporary (worth
// retrying later: network errors, 429, 5xx, the context ending while retrying those) or permanent (4xx,
// malformed responses). It is the error type every client of internal/clients/clientkit returns.
type Error = clientkit.Error

// IsTemporary tells whether err is a Reconciler failure that may go away when retried later.
func IsTemporary(err error) bool { return clientkit.IsTemporary(err) }

// IsNotFound tells whether err is a Reconciler answer 404.
func IsNotFound(err error) bool { return clientkit.IsNotFound(err) }
