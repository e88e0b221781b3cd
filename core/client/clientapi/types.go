// Package clientapi holds the answers of the client-side API
// (/v1/client/*) that the client computes and core/httpapi writes: plain
// structs whose JSON field names are Nomad's, so that Nomad's official
// client decodes them. It imports nothing of drover, so that the HTTP API
// needs no more of the client than these types.
package clientapi

import (
	"context"
	"io"
	"time"
)

// FileInfo is one file of an allocation directory (/v1/client/fs/ls and
// /v1/client/fs/stat): Nomad's AllocFileInfo.
type FileInfo struct {
	Name        string
	IsDir       bool
	Size        int64
	FileMode    string
	ModTime     time.Time
	ContentType string `json:",omitempty"`
}

// HostStats is the host's resource usage (/v1/client/stats).
type HostStats struct {
	Memory           *HostMemoryStats
	CPU              []*HostCPUStats
	DiskStats        []*HostDiskStats
	AllocDirStats    *HostDiskStats
	DeviceStats      []any
	Uptime           uint64
	Timestamp        int64
	CPUTicksConsumed float64
}

// HostMemoryStats is in bytes.
type HostMemoryStats struct {
	Total     uint64
	Available uint64
	Used      uint64
	Free      uint64
}

// HostCPUStats is one CPU's share of time in each mode since the previous
// sample, in percent.
type HostCPUStats struct {
	CPU    string
	User   float64
	System float64
	Idle   float64
}

// HostDiskStats is one mounted filesystem, sizes in bytes.
type HostDiskStats struct {
	Device            string
	Mountpoint        string
	Size              uint64
	Used              uint64
	Available         uint64
	UsedPercent       float64
	InodesUsedPercent float64
}

// MemoryStats is a task's memory in bytes; Measured names the fields
// that were measured.
type MemoryStats struct {
	RSS            uint64
	Cache          uint64
	Swap           uint64
	Usage          uint64
	MaxUsage       uint64
	KernelUsage    uint64
	KernelMaxUsage uint64
	Measured       []string
}

// CPUStats is a task's CPU use: Percent of one core since the previous
// sample, TotalTicks in MHz-equivalent ticks (as Nomad), modes in percent.
type CPUStats struct {
	SystemMode       float64
	UserMode         float64
	TotalTicks       float64
	ThrottledPeriods uint64
	ThrottledTime    uint64
	Percent          float64
	Measured         []string
}

// ResourceUsage is memory and CPU use.
type ResourceUsage struct {
	MemoryStats *MemoryStats
	CpuStats    *CPUStats
	DeviceStats []any
}

// TaskResourceUsage is one task's usage; Timestamp is Unix nanoseconds.
type TaskResourceUsage struct {
	ResourceUsage *ResourceUsage
	Timestamp     int64
	Pids          map[string]*ResourceUsage
}

// AllocResourceUsage is an allocation's usage: the sum of its tasks'.
type AllocResourceUsage struct {
	ResourceUsage *ResourceUsage
	Tasks         map[string]*TaskResourceUsage
	Timestamp     int64
}

// NodeMetaApplyRequest updates the dynamic node metadata (POST
// /v1/client/metadata): a nil value deletes the key.
type NodeMetaApplyRequest struct {
	NodeID string
	Meta   map[string]*string
}

// NodeMetaResponse is the node's metadata: Meta merged, Dynamic as set
// through the API (a nil value: a static key deleted), Static from the
// agent's configuration.
type NodeMetaResponse struct {
	Meta    map[string]string
	Dynamic map[string]*string
	Static  map[string]string
}

// AllocRestartRequest is the body of PUT /v1/client/allocation/<id>/restart.
type AllocRestartRequest struct {
	TaskName string
	AllTasks bool
}

// AllocSignalRequest is the body of PUT /v1/client/allocation/<id>/signal.
type AllocSignalRequest struct {
	Task   string
	Signal string
}

// FileStream is an allocation's file open for /v1/client/fs/stream.
type FileStream interface {
	// Offset is the position of the next byte Copy writes.
	Offset() int64
	// Copy writes the file from Offset to w; with follow it waits for
	// more until ctx ends (a nil error).
	Copy(ctx context.Context, follow bool, w io.Writer) error
	Close() error
}

// ExecTarget is what the HTTP API checks before an exec session
// (/v1/client/allocation/<id>/exec) is opened: the allocation's namespace,
// and whether the task's driver leaves it the host's file system (then
// exec needs alloc-node-exec as well as alloc-exec, as in Nomad).
type ExecTarget struct {
	Namespace string
	Driver    string
	// NoFSIsolation: the driver runs the task on the host's file system
	// (raw_exec).
	NoFSIsolation bool
}

// TerminalSize is a terminal's size in character cells.
type TerminalSize struct {
	Height, Width int
}

// ExecRequest is one exec session into a running task. Stdin is read
// until EOF (a Read in progress when the session ends is the caller's to
// end by closing it); with TTY all output is Stdout; Resize carries
// terminal size changes (may be nil).
type ExecRequest struct {
	AllocID, Task  string
	Command        []string
	TTY            bool
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Resize         <-chan TerminalSize
}
