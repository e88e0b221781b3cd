package operator

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/server/snapshotfile"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// OperatorSnapshotExtractCACommand is `drover operator snapshot extract-ca
// -data-dir <dir> <file>`: it seeds a fresh server's data dir with the
// cluster CA and join tokens held in a snapshot, so that a cluster rebuilt
// from a backup keeps its CA and every certificate it issued stays valid.
type OperatorSnapshotExtractCACommand struct {
	cli.Meta
	ui *cli.UI
}

func (c *OperatorSnapshotExtractCACommand) Synopsis() string {
	return "Seed a fresh server's data dir with the cluster CA of a snapshot"
}

const operatorSnapshotExtractCAHelp = `
Usage: drover operator snapshot extract-ca -data-dir <dir> <file>

  Writes the cluster CA and join tokens held in the snapshot <file> into
  <dir>/server/pki (ca.json and tokens.json, mode 0600), so that a server
  started with data_dir = <dir> acts as that CA instead of creating a new
  one. Use it on the first server of a fresh cluster before restoring the
  snapshot into it: clients and servers keep their certificates and the
  join tokens stay the same. Works offline; refuses a data dir that holds
  a CA already.

Options:

  -data-dir
    The data_dir of the server to seed (required).`

func (c *OperatorSnapshotExtractCACommand) Run(args []string) int {
	c.Meta.UI = c.ui
	fs := c.FlagSet("operator snapshot extract-ca", operatorSnapshotExtractCAHelp)
	var dataDir string
	fs.StringVar(&dataDir, "data-dir", "", "")
	file, code, ok := c.ParseOne(fs, args, "<file>")
	if !ok {
		return code
	}
	if dataDir == "" {
		return c.ui.Errorf("Error: -data-dir is required (the data_dir of the server to seed)")
	}
	p, err := snapshotPKI(file)
	if err != nil {
		return c.ui.Errorf("Error reading the snapshot %s: %s", file, err)
	}
	dir := filepath.Join(dataDir, "server", "pki")
	if err := writeCA(dir, p); err != nil {
		return c.ui.Errorf("Error seeding %s: %s", dir, err)
	}
	c.ui.Printf("Cluster CA %s written to %s\n", p.CAFingerprint, dir)
	return cli.ExitOK
}

// snapshotPKI is the cluster PKI held in a snapshot file, checked.
func snapshotPKI(file string) (*structs.ClusterPKI, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tmp, err := os.CreateTemp("", "drover-extract-ca-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := snapshotfile.Verify(f, tmp, 0); err != nil {
		return nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var found *structs.ClusterPKI
	err = fsm.ReadSnapshot(tmp, func(table string, obj any) error {
		if table != state.TablePKI {
			return nil
		}
		p, ok := obj.(*structs.ClusterPKI)
		if !ok {
			return fmt.Errorf("table %s holds a %T", table, obj)
		}
		found = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the state inside does not decode: %w", err)
	}
	if found == nil {
		return nil, errors.New("it holds no cluster CA (a cluster without the cluster PKI: dev mode or operator certificates)")
	}
	ca, err := pki.UnmarshalCA(found.CA)
	if err != nil {
		return nil, fmt.Errorf("its cluster CA: %w", err)
	}
	if ca.Fingerprint() != found.CAFingerprint {
		return nil, fmt.Errorf("its cluster CA is %s, recorded as %s", ca.Fingerprint(), found.CAFingerprint)
	}
	if _, err := pki.UnmarshalTokens(found.Tokens); err != nil {
		return nil, fmt.Errorf("its join tokens: %w", err)
	}
	return found, nil
}

// writeCA writes the CA and tokens as the agent reads them at start
// (core/agent/tls_auto.go): tokens first, since a CA file alone fails the
// next start. An existing CA is never replaced.
func writeCA(dir string, p *structs.ClusterPKI) error {
	caPath := filepath.Join(dir, "ca.json")
	if _, err := os.Lstat(caPath); err == nil {
		return fmt.Errorf("%s exists: this data dir holds a cluster CA already; seed an empty data dir", caPath)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(dir, "tokens.json"), p.Tokens); err != nil {
		return err
	}
	return writeFileSync(caPath, p.CA)
}

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, syscall.O_NOFOLLOW|os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
