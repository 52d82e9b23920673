package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kyma-project/kyma-environment-broker/common/runtime"
)

// eventFlags names the flag of each GET /events parameter, for the broker's 400s (the broker
// knows the event types and checks them; kcp names its own flag in the error).
var eventFlags = map[string]string{"instance_ids": "--instance-id", "operation_ids": "--operation-id", "type": "--type",
	"stage": "--stage", "page_size": "--page-size", "collapse": "--collapse"}

// followPage is the most events one poll of --follow asks for; a full page is followed at once
// by the next.
const followPage = 1000

func (a *app) eventsCmd() *cobra.Command {
	var (
		instanceIDs, operationIDs, types, stages []string
		follow, collapse                         bool
		pollInterval                             time.Duration
		pageSize                                 int
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show step events of instances, operations or the whole fleet (GET /events); --follow prints new ones as they come",
		Long: `Without --instance-id or --operation-id: the newest --page-size events of the fleet. With them: every
event of those instances or operations. Oldest first either way.

--type keeps events of those types (the broker's: retrying, succeeded, failed, skipped; started in old rows);
--stage of those stages. --collapse shows consecutive retries of one step of one operation as one
row (its TYPE says how many).

--follow then asks every --poll-interval for the events after the newest printed and prints them,
until interrupted (Ctrl-C) or, when --timeout is given, until it has passed. With -o json it prints
one JSON object per line, with -o yaml one document per event.`,
		Example: `  kcp events --instance-id 1234
  kcp events --operation-id 5678 -o json
  kcp events --type retrying,failed
  kcp events --follow --type failed
  kcp events --follow --instance-id 1234 --timeout 10m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pageSize < 1 || pageSize > 1000 {
				return usagef("--page-size: must be from 1 to 1000, got %d", pageSize)
			}
			if follow && pollInterval <= 0 {
				return usagef("--poll-interval: must be positive, got %s", pollInterval)
			}
			q := url.Values{}
			for key, vals := range map[string][]string{"instance_ids": instanceIDs, "operation_ids": operationIDs, "type": types, "stage": stages} {
				if len(vals) > 0 {
					q.Set(key, strings.Join(vals, ","))
				}
			}
			if collapse {
				q.Set("collapse", "true")
			}
			feed := len(instanceIDs) == 0 && len(operationIDs) == 0
			if feed {
				q.Set("page_size", strconv.Itoa(pageSize))
			}
			ctx := cmd.Context()
			if follow && cmd.Flags().Changed("timeout") {
				// Following, --timeout bounds the whole follow (each request too, as always).
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, a.timeout)
				defer cancel()
			}
			first, err := a.events(ctx, q)
			if err != nil {
				if follow && ctx.Err() != nil {
					return nil
				}
				return err
			}
			if feed {
				slices.Reverse(first) // the feed is newest first; kcp prints oldest first
			}
			if !follow {
				return a.print(first, func() table { return eventTable(first) })
			}
			return a.follow(ctx, q, first, pollInterval)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&instanceIDs, "instance-id", "i", nil, "instance ID (repeat or comma-separate)")
	f.StringSliceVar(&operationIDs, "operation-id", nil, "operation ID")
	f.StringSliceVar(&types, "type", nil, "event type: retrying, succeeded, failed, skipped (repeat or comma-separate)")
	f.StringSliceVar(&stages, "stage", nil, "stage (e.g. create_runtime)")
	f.BoolVar(&collapse, "collapse", false, "show consecutive retries of one step of one operation as one row")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new events until interrupted or --timeout")
	f.DurationVar(&pollInterval, "poll-interval", 2*time.Second, "how often --follow asks for new events")
	f.IntVar(&pageSize, "page-size", 100, "events of the fleet shown first (1-1000; without --instance-id and --operation-id)")
	return cmd
}

// events reads GET /events; a 400 about a parameter names kcp's flag for it (a usage error).
func (a *app) events(ctx context.Context, q url.Values) ([]runtime.Event, error) {
	var out []runtime.Event
	err := a.client.getJSON(ctx, http.MethodGet, "/events", q, nil, &out)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusBadRequest {
		if param, why, ok := strings.Cut(apiErr.Message, ": "); ok && eventFlags[param] != "" {
			return nil, usagef("%s: %s", eventFlags[param], why)
		}
	}
	return out, err
}

// follow prints first, then every poll the events after the newest printed, until ctx ends
// (interrupted, or --timeout): that is a clean end. A failed poll is reported and retried (the
// broker may be restarting); an answer that no retry changes (4xx) ends it with the error.
func (a *app) follow(ctx context.Context, base url.Values, first []runtime.Event, every time.Duration) error {
	var cursor int64
	var tw *tableStream
	emit := func(evs []runtime.Event) error {
		for _, e := range evs {
			cursor = max(cursor, e.ID)
		}
		switch a.output {
		case "json":
			for _, e := range evs {
				raw, err := json.Marshal(e)
				if err != nil {
					return fmt.Errorf("encoding event %d: %w", e.ID, err)
				}
				if _, err := fmt.Fprintf(a.io.Out, "%s\n", raw); err != nil {
					return err
				}
			}
		case "yaml":
			for _, e := range evs {
				raw, err := yaml.Marshal(e)
				if err != nil {
					return fmt.Errorf("encoding event %d: %w", e.ID, err)
				}
				if _, err := fmt.Fprintf(a.io.Out, "---\n%s", raw); err != nil {
					return err
				}
			}
		default:
			t := eventTable(evs)
			if tw == nil {
				id := strings.Repeat("0", 36)
				tw = newTableStream(a.io.Out, t, a.width(), []string{ts(time.Unix(0, 0)), id, id, strings.Repeat("x", 28), "retrying", "10.000s", ""})
				return nil
			}
			tw.rows(t.rows)
		}
		return nil
	}
	if err := emit(first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
		for {
			q := maps.Clone(base)
			if cursor > 0 {
				q.Set("after_id", strconv.FormatInt(cursor, 10))
				q.Set("page_size", strconv.Itoa(followPage))
			}
			evs, err := a.events(ctx, q)
			if ctx.Err() != nil {
				return nil
			}
			var apiErr *APIError
			var usage *usageError
			if errors.As(err, &usage) || (errors.As(err, &apiErr) && apiErr.Status < 500) {
				return err
			}
			if err != nil {
				fmt.Fprintf(a.io.Err, "kcp: %v (trying again in %s)\n", err, every)
				break
			}
			if cursor == 0 && base.Get("page_size") != "" {
				slices.Reverse(evs) // still no cursor: the feed's newest page
			}
			var fresh []runtime.Event
			for _, e := range evs {
				if e.ID > cursor {
					fresh = append(fresh, e)
				}
			}
			if err := emit(fresh); err != nil {
				return err
			}
			if cursor == 0 || len(evs) < followPage {
				break
			}
		}
	}
}

func eventTable(evs []runtime.Event) table {
	t := table{header: []string{"TIME", "INSTANCE ID", "OPERATION ID", "STEP", "TYPE", "DURATION", "MESSAGE"}}
	for _, e := range evs {
		typ := e.Type
		if e.Repeats > 1 {
			typ = fmt.Sprintf("%s ×%d", typ, e.Repeats)
		}
		step := e.Step
		if e.Origin != "" {
			step = e.Origin + ": " + step
		}
		t.add(ts(e.CreatedAt), e.InstanceID, e.OperationID, step, typ, (time.Duration(e.DurationMS) * time.Millisecond).String(), oneLine(e.Message))
	}
	return t
}
