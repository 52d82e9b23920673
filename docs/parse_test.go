package docs_test

import (
	"reflect"
	"testing"
)

// The parser reads annotations, languages and indented fences, and transcripts' commands,
// continuation lines, expected failures and first words.
func TestParseDocAndTranscript(t *testing.T) {
	blocks, err := parseDoc(".", "testdata/blocks.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 5 {
		t.Fatalf("%d blocks, want 5: %+v", len(blocks), blocks)
	}
	if b := blocks[0]; b.skip != "needs a cluster" || b.runnable() || b.line != 4 {
		t.Errorf("skipped block: %+v", b)
	}
	if b := blocks[1]; b.badNote == "" {
		t.Errorf("a skip without a reason is not reported: %+v", b)
	}
	if b := blocks[2]; !b.background || !b.runnable() {
		t.Errorf("background block: %+v", b)
	}
	if b := blocks[3]; b.lang != "" || b.text != "bare\n" {
		t.Errorf("bare block: %+v", b)
	}
	b := blocks[4]
	if b.lang != "console" || !b.runnable() {
		t.Fatalf("console block: %+v", b)
	}
	cmds := parseTranscript(b.text)
	got := make([][3]any, len(cmds))
	for i, c := range cmds {
		got[i] = [3]any{c.command, c.wantFail, firstWord(c.output)}
	}
	want := [][3]any{
		{"kcp runtimes \\\n    --all", false, "GLOBAL"},
		{"kcp orchestrations nope", true, ""},
		{"true", false, ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("transcript: got %q, want %q", got, want)
	}
}
