package operator

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// eventParams are the query parameters GET /events knows; others are refused by name.
var eventParams = []string{"instance_ids", "operation_ids", "type", "stage", "after_id", "before_id", "page_size"}

// eventsRequest is GET /events's query, validated. A feed (no instance or operation named, or a
// cursor or page size given) is one bounded page; otherwise every event of those, oldest first.
type eventsRequest struct {
	f    storage.EventFilter
	feed bool
}

func parseEvents(q url.Values) (eventsRequest, error) {
	var out eventsRequest
	if err := onlyParams(q, eventParams); err != nil {
		return out, err
	}
	f := &out.f
	var err error
	for key, into := range map[string]*[]string{"instance_ids": &f.InstanceIDs, "operation_ids": &f.OperationIDs, "stage": &f.Stages} {
		if *into, err = boundedList(q, key); err != nil {
			return out, err
		}
	}
	types, err := boundedList(q, "type")
	if err != nil {
		return out, err
	}
	known := []string{string(storage.EventStarted), string(storage.EventRetrying), string(storage.EventSucceeded),
		string(storage.EventFailed), string(storage.EventSkipped)}
	for _, t := range types {
		if !slices.Contains(known, t) {
			return out, fmt.Errorf("type: unknown event type %q (%s)", t, strings.Join(known, ", "))
		}
		f.Types = append(f.Types, storage.EventType(t))
	}
	for key, into := range map[string]*int64{"after_id": &f.AfterID, "before_id": &f.BeforeID} {
		if v := q.Get(key); v != "" {
			if *into, err = strconv.ParseInt(v, 10, 64); err != nil || *into < 1 {
				return out, fmt.Errorf("%s: must be a positive integer (an event's id), got %q", key, v)
			}
		}
	}
	_, size, err := paging("", q.Get("page_size"))
	if err != nil {
		return out, err
	}
	out.feed = (len(f.InstanceIDs) == 0 && len(f.OperationIDs) == 0) || q.Has("after_id") || q.Has("before_id") || q.Has("page_size")
	if out.feed {
		// Newest first, except when walking forward from a cursor: then the events right after it,
		// oldest first, so a poller misses none.
		f.Descending = f.AfterID == 0
		f.Paging = storage.Paging{Page: 1, PageSize: size, WithoutTotal: true}
	}
	return out, nil
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	req, err := parseEvents(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	out := []runtime.Event{}
	f := req.f
	for p := 1; ; p++ {
		if !req.feed {
			f.Page, f.PageSize = p, 1000
		}
		res, err := h.store.Events().ListEvents(r.Context(), f)
		if err != nil {
			h.fail(w, err)
			return
		}
		for _, e := range res.Items {
			out = append(out, runtime.Event{
				ID: e.ID, OperationID: e.OperationID, InstanceID: e.InstanceID, Step: e.Step, Stage: e.Stage, Type: string(e.Type), Message: e.Message,
				DurationMS: e.Duration.Milliseconds(), WaitMS: e.Wait.Milliseconds(), CreatedAt: e.CreatedAt,
			})
		}
		if req.feed || p*1000 >= res.TotalCount {
			break
		}
	}
	writeJSON(w, out)
}
