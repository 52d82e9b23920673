package engine

import "time"

// Clock is the engine's source of time; tests use a controllable one.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
