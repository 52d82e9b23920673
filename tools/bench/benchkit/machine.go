package benchkit

import (
	"os"
	"strconv"
	"strings"
)

// MachineWindow measures the whole machine's CPU over a window of a run (/proc/stat): the
// measured process, the database server, the bench's clients and the kernel's work for them
// together. On a saturated machine that is what a rate target is a budget of: 250 provisionings/s
// on two cores allows 8 ms of the machine per provisioning.
type MachineWindow struct {
	busy, total float64
	ok          bool
}

// StartMachineWindow starts a window; on a system without /proc/stat the window reads nothing.
func StartMachineWindow() *MachineWindow {
	w := &MachineWindow{}
	w.busy, w.total, w.ok = machineTicks()
	return w
}

// Figures is the machine's busy share since the window started and its busy CPU in ms per
// unit (per units done in it); false when /proc/stat could not be read.
func (w *MachineWindow) Figures(per float64) (busy, msPer float64, ok bool) {
	now, total, ok := machineTicks()
	if !w.ok || !ok || total <= w.total {
		return 0, 0, false
	}
	b := now - w.busy
	return b / (total - w.total), 1000 * b / clockTicks / per, true
}

// machineTicks is the busy and total ticks of every core since boot: busy is all but idle and
// iowait (user, nice, system, irq, softirq, steal).
func machineTicks() (busy, total float64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:9] { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total, true
}
