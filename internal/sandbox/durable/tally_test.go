package durable

import (
	"encoding/json"
	"testing"
)

// A tally's hand-written encoding is json.Marshal's, byte for byte, whatever its keys.
func TestTallyRowEncodesAsJSONMarshal(t *testing.T) {
	for _, m := range []map[string]int{
		nil,
		{},
		{"create": 3, "list": 0, "delete": -2},
		{"a<b>&c": 1, `quote"back\slash`: 2, "tab\there": 3, "ünïcode": 4, "\u2028": 5, "\x7f": 6},
	} {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil || string(want) == "null" {
			want = []byte("{}")
		}
		got, err := tallyRow{m: m}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("tally %v: got %s, want %s", m, got, want)
		}
		var back tallyRow
		if err := json.Unmarshal(got, &back); err != nil || len(back.m) != len(m) {
			t.Errorf("tally %s does not decode back: %v %v", got, back.m, err)
		}
	}
}
