// Package persist is the state store's snapshot stream format: Write streams
// every table of a memdb read transaction to a writer and Read decodes such a
// stream into rows, handing each to the caller to insert. It knows the tables
// (core/state/schema) and the row types (core/structs), never the store:
// core/state's StateSnapshot.Persist and StateStore.Restore are its callers.
package persist

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// Snapshot stream format. A header (Magic, then a format version
// byte) is followed by records, each a type byte, a uvarint length and that
// many bytes of JSON, and ends with a recEnd record so that a truncated
// stream is detected. Records stream one object at a time in both
// directions: neither side ever holds the encoded state in memory.
//
// JSON matches the Raft log's encoding, so a follower restored from a
// snapshot holds exactly what one that applied the log holds (Task.Config
// numbers decode the same way on both paths).
//
// Allocations are written without their Job: each distinct job object that
// allocations point at is written once (recAllocJob) and allocations refer
// to it by number. 100,000 allocations of one job thus carry one copy of
// the job, and share one object again after a restore.
const (
	// Magic opens every snapshot; Version follows it as one byte.
	Magic   = "DRVRSNAP"
	Version = 1

	// maxRecordLen bounds one record so that a corrupt length cannot make
	// the restore allocate without limit.
	maxRecordLen = 256 << 20
)

// Record types. Never renumber: snapshots outlive binaries.
const (
	recIndex           byte = 1
	recNode            byte = 2
	recJob             byte = 3
	recJobVersion      byte = 4
	recJobSummary      byte = 5
	recEval            byte = 6
	recAllocJob        byte = 7
	recAlloc           byte = 8
	recPeriodicLaunch  byte = 9
	recSchedulerConfig byte = 10
	recDeployment      byte = 11
	recPKI             byte = 30 // 31 is reserved for the PKI too
	recACLPolicy       byte = 20
	recACLToken        byte = 21
	recOneTimeToken    byte = 22
	recACLRole         byte = 23
	recNamespace       byte = 25
	recNodePool        byte = 26
	recCSIVolume       byte = 35
	recCSIPlugin       byte = 36
	recScalingEvents   byte = 40
	recServiceReg      byte = 45
	recJobSubmission   byte = 46
	recVariable        byte = 90
	recRootKey         byte = 91
	recACLAuthMethod   byte = 100
	recACLBindingRule  byte = 101
	recAutopilotConfig byte = 102
	recEnd             byte = 255
)

// ErrBadSnapshot is returned for a stream that is not a drover state
// snapshot, is of an unknown format version, or is cut short.
var ErrBadSnapshot = errors.New("state: invalid snapshot")

// allocJobRecord is one job object that allocations refer to.
type allocJobRecord struct {
	Ref uint64
	Job *structs.Job
}

// allocRecord is an allocation without its job. Its Job field shadows the
// embedded one, so encoding never writes the job and never has to modify
// (or copy) the stored allocation to leave it out.
type allocRecord struct {
	*structs.Allocation
	Job    *structs.Job `json:"Job,omitempty"`
	JobRef uint64       `json:",omitempty"`
}

// plainTables are the tables Write streams row by row as they are;
// allocations and CSI volumes follow them (see Write). Every table of the
// schema is in one or the other (TestEveryTablePersisted).
var plainTables = []struct {
	table string
	typ   byte
}{
	{schema.TableIndex, recIndex},
	{schema.TableNodes, recNode},
	{schema.TableJobs, recJob},
	{schema.TableJobVersions, recJobVersion},
	{schema.TableJobSummary, recJobSummary},
	{schema.TableEvals, recEval},
	{schema.TablePeriodicLaunch, recPeriodicLaunch},
	{schema.TableSchedulerConfig, recSchedulerConfig},
	{schema.TablePKI, recPKI},
	{schema.TableACLPolicies, recACLPolicy},
	{schema.TableACLTokens, recACLToken},
	{schema.TableOneTimeTokens, recOneTimeToken},
	{schema.TableACLRoles, recACLRole},
	{schema.TableACLAuthMethods, recACLAuthMethod},
	{schema.TableACLBindingRules, recACLBindingRule},
	{schema.TableAutopilotConfig, recAutopilotConfig},
	{schema.TableNamespaces, recNamespace},
	{schema.TableNodePools, recNodePool},
	{schema.TableCSIPlugins, recCSIPlugin},
	{schema.TableScalingEvents, recScalingEvents},
	{schema.TableDeployments, recDeployment},
	{schema.TableServiceRegistrations, recServiceReg},
	{schema.TableJobSubmissions, recJobSubmission},
	{schema.TableRootKeys, recRootKey},
	{schema.TableVariables, recVariable},
}

