// Package testport picks TCP ports for tests that must hand a port to
// another process (a manager's --listen, a delegate's DELEGATE_HTTP_PORT,
// a container on the host's network) rather than keep a listener open.
//
// The usual trick, listening on port 0 and closing, returns a port of the
// kernel's ephemeral range: the range the kernel also gives to every
// outgoing connection. On a machine busy with many loopback connections
// (a benchmark holding 13,000 of them, say) such a port is often taken as
// the local port of a new connection before the child process binds it,
// and the child fails with "address already in use". Free picks a port
// below the ephemeral range instead, where the kernel assigns nothing by
// itself, so only another explicit bind can take it; it checks that the
// port can be bound on every address the child may use.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the lowest port Free hands out: well above the ports services
// are commonly configured on.
const lowest = 20000

// Free returns a TCP port, as a decimal string, that nothing listens on now
// and that the kernel does not hand to outgoing connections. It fails the
// test when it finds none in a bounded number of tries.
func Free(t interface {
	Helper()
	Fatalf(format string, args ...any)
}) string {
	t.Helper()
	port, err := pick(ephemeralLow())
	if err != nil {
		t.Fatalf("testport: %v", err)
	}
	return strconv.Itoa(port)
}

// Addr is Free's port on 127.0.0.1, as host:port.
func Addr(t interface {
	Helper()
	Fatalf(format string, args ...any)
}) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", Free(t))
}

// pick tries random ports in [lowest, below) until one binds on every
// address; below is the start of the ephemeral range.
func pick(below int) (int, error) {
	if below-lowest < 1000 {
		// An unusual ephemeral range that leaves little room below it:
		// use the ports above it instead.
		return pickRange(61000, 65536)
	}
	return pickRange(lowest, below)
}

func pickRange(lo, hi int) (int, error) {
	const tries = 200
	for range tries {
		p := lo + rand.IntN(hi-lo)
		if bindable(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port in [%d, %d) after %d tries", lo, hi, tries)
}

// bindable reports whether port p can be bound on the wildcard address
// (IPv4 and, where the machine has it, IPv6) and on 127.0.0.1.
func bindable(p int) bool {
	for _, addr := range []string{"0.0.0.0", "127.0.0.1", "::"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(p)))
		if err != nil {
			if addr == "::" && !hasIPv6() {
				continue
			}
			return false
		}
		ln.Close()
	}
	return true
}

// hasIPv6 reports whether the machine can bind an IPv6 socket at all.
func hasIPv6() bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range), 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 || n > 65535 {
		return 32768
	}
	return n
}
