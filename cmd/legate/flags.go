package main

import (
	"net"
	"strconv"
	"strings"
)

// httpAddr is the address of the delegate's health and metrics server on
// host ("" = every interface) and port; "" (off) for port 0.
func httpAddr(host string, port int) string {
	if port == 0 {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
			out = append(out, t)
		}
	}
	return out
}