// Write streams every table that txn reads to w (plainTables, then
// allocations and CSI volumes). txn is only read from.
func Write(w io.Writer, txn *memdb.Txn) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	p := &persister{w: bw}
	p.enc = json.NewEncoder(&p.buf)
	p.enc.SetEscapeHTML(false)
	if _, err := bw.WriteString(Magic); err != nil {
		return err
	}
	if err := bw.WriteByte(Version); err != nil {
		return err
	}
	for _, tb := range plainTables {
		iter, err := txn.Get(tb.table, "id")
		if err != nil {
			return err
		}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			if err := p.record(tb.typ, raw); err != nil {
				return err
			}
		}
	}
	if err := p.allocs(txn); err != nil {
		return err
	}
	vols, err := txn.Get(schema.TableCSIVolumes, "id")
	if err != nil {
		return err
	}
	for raw := vols.Next(); raw != nil; raw = vols.Next() {
		if err := p.record(recCSIVolume, newCSIVolumeRecord(raw.(*structs.CSIVolume))); err != nil {
			return err
		}
	}
	if err := p.record(recEnd, nil); err != nil {
		return err
	}
	return bw.Flush()
}

type persister struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
	len [binary.MaxVarintLen64]byte
}

func (p *persister) record(typ byte, v any) error {
	p.buf.Reset()
	if v != nil {
		if err := p.enc.Encode(v); err != nil {
			return fmt.Errorf("state: persist record %d: %w", typ, err)
		}
	}
	if err := p.w.WriteByte(typ); err != nil {
		return err
	}
	n := binary.PutUvarint(p.len[:], uint64(p.buf.Len()))
	if _, err := p.w.Write(p.len[:n]); err != nil {
		return err
	}
	_, err := p.w.Write(p.buf.Bytes())
	return err
}

func (p *persister) allocs(txn *memdb.Txn) error {
	iter, err := txn.Get(schema.TableAllocs, "id")
	if err != nil {
		return err
	}
	refs := map[*structs.Job]uint64{}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		a := raw.(*structs.Allocation)
		rec := allocRecord{Allocation: a}
		if a.Job != nil {
			ref, ok := refs[a.Job]
			if !ok {
				ref = uint64(len(refs) + 1)
				refs[a.Job] = ref
				if err := p.record(recAllocJob, &allocJobRecord{Ref: ref, Job: a.Job}); err != nil {
					return err
				}
			}
			rec.JobRef = ref
		}
		if err := p.record(recAlloc, &rec); err != nil {
			return err
		}
	}
	return nil
}

