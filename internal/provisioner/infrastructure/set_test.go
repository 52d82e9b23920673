package infrastructure_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kyma-project/kyma-environment-broker/internal/provisioner/infrastructure"
)

type fake struct {
	infrastructure.Backend
	entry infrastructure.Entry
}

func TestNewSetCallsFactories(t *testing.T) {
	log, hook := test.NewNullLogger()
	var got []infrastructure.Entry
	types := infrastructure.Types{
		"one": func(_ context.Context, e infrastructure.Entry, deps infrastructure.Deps) (infrastructure.Backend, error) {
			got = append(got, e)
			deps.Log.Info("built")
			return &fake{entry: e}, nil
		},
	}
	set, err := infrastructure.NewSet(context.Background(), infrastructure.Config{
		SetJSON: `{"b": {"type": "one", "spec": {"x": 1}}, "a": {"type": "one", "spec": null}}`, Default: "b",
	}, infrastructure.Deps{Log: log}, types)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].Name, "entries are built in name order")
	assert.JSONEq(t, `{}`, string(got[0].Spec), "a null spec is an empty object")
	assert.JSONEq(t, `{"x": 1}`, string(got[1].Spec))
	assert.Equal(t, "b", hook.AllEntries()[1].Data["provisioner"], "each backend's logger names its entry")

	b, err := set.Get("")
	require.NoError(t, err)
	assert.Equal(t, "b", b.(*fake).entry.Name)
	names := set.Names()
	names[0] = "changed"
	assert.Equal(t, []string{"a", "b"}, set.Names(), "Names returns a copy")

	_, err = infrastructure.NewSet(context.Background(), infrastructure.Config{SetJSON: `{"a": {"type": "one"}}`}, infrastructure.Deps{},
		infrastructure.Types{"one": func(context.Context, infrastructure.Entry, infrastructure.Deps) (infrastructure.Backend, error) {
			return nil, errors.New("spec.x must be > 0")
		}})
	assert.EqualError(t, err, `provisioner set entry "a": spec.x must be > 0`)
}

func TestDecodeSpec(t *testing.T) {
	var v struct {
		Runtimes []struct {
			Slots int `json:"slots"`
		} `json:"runtimes"`
	}
	require.NoError(t, infrastructure.DecodeSpec(nil, &v))
	require.NoError(t, infrastructure.DecodeSpec(json.RawMessage(`{"runtimes": [{"slots": 2}]}`), &v))
	assert.Equal(t, 2, v.Runtimes[0].Slots)
	assert.ErrorContains(t, infrastructure.DecodeSpec(json.RawMessage(`{"runtimes": [{"slots": "2"}]}`), &v), "spec.runtimes.slots must be int")
	assert.ErrorContains(t, infrastructure.DecodeSpec(json.RawMessage(`{"slots": 2}`), &v), `spec: json: unknown field "slots"`)
}

func TestStripComments(t *testing.T) {
	in := `{
  "a": "http://x//y", // a comment with "quotes"
  // a whole line
  "b": "esc\"//not a comment", "c": 1 // last
}`
	var v map[string]any
	require.NoError(t, json.Unmarshal(infrastructure.StripComments([]byte(in)), &v))
	assert.Equal(t, map[string]any{"a": "http://x//y", "b": `esc"//not a comment`, "c": float64(1)}, v)
	assert.Equal(t, strings.Count(in, "\n"), strings.Count(string(infrastructure.StripComments([]byte(in))), "\n"), "line numbers are kept")
}

func TestCheckEnvironment(t *testing.T) {
	require.NoError(t, infrastructure.CheckEnvironment([]string{
		"APP_PROVISIONER_SET_JSON={}", "APP_PROVISIONER_SET_FILE=f", "APP_DEFAULT_PROVISIONER=a",
		"RILL_ADMIN_PROVISIONER_SET_JSON={}", "RILL_ADMIN_DEFAULT_PROVISIONER=a", "PATH=/bin", "APP_PROVISIONER_SETS_JSON=",
	}))
	for _, stray := range []string{"PROVISIONER_SET_JSON", "APP_RILL_ADMIN_PROVISIONER_SET_JSON", "APP_PROVISIONER_SETS_JSON", "RILL_DEFAULT_PROVISIONER", "app_provisioner_set_json"} {
		err := infrastructure.CheckEnvironment([]string{stray + `={"a": {"type": "static"}}`})
		assert.ErrorContains(t, err, stray+" would be ignored", stray)
	}
}
