package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// selfSignedPEM writes a self-signed certificate and its key into dir.
func selfSignedPEM(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// A server whose tls block names /etc/passwd as its certificate refuses to
// start, naming the file and the problem, and exits 1 leaving nothing
// behind, whether the block turns HTTPS on or nothing at all (the files
// were never read before when rpc was off, and the agent then ran with
// plaintext RPC).
func TestAgentStartRefusesBadTLSFile(t *testing.T) {
	t.Parallel()
	for name, on := range map[string]string{"https": "  http = true\n", "nothing on": ""} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, tmp := t.TempDir(), t.TempDir()
			ca, key := selfSignedPEM(t, dir)
			ports := harness.FreePorts(t, 2)
			dataDir := filepath.Join(dir, "data")
			extra := fmt.Sprintf("tls {\n%s  ca_file = %q\n  cert_file = \"/etc/passwd\"\n  key_file = %q\n}\n", on, ca, key)
			fs := runFailingAgent(t, tmp, "-config", loneServerConfig(t, dataDir, ports, extra))
			assertFailedCleanly(t, fs, tmp, ports, "tls.cert_file /etc/passwd", "holds no PEM certificate")
			if _, err := os.Stat(filepath.Join(dataDir, "server", "pki", "ca.json")); err == nil {
				t.Error("the refused start made a cluster CA")
			}
		})
	}
}