// Read decodes a stream written by Write and calls insert with each row and
// its table, in stream order, on the calling goroutine. It stops at the
// first error, from the stream (wrapping ErrBadSnapshot) or from insert, and
// returns it; the rows inserted before it are the caller's to discard.
//
// Decoding and inserting overlap: a goroutine, which Read waits for before
// it returns, decodes records while the caller inserts them, as each takes
// about half of a restore's time.
func Read(r io.Reader, insert func(table string, obj any) error) error {
	br := bufio.NewReaderSize(r, 256<<10)
	head := make([]byte, len(Magic)+1)
	if _, err := io.ReadFull(br, head); err != nil {
		return fmt.Errorf("%w: reading header: %v", ErrBadSnapshot, err)
	}
	if string(head[:len(Magic)]) != Magic {
		return fmt.Errorf("%w: bad magic", ErrBadSnapshot)
	}
	if v := head[len(Magic)]; v != Version {
		return fmt.Errorf("%w: unsupported format version %d", ErrBadSnapshot, v)
	}

	items := make(chan restoreItem, 1024)
	stop := make(chan struct{})
	decoded := make(chan error, 1)
	go func() { decoded <- decodeRecords(br, items, stop) }()

	var insertErr error
	for it := range items { // ends when the decoder returns, whatever the reason
		if insertErr != nil {
			continue
		}
		if err := insert(it.table, it.obj); err != nil {
			insertErr = fmt.Errorf("state: restore into %s: %w", it.table, err)
			close(stop)
		}
	}
	if err := <-decoded; err != nil {
		return err
	}
	return insertErr
}

// restoreItem is one decoded row.
type restoreItem struct {
	table string
	obj   any
}

// decodeRecords reads records until the end record and sends the rows on
// items, which it closes when it returns. It stops early when stop closes.
func decodeRecords(br *bufio.Reader, items chan<- restoreItem, stop <-chan struct{}) error {
	defer close(items)
	jobs := map[uint64]*structs.Job{}
	var buf []byte
	for {
		typ, err := br.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
		}
		if n > maxRecordLen {
			return fmt.Errorf("%w: record of %d bytes", ErrBadSnapshot, n)
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("%w: truncated: %v", ErrBadSnapshot, err)
		}
		if typ == recEnd {
			return nil
		}
		it, err := decodeRecord(typ, buf, jobs)
		if err != nil {
			return err
		}
		if it.table == "" {
			continue
		}
		select {
		case items <- it:
		case <-stop:
			return nil
		}
	}
}

