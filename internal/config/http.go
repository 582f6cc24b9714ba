package config

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultHTTPPort is the port of the delegate's health and metrics server
// when DELEGATE_HTTP_PORT is not set.
const DefaultHTTPPort = 3460

const envHTTPPort = "DELEGATE_HTTP_PORT"

// readHTTP reads the settings of the delegate's health and metrics server.
func readHTTP(get func(string) string, d *Delegate) error {
	port, err := parseHTTPPort(envHTTPPort, get(envHTTPPort))
	if err != nil {
		return err
	}
	d.HTTPPort = port
	return nil
}

// parseHTTPPort reads a port: empty is DefaultHTTPPort, 0 turns the server
// off, else 1..65535.
func parseHTTPPort(name, v string) (int, error) {
	if v == "" {
		return DefaultHTTPPort, nil
	}
	bad := fmt.Errorf("%s=%q: must be a port number from 1 to 65535, or 0 to turn the health and metrics server off", name, v)
	if len(v) > 5 || strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, bad
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > 65535 {
		return 0, bad
	}
	return n, nil
}
