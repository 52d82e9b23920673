package operator

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
	"github.com/kyma-project/kyma-environment-broker/internal/storage"
)

// eventParams are the query parameters GET /events knows; others are refused by name.
var eventParams = []string{"instance_ids", "operation_ids", "type", "stage", "after_id", "before_id", "page_size", "collapse"}

// maxCollapseScan bounds the stored events one collapsed page reads (a step retrying for hours
// is thousands of events; the page shows it as one entry, and what follows it).
const maxCollapseScan = 20_000

// eventsRequest is GET /events's query, validated. A feed (no instance or operation named, or a
// cursor or page size given) is one bounded page; otherwise every event of those, oldest first.
type eventsRequest struct {
	f    storage.EventFilter
	feed bool
	// collapse shows consecutive retrying events of one step of one operation as one entry.
	collapse bool
	size     int
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
	if v := q.Get("collapse"); v != "" {
		if out.collapse, err = strconv.ParseBool(v); err != nil {
			return out, fmt.Errorf("collapse: must be true or false, got %q", v)
		}
	}
	_, size, err := paging("", q.Get("page_size"))
	if err != nil {
		return out, err
	}
	out.size = size
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
	idx := newInstanceIndex()
	if err := h.withRuntimes(r.Context(), idx, &req.f); err != nil {
		h.fail(w, err)
		return
	}
	var raw []storage.Event
	if req.feed && req.collapse {
		raw, err = h.collapsedFeed(r.Context(), req)
	} else {
		raw, err = h.allEvents(r.Context(), req)
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	out := make([]runtime.Event, 0, len(raw))
	for _, e := range raw {
		ev := runtime.Event{
			ID: e.ID, OperationID: e.OperationID, InstanceID: e.InstanceID, Step: e.Step, Stage: e.Stage, Type: string(e.Type), Message: e.Message,
			DurationMS: e.Duration.Milliseconds(), WaitMS: e.Wait.Milliseconds(), CreatedAt: e.CreatedAt,
		}
		if e.Type == storage.EventRetrying && e.Wait > 0 {
			next := e.CreatedAt.Add(e.Wait)
			ev.NextTryAt = &next
		}
		out = append(out, ev)
	}
	if req.collapse {
		out = collapse(out, !req.f.Descending)
	}
	if err := h.annotate(r.Context(), idx, out); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, out)
}

// withRuntimes adds the runtimes of the named instances to the filter: a provisioner's
// operation records its runtime as its instance, and an instance's events include them.
func (h *Handler) withRuntimes(ctx context.Context, idx *instanceIndex, f *storage.EventFilter) error {
	if err := h.learn(ctx, idx, f.InstanceIDs); err != nil {
		return err
	}
	ids := slices.Clone(f.InstanceIDs)
	for _, id := range f.InstanceIDs {
		if inst, ok := idx.byInstance[id]; ok && inst.RuntimeID != "" {
			ids = append(ids, inst.RuntimeID)
			// Known already: its events need no look-up of their own.
			idx.byRuntime[inst.RuntimeID], idx.tried[inst.RuntimeID] = inst, true
		}
	}
	f.InstanceIDs = uniq(ids)
	return nil
}

// allEvents reads the request's events: one page for a feed, else every event of the named
// instances and operations.
func (h *Handler) allEvents(ctx context.Context, req eventsRequest) ([]storage.Event, error) {
	var out []storage.Event
	f := req.f
	for p := 1; ; p++ {
		if !req.feed {
			f.Page, f.PageSize = p, 1000
		}
		res, err := h.store.Events().ListEvents(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Items...)
		if req.feed || p*1000 >= res.TotalCount {
			return out, nil
		}
	}
}