// decodeRecord decodes one record into its row. A recAllocJob record yields
// no row: it registers the job that later allocs refer to.
func decodeRecord(typ byte, buf []byte, jobs map[uint64]*structs.Job) (restoreItem, error) {
	var it restoreItem
	switch typ {
	case recIndex:
		it = restoreItem{schema.TableIndex, new(schema.IndexEntry)}
	case recNode:
		it = restoreItem{schema.TableNodes, new(structs.Node)}
	case recJob:
		it = restoreItem{schema.TableJobs, new(structs.Job)}
	case recJobVersion:
		it = restoreItem{schema.TableJobVersions, new(structs.Job)}
	case recJobSummary:
		it = restoreItem{schema.TableJobSummary, new(structs.JobSummary)}
	case recEval:
		it = restoreItem{schema.TableEvals, new(structs.Evaluation)}
	case recPeriodicLaunch:
		it = restoreItem{schema.TablePeriodicLaunch, new(structs.PeriodicLaunch)}
	case recSchedulerConfig:
		it = restoreItem{schema.TableSchedulerConfig, new(structs.SchedulerConfiguration)}
	case recPKI:
		it = restoreItem{schema.TablePKI, new(structs.ClusterPKI)}
	case recACLPolicy:
		it = restoreItem{schema.TableACLPolicies, new(structs.ACLPolicy)}
	case recACLToken:
		it = restoreItem{schema.TableACLTokens, new(structs.ACLToken)}
	case recOneTimeToken:
		it = restoreItem{schema.TableOneTimeTokens, new(structs.OneTimeToken)}
	case recACLRole:
		it = restoreItem{schema.TableACLRoles, new(structs.ACLRole)}
	case recACLAuthMethod:
		it = restoreItem{schema.TableACLAuthMethods, new(structs.ACLAuthMethod)}
	case recACLBindingRule:
		it = restoreItem{schema.TableACLBindingRules, new(structs.ACLBindingRule)}
	case recAutopilotConfig:
		it = restoreItem{schema.TableAutopilotConfig, new(structs.AutopilotConfig)}
	case recNamespace:
		it = restoreItem{schema.TableNamespaces, new(structs.Namespace)}
	case recNodePool:
		it = restoreItem{schema.TableNodePools, new(structs.NodePool)}
	case recCSIPlugin:
		it = restoreItem{schema.TableCSIPlugins, new(structs.CSIPlugin)}
	case recScalingEvents:
		it = restoreItem{schema.TableScalingEvents, new(structs.JobScalingEvents)}
	case recDeployment:
		it = restoreItem{schema.TableDeployments, new(structs.Deployment)}
	case recServiceReg:
		it = restoreItem{schema.TableServiceRegistrations, new(structs.ServiceRegistration)}
	case recJobSubmission:
		it = restoreItem{schema.TableJobSubmissions, new(structs.JobSubmission)}
	case recRootKey:
		it = restoreItem{schema.TableRootKeys, new(structs.RootKey)}
	case recVariable:
		it = restoreItem{schema.TableVariables, new(structs.VariableEncrypted)}
	case recCSIVolume:
		rec := csiVolumeRecord{CSIVolume: new(structs.CSIVolume)}
		if err := json.Unmarshal(buf, &rec); err != nil {
			return it, fmt.Errorf("%w: csi volume: %v", ErrBadSnapshot, err)
		}
		return restoreItem{schema.TableCSIVolumes, rec.volume()}, nil
	case recAllocJob:
		var rec allocJobRecord
		if err := json.Unmarshal(buf, &rec); err != nil {
			return it, fmt.Errorf("%w: alloc job: %v", ErrBadSnapshot, err)
		}
		jobs[rec.Ref] = rec.Job
		return it, nil
	case recAlloc:
		rec := allocRecord{Allocation: new(structs.Allocation)}
		if err := json.Unmarshal(buf, &rec); err != nil {
			return it, fmt.Errorf("%w: alloc: %v", ErrBadSnapshot, err)
		}
		if rec.JobRef != 0 {
			job, ok := jobs[rec.JobRef]
			if !ok {
				return it, fmt.Errorf("%w: alloc %s refers to unknown job %d", ErrBadSnapshot, rec.ID, rec.JobRef)
			}
			rec.Allocation.Job = job
		}
		return restoreItem{schema.TableAllocs, rec.Allocation}, nil
	default:
		// A newer binary's record kind. Skipping it would silently lose
		// state that the rest of the snapshot may depend on.
		return it, fmt.Errorf("%w: unknown record type %d", ErrBadSnapshot, typ)
	}
	if err := json.Unmarshal(buf, it.obj); err != nil {
		return it, fmt.Errorf("%w: %s: %v", ErrBadSnapshot, it.table, err)
	}
	return it, nil
}

// csiVolumeRecord is a volume in a snapshot: its claims, which the API's
// JSON hides, are written out.
type csiVolumeRecord struct {
	*structs.CSIVolume
	ReadClaims  map[string]*structs.CSIVolumeClaim `json:",omitempty"`
	WriteClaims map[string]*structs.CSIVolumeClaim `json:",omitempty"`
	PastClaims  map[string]*structs.CSIVolumeClaim `json:",omitempty"`
}

func newCSIVolumeRecord(v *structs.CSIVolume) *csiVolumeRecord {
	return &csiVolumeRecord{CSIVolume: v, ReadClaims: v.ReadClaims, WriteClaims: v.WriteClaims, PastClaims: v.PastClaims}
}

func (r *csiVolumeRecord) volume() *structs.CSIVolume {
	v := r.CSIVolume
	v.ReadClaims, v.WriteClaims, v.PastClaims = r.ReadClaims, r.WriteClaims, r.PastClaims
	return v
}
