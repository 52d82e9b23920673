package gqlschema

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/apperr"
)

// Labels are a runtime's labels: a JSON object of label name to value.
type Labels map[string]any

// UnmarshalGQL implements graphql.Unmarshaler. A value that is no JSON object is a BAD_REQUEST;
// the API fills in the field from the input's path.
func (l *Labels) UnmarshalGQL(v any) error {
	if v == nil {
		*l = nil
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return apperr.BadRequest("", "labels must be a JSON object, got %s", jsonKind(v))
	}
	// gqlgen decodes numbers as json.Number: round-trip through JSON so that labels look
	// the same whether they came over the wire or in the process (numbers as float64), and
	// share nothing with the request.
	b, err := json.Marshal(m)
	if err != nil {
		return apperr.BadRequest("", "labels are no valid JSON: %s", err)
	}
	var labels Labels
	if err := json.Unmarshal(b, &labels); err != nil {
		return apperr.BadRequest("", "labels are no valid JSON: %s", err)
	}
	*l = labels
	return nil
}

// MarshalGQL implements graphql.Marshaler.
func (l Labels) MarshalGQL(w io.Writer) {
	if l == nil {
		_, _ = io.WriteString(w, "null")
		return
	}
	b, err := json.Marshal(map[string]any(l))
	if err != nil {
		// Labels come from JSON, so they always marshal; keep the output valid JSON regardless.
		_, _ = io.WriteString(w, "null")
		return
	}
	_, _ = w.Write(b)
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case json.Number, float64, int, int64:
		return "a number"
	default:
		return fmt.Sprintf("%T", v)
	}
}
