package testport

import (
	"net"
	"strconv"
	"testing"
)

func TestFreeIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		p, err := strconv.Atoi(Free(t))
		if err != nil {
			t.Fatal(err)
		}
		if low-lowest >= 1000 && (p < lowest || p >= low) {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, low)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		ln.Close()
	}
}

func TestPickSkipsATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	if bindable(taken) {
		t.Fatalf("port %d is listened on, yet bindable says it is free", taken)
	}
	// A range of one taken port finds nothing, and says so.
	if _, err := pickRange(taken, taken+1); err == nil {
		t.Fatalf("pickRange over the taken port %d found a port", taken)
	}
}
