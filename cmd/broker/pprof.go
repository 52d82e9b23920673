//go:build pprof

package main

import (
	"net"
	"net/http"
	_ "net/http/pprof" // profiles for the fleet bench (tools/bench/fleet -pprof), never in the product build
	"os"
)

// With the pprof build tag the broker serves net/http/pprof on KEB_PPROF_ADDRESS (loopback).
func init() {
	addr := os.Getenv("KEB_PPROF_ADDRESS")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic("KEB_PPROF_ADDRESS: " + err.Error())
	}
	go func() { _ = http.Serve(ln, nil) }()
}
