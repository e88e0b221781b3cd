// Package csi is the client's side of CSI: the plugin tasks it supervises
// (Plugins), the volume hook of its alloc runners (Manager, shared by the
// client, and Volumes, one per alloc) and the executor of the controller
// and node-detach operations the leader addresses to the node
// (Manager.RunController).
//
// An alloc runner reaches the hook through Volumes only: Setup before its
// tasks start, Release once they are dead, Snapshot to persist, Held
// before removing its alloc dir. What the hook needs of the alloc runner
// is Alloc (its task dirs, persisting), and of the servers Server.
//
// A claim's release is the servers' to drive: the client reports how far
// its node got (Volumes.Release: node-detached, or unpublishing while its
// node steps are retried) and the leader's volume watcher takes the claim
// from there to freed.
package csi
