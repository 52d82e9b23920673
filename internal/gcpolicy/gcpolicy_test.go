package gcpolicy

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"github.com/stretchr/testify/assert"
)

func TestApply(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	log, hook := test.NewNullLogger()

	if v, set := os.LookupEnv("GOGC"); set {
		t.Cleanup(func() { os.Setenv("GOGC", v) })
	}
	os.Unsetenv("GOGC")
	Apply(log)
	assert.Equal(t, DefaultPercent, debug.SetGCPercent(100), "the default without GOGC")
	assert.Equal(t, DefaultPercent, hook.LastEntry().Data["gogc"])

	t.Setenv("GOGC", "50") // the runtime read GOGC at start; a set variable is the operator's
	Apply(log)
	assert.Equal(t, 100, debug.SetGCPercent(100), "left as the runtime has it")
	assert.Equal(t, "50", hook.LastEntry().Data["gogc"])
	assert.Equal(t, logrus.InfoLevel, hook.LastEntry().Level)
}
