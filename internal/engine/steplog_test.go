package engine

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/assert"
)

// A step's log lines carry the run's fields and the step's name, whichever method logs them,
// and concurrent first uses make one logger.
func TestStepLoggerNamesTheStep(t *testing.T) {
	var out bytes.Buffer
	base := logrus.New()
	base.SetOutput(&out)
	base.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
	l := newStepLogger(base.WithField("operation_id", "op-1"), "Create_Runtime")

	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); l.Info("concurrent") }()
	}
	wg.Wait()
	l.Warnf("waiting %d", 3)
	l.WithError(errors.New("boom")).Error("failed")
	l.WithField("k", "v").Infoln("with field")

	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	assert.Len(t, lines, 11)
	for _, line := range lines {
		assert.Contains(t, string(line), "operation_id=op-1")
		assert.Contains(t, string(line), "step=Create_Runtime")
	}
	assert.Contains(t, out.String(), `msg="waiting 3"`)
	assert.Contains(t, out.String(), "error=boom")
	assert.Contains(t, out.String(), "k=v")
}
