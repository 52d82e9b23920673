package pgtest

import "testing"

// Server is a PostgreSQL server of one test alone, which the test may stop and start again
// (an outage) without hurting the tests sharing the package's server.
type Server struct {
	t testing.TB
	c *cluster
	// URL is a superuser connection to its "postgres" database; it stays valid across Stop
	// and Start (same port).
	URL string
}

// StartPrivate starts a throwaway server for the test, removed when the test ends.
func StartPrivate(t testing.TB) *Server {
	t.Helper()
	c, err := startScriptCluster()
	if err != nil {
		t.Fatalf("pgtest: starting a private PostgreSQL: %v", err)
	}
	t.Cleanup(c.remove)
	return &Server{t: t, c: c, URL: c.url}
}

// Stop shuts the server down (fast: open connections are terminated) and keeps its data.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.c.run("pause"); err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
}

// Start starts a stopped server again on the same port.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.c.run("resume"); err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
}
