package eventhubs

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/kyma-project/kyma-environment-broker/internal/clients/clientkit"
)

// Error is returned by every Client method. It names what was being done (Op, e.g.
// `deleting Azure resource group "x"`) and tells whether the failure is temporary (worth retrying
// later: network errors, 429, 5xx, a resource group still being deleted, the context ending while
// retrying those) or permanent (other 4xx, malformed responses).
type Error = clientkit.Error

// ARM error codes the client acts on.
const (
	codeResourceGroupNotFound     = "ResourceGroupNotFound"
	codeResourceNotFound          = "ResourceNotFound"
	codeNotFound                  = "NotFound"
	codeResourceGroupBeingDeleted = "ResourceGroupBeingDeleted"
)

// IsTemporary tells whether err is an Azure failure that may go away when retried later.
func IsTemporary(err error) bool { return clientkit.IsTemporary(err) }

// IsNotFound tells whether err is an ARM answer 404 for a missing resource group or resource. A 404
// for a missing subscription or an unknown path is a configuration problem and does not count.
func IsNotFound(err error) bool {
	return clientkit.IsNotFound(err) && missing(err, codeResourceGroupNotFound, codeResourceNotFound, codeNotFound)
}

// Code returns the ARM error code ({"error":{"code":...}}) of the last answer in err, "" when there is none.
func Code(err error) string {
	var se *clientkit.StatusError
	if !errors.As(err, &se) {
		return ""
	}
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(se.Body), &body) != nil {
		return ""
	}
	return body.Error.Code
}

// missing tells whether err is an answer 404 with one of codes, so that a 404 for a wrong
// subscription or URL is never taken for a deleted object.
func missing(err error, codes ...string) bool {
	return clientkit.StatusOf(err) == http.StatusNotFound && slices.Contains(codes, Code(err))
}
