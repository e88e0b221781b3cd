package builtin

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/pluginhost"
	docker "github.com/drover-org/drover/plugins/driver-docker"
)

// Every built-in registers its in-process declaration, so the agent can
// leave it idle until first needed; the drivers register their fingerprints.
func TestEveryBuiltinDeclaresInProcess(t *testing.T) {
	for _, p := range Catalog {
		ip := pluginhost.BuiltinInProcess(p.Name)
		if ip.Declare == nil {
			t.Errorf("%s registers no in-process declaration", p.Name)
			continue
		}
		decl, err := ip.Declare(t.Context())
		if err != nil || decl == nil {
			t.Errorf("%s: in-process declaration %v, %v", p.Name, decl, err)
		}
	}
	fp := pluginhost.BuiltinInProcess("driver-rawexec").Fingerprint
	if fp == nil {
		t.Fatal("raw_exec registers no in-process fingerprint")
	}
	// Not enabled by its config: undetected, with the reason.
	resp, err := fp(t.Context(), nil)
	if err != nil || resp.GetDetected() || resp.GetHealthDescription() == "" {
		t.Errorf("raw_exec fingerprint without a config: %v, %v; want undetected with a reason", resp, err)
	}
	if _, err := fp(t.Context(), []string{"DROVER_RAWEXEC_PLUGIN_CONFIG={\"nope\":1}"}); err == nil {
		t.Error("raw_exec fingerprint took a config with an unknown key")
	}
}

// docker's in-process fingerprint is the plugin's own, with the config its
// process would read from the environment: the endpoint of that config is
// the one pinged (here a socket nothing listens on: undetected, naming
// it), and a config the plugin would refuse fails the fingerprint.
func TestDockerInProcessFingerprint(t *testing.T) {
	fp := pluginhost.BuiltinInProcess("driver-docker").Fingerprint
	if fp == nil {
		t.Fatal("docker registers no in-process fingerprint")
	}
	sock := filepath.Join(t.TempDir(), "docker.sock")
	cfg, _ := json.Marshal(map[string]any{"endpoint": "unix://" + sock})
	env := []string{docker.ConfigEnvVar + `={"endpoint":"unix:///elsewhere.sock"}`, docker.ConfigEnvVar + "=" + string(cfg)}
	resp, err := fp(t.Context(), env)
	if err != nil || resp.GetDetected() || resp.GetHealthy() || !strings.Contains(resp.GetHealthDescription(), "unix://"+sock) {
		t.Errorf("docker fingerprint, no engine at %s: %v, %v; want undetected naming the endpoint", sock, resp, err)
	}
	if _, err := fp(t.Context(), []string{docker.ConfigEnvVar + `={"nope":1}`}); err == nil {
		t.Error("docker fingerprint took a config with an unknown key")
	}
}
