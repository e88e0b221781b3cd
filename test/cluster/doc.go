// Package cluster holds drover's multi-process cluster tests. Each test
// builds a real cluster on loopback, three servers and one or two clients,
// every agent a `drover agent -config` process on free ports with a data
// dir of its own, and then breaks it the way machines break: a leader or a
// follower is killed (SIGKILL) or stopped (SIGINT) and restarted from its
// data dir, a client machine is lost, a client agent restarts under its
// running tasks, a node is drained. The tests assert what a user and an
// operator would see through the HTTP API and the CLI.
//
// Clusters run one at a time (no t.Parallel): five agents and their plugins
// already load a small machine. Every test removes every process it
// started (agents, plugins, raw_exec shims and tasks), whatever happens.
//
// The package has no non-test code; this file only carries its doc.
package cluster
