// Command bench measures the step engine's durable throughput: it inserts N operations of S
// no-op steps, runs them with one engine on each driver, and prints one line per driver:
//
//	engine driver=postgres operations=10000 steps=100000 seconds=S ops_per_sec=X transitions_per_sec=Y
//
// Every step transition is a committed write (fsync on), as in production.
// PostgreSQL comes from KEB_TEST_DATABASE_URL (make bench-engine starts a throwaway server).
// tools/bench/river measures the same on PostgreSQL beside River.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/kyma-project/kyma-environment-broker/tools/bench/engine/enginebench"
)

func main() {
	drivers := flag.String("drivers", "postgres,sqlite", "comma-separated drivers to measure")
	operations := flag.Int("operations", 10000, "operations to run")
	steps := flag.Int("steps", 10, "no-op steps per operation (two stages)")
	workers := flag.Int("workers", 0, "engine workers (0: the engine's default)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	memProfile := flag.String("memprofile", "", "write an allocation profile of the runs to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cpu profile: %v\n", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	for _, d := range strings.Split(*drivers, ",") {
		res, err := enginebench.Run(context.Background(), log, d, os.Getenv("KEB_TEST_DATABASE_URL"), *operations, *steps, *workers)
		if err != nil {
			fmt.Fprintf(os.Stderr, "engine driver=%s: %v\n", d, err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
		fmt.Println(res)
	}
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			fmt.Fprintf(os.Stderr, "memory profile: %v\n", err)
			os.Exit(1)
		}
	}
}

// writeHeapProfile writes the allocations of the whole run (pprof's alloc_space and
// alloc_objects sample types).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