// collapsedFeed reads stored events in the feed's order until they make req.size entries once
// collapsed: a step retrying for long takes one entry, and the rest of the fleet stays on the
// page. It stops before the event that would start one entry too many, so that the last event
// read is the cursor of the next page (before_id, or after_id when walking forward).
func (h *Handler) collapsedFeed(ctx context.Context, req eventsRequest) ([]storage.Event, error) {
	f := req.f
	f.Paging = storage.Paging{Page: 1, PageSize: 1000, WithoutTotal: true}
	var out []storage.Event
	entries := 0
	last := map[string]storage.Event{} // the last event read of each operation
	for scanned := 0; scanned < maxCollapseScan; {
		res, err := h.store.Events().ListEvents(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, e := range res.Items {
			if !repeats(last[e.OperationID], e) {
				if entries == req.size {
					return out, nil
				}
				entries++
			}
			last[e.OperationID] = e
			out = append(out, e)
		}
		scanned += len(res.Items)
		if len(res.Items) < f.PageSize {
			break
		}
		if f.Descending {
			f.BeforeID = res.Items[len(res.Items)-1].ID
		} else {
			f.AfterID = res.Items[len(res.Items)-1].ID
		}
	}
	return out, nil
}

// repeats reports whether e repeats prev, the previous event read of its operation: both are
// retries of one step.
func repeats(prev, e storage.Event) bool {
	return prev.ID != 0 && prev.Type == storage.EventRetrying && e.Type == storage.EventRetrying && prev.Step == e.Step && prev.Stage == e.Stage
}

// collapse merges each operation's consecutive retrying events of one step into one entry,
// kept where its newest event is; ascending tells the order of evs (oldest first or newest
// first). Nothing is dropped: the entry counts the events and names the first.
func collapse(evs []runtime.Event, ascending bool) []runtime.Event {
	out := make([]runtime.Event, 0, len(evs))
	open := map[string]int{} // operation -> index in out of its last entry
	same := func(a, b runtime.Event) bool {
		return a.Type == string(storage.EventRetrying) && b.Type == a.Type && a.Step == b.Step && a.Stage == b.Stage
	}
	for _, e := range evs {
		i, ok := open[e.OperationID]
		if ok && same(out[i], e) {
			g := &out[i]
			if g.Repeats == 0 {
				g.Repeats, g.FirstID, g.FirstAt = 1, g.ID, ptr(g.CreatedAt)
			}
			g.Repeats++
			if ascending {
				// e is newer: it becomes the entry's face, and the entry moves to e's place.
				first, firstAt, n := g.FirstID, g.FirstAt, g.Repeats
				out = slices.Delete(out, i, i+1)
				for k, j := range open {
					if j > i {
						open[k] = j - 1
					}
				}
				e.Repeats, e.FirstID, e.FirstAt = n, first, firstAt
				out = append(out, e)
				open[e.OperationID] = len(out) - 1
			} else {
				// e is older: the entry keeps its newest event and starts earlier.
				g.FirstID, g.FirstAt = e.ID, ptr(e.CreatedAt)
			}
			continue
		}
		out = append(out, e)
		open[e.OperationID] = len(out) - 1
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// annotate names each event's instance and runtime (a provisioner's operation records its
// runtime as its instance) and, for the retries of operations under way, when the step gives up.
func (h *Handler) annotate(ctx context.Context, idx *instanceIndex, evs []runtime.Event) error {
	if len(evs) == 0 {
		return nil
	}
	var ids, retrying []string
	for _, e := range evs {
		ids = append(ids, e.InstanceID)
		if e.Type == string(storage.EventRetrying) {
			retrying = append(retrying, e.OperationID)
		}
	}
	retrying = uniq(retrying)
	if err := h.learn(ctx, idx, ids); err != nil {
		return err
	}
	retryUntil := map[string]map[string]*time.Time{}
	for chunk := range slices.Chunk(retrying, 500) {
		res, err := h.store.Operations().ListOperations(ctx, storage.OperationFilter{IDs: chunk, Paging: storage.Paging{Page: 1, PageSize: len(chunk), WithoutTotal: true}})
		if err != nil {
			return fmt.Errorf("reading the operations of retrying events: %w", err)
		}
		for _, op := range res.Items {
			if op.State != storage.StatePending && op.State != storage.StateInProgress {
				continue
			}
			steps := map[string]*time.Time{}
			for name, sp := range op.Progress.Steps {
				switch {
				case sp.Done:
				case !sp.GivesUpAt.IsZero():
					// The first of the step's limits, as of its last retry (the engine's).
					steps[name] = ptr(sp.GivesUpAt)
				case sp.RetryUntil != nil:
					// Progress written before GivesUpAt was recorded.
					steps[name] = sp.RetryUntil
				}
			}
			retryUntil[op.ID] = steps
		}
	}
	for i := range evs {
		e := &evs[i]
		if inst, ok := idx.byInstance[e.InstanceID]; ok {
			e.RuntimeID = inst.RuntimeID
		} else if inst, ok := idx.byRuntime[e.InstanceID]; ok {
			e.InstanceID, e.RuntimeID, e.Origin = inst.InstanceID, e.InstanceID, "provisioner"
		}
		if e.Type == string(storage.EventRetrying) {
			e.GivesUpAt = retryUntil[e.OperationID][e.Step]
		}
	}
	return nil
}

// instanceIndex is the instances a request's events name, by instance ID and by runtime ID (a
// provisioner's operation records its runtime as its instance), each ID read once.
type instanceIndex struct {
	byInstance, byRuntime map[string]storage.Instance
	tried                 map[string]bool
}

func newInstanceIndex() *instanceIndex {
	return &instanceIndex{byInstance: map[string]storage.Instance{}, byRuntime: map[string]storage.Instance{}, tried: map[string]bool{}}
}

// learn reads the instances of the IDs not tried yet: as instance IDs, then those not found
// as runtime IDs.
func (h *Handler) learn(ctx context.Context, idx *instanceIndex, ids []string) error {
	var fresh []string
	for _, id := range uniq(slices.Clone(ids)) {
		if !idx.tried[id] {
			idx.tried[id] = true
			fresh = append(fresh, id)
		}
	}
	if err := h.instancesBy(ctx, fresh, func(f *storage.InstanceFilter, chunk []string) { f.InstanceIDs = chunk }, func(i storage.Instance) { idx.byInstance[i.InstanceID] = i }); err != nil {
		return err
	}
	var unknown []string
	for _, id := range fresh {
		if _, ok := idx.byInstance[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	return h.instancesBy(ctx, unknown, func(f *storage.InstanceFilter, chunk []string) { f.RuntimeIDs = chunk }, func(i storage.Instance) { idx.byRuntime[i.RuntimeID] = i })
}

// instancesBy reads the instances (deprovisioned too) ids select, set into the filter by set,
// in chunks, passing each to found.
func (h *Handler) instancesBy(ctx context.Context, ids []string, set func(*storage.InstanceFilter, []string), found func(storage.Instance)) error {
	for chunk := range slices.Chunk(ids, 500) {
		f := storage.InstanceFilter{IncludeDeleted: true, Paging: storage.Paging{Page: 1, PageSize: 1000, WithoutTotal: true}}
		set(&f, chunk)
		res, err := h.store.Instances().ListInstances(ctx, f)
		if err != nil {
			return fmt.Errorf("reading the instances of events: %w", err)
		}
		for _, inst := range res.Items {
			found(inst)
		}
	}
	return nil
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
