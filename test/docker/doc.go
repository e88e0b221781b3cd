// Package docker tests drover as a real cluster: three servers and two
// client-only agents, each in its own container on a private Docker network,
// knowing each other only by container name, talking gRPC and Raft over the
// RPC port as they would on separate hosts. Unlike test/cluster, whose agents
// share the host's loopback, these tests can cut one agent off the network
// (docker network disconnect) and heal it, so they exercise leader failover,
// stepping down, client failover and catch-up for real.
//
// The tests need a Docker engine and a static busybox at /bin/busybox
// (Debian's busybox-static). No image is pulled: TestMain builds a static
// drover, writes a Dockerfile FROM scratch around it and busybox, and removes
// the image, the containers and the networks afterwards, also when a test
// fails (after printing the containers' logs). Everything carries the label
// drover-e2e=1 and the test process that made it, so that a run removes what
// a killed run left behind but never what a concurrent run still uses.
// Without a Docker engine every test skips and says why.
//
// The test drives each agent through its HTTP port published on the host's
// loopback. A container that leaves its only network loses its published
// ports, so a server about to be cut off is first attached to a network of
// its own, which then carries the port (Docker moves it to a new host port).
//
// newDockerTaskCluster gives the clients the host's engine for their docker
// driver: each client mounts /var/run/docker.sock, and its data dir is a host
// directory mounted at the same path, since the alloc dirs the driver
// bind-mounts into a task's container are resolved by the engine on the
// host. The task image is the suite's own; task containers carry the
// driver's labels, not the suite's, so the tests remove them.
//
// The package has no non-test code; this file only carries its doc.
package docker
