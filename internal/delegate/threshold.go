package delegate

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// loadMonitor measures the machine's CPU and memory use so the delegate can
// stop taking tasks above DELEGATE_CPU_THRESHOLD / DELEGATE_MEMORY_THRESHOLD.
// CPU is the busy share of all CPUs between two samples (/proc/stat);
// memory is 1 - MemAvailable/MemTotal (/proc/meminfo).
type loadMonitor struct {
	cpuLimit, memLimit int
	mu                 sync.Mutex
	lastIdle, lastAll  uint64
	reason             string
}

// sample updates the reason the delegate is over a threshold ("" when not).
func (m *loadMonitor) sample() string {
	if m.cpuLimit <= 0 && m.memLimit <= 0 {
		return ""
	}
	var reasons []string
	if m.cpuLimit > 0 {
		if idle, all, err := readCPU(); err == nil {
			m.mu.Lock()
			if m.lastAll > 0 && all > m.lastAll {
				busy := 100 * float64((all-m.lastAll)-(idle-m.lastIdle)) / float64(all-m.lastAll)
				if busy > float64(m.cpuLimit) {
					reasons = append(reasons, fmt.Sprintf("cpu %.0f%% > DELEGATE_CPU_THRESHOLD %d%%", busy, m.cpuLimit))
				}
			}
			m.lastIdle, m.lastAll = idle, all
			m.mu.Unlock()
		}
	}
	if m.memLimit > 0 {
		if used, err := memoryUsed(); err == nil && used > float64(m.memLimit) {
			reasons = append(reasons, fmt.Sprintf("memory %.0f%% > DELEGATE_MEMORY_THRESHOLD %d%%", used, m.memLimit))
		}
	}
	r := strings.Join(reasons, "; ")
	m.mu.Lock()
	m.reason = r
	m.mu.Unlock()
	return r
}

func (m *loadMonitor) current() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reason
}

// readCPU returns the idle and total jiffies of all CPUs.
func readCPU() (idle, all uint64, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, fmt.Errorf("empty /proc/stat")
	}
	return parseCPULine(sc.Text())
}

// parseCPULine parses the "cpu  user nice system idle iowait irq softirq steal" line.
func parseCPULine(line string) (idle, all uint64, err error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("unexpected /proc/stat line %q", line)
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse /proc/stat: %w", err)
		}
		if i >= 8 { // guest time is already counted in user
			break
		}
		all += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return idle, all, nil
}

// memoryUsed returns the used share of memory in percent.
func memoryUsed() (float64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMeminfo(string(b))
}

func parseMeminfo(s string) (float64, error) {
	var total, avail float64
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	if total <= 0 {
		return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
	}
	return 100 * (1 - avail/total), nil
}
