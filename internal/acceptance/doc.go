// Package acceptance runs the broker end to end through the OSB API against the sandbox's
// stand-ins of every external system: the seed's step lists, one object per runtime in every
// system under injected faults, permanent failures, and a broker killed and restarted mid-run.
package acceptance
