// Package bench runs whole-system benchmark scenarios of legate: a manager
// as a separate process (the legate binary re-executed with a throwaway
// data directory, so its RSS and CPU are read cleanly from /proc), driven
// over loopback by real delegate processes or by a swarm of simulated
// delegates that speak the real protocol (register, one WebSocket each,
// heartbeats, acquire, started, result) without starting any process.
//
// Each scenario (pickup, throughput, swarm, scaling, footprint, failover)
// repeats its measurement --runs times and prints one JSON summary line to
// stdout, each figure as the median of the runs with their min and max;
// progress goes to stderr. docs/bench.md says what every number means.
package bench
