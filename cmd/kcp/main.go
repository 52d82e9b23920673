// Command kcp is the operator CLI of the Kyma Environment Broker: runtimes, orchestrations
// (Kyma and cluster upgrades across the fleet), events, kubeconfigs and expiry, over the
// broker's operator API. See docs/user/kcp.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/kyma-project/kyma-environment-broker/cmd/kcp/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.IO{Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
