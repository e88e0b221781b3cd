package job

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

const varsHCL = `variable "image" {
  type = string
}
variable "dcs" {
  type    = list(string)
  default = ["dc1"]
}
variable "tier" {
  type    = string
  default = "dev"
  validation {
    condition     = contains(["dev", "prod"], var.tier)
    error_message = "tier must be dev or prod."
  }
}
job "web" {
  type        = "batch"
  datacenters = var.dcs
  meta = { tier = var.tier }
  group "g" {
    task "t" {
      driver = "docker"
      config { image = var.image }
    }
  }
}`

func writeFile(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestJobRunVariables: -var, -var-file (HCL and JSON) and NOMAD_VAR_ set a
// job file's variables, later sources winning; bad values stop the run
// before anything is sent.
func TestJobRunVariables(t *testing.T) {
	hclFile := writeFile(t, "prod.hcl", "tier = \"prod\"\nimage = \"from-file\"\n")
	jsonFile := writeFile(t, "dcs.json", `{"dcs": ["eu-1", "eu-2"]}`)
	undeclared := writeFile(t, "bad.hcl", "imgae = \"x\"\n")
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		code    int
		wantErr string
		image   string
		tier    string
		dcs     string
	}{
		{name: "-var", args: []string{"-var", "image=redis:7"}, image: "redis:7", tier: "dev", dcs: "dc1"},
		{name: "repeated -var, last wins", args: []string{"-var", "image=a", "-var", "image=b", "-var", "tier=prod"}, image: "b", tier: "prod", dcs: "dc1"},
		{name: "list from -var", args: []string{"-var", "image=x", "-var", `dcs=["a","b"]`}, image: "x", tier: "dev", dcs: "a,b"},
		{name: "var files, -var over them", args: []string{"-var-file", hclFile, "-var-file", jsonFile, "-var", "image=cli"}, image: "cli", tier: "prod", dcs: "eu-1,eu-2"},
		{name: "environment", env: map[string]string{"NOMAD_VAR_image": "env-image", "NOMAD_VAR_other": "ignored"}, image: "env-image", tier: "dev", dcs: "dc1"},
		{name: "var file over environment", args: []string{"-var-file", hclFile}, env: map[string]string{"NOMAD_VAR_image": "env-image"}, image: "from-file", tier: "prod", dcs: "dc1"},
		{name: "missing required", code: 1, wantErr: `job.hcl:1:1: Missing value for variable; Variable "image" has no default`},
		{name: "unknown -var", args: []string{"-var", "image=x", "-var", "imgae=y"}, code: 1, wantErr: `-var sets "imgae", but the job file declares no variable of that name`},
		{name: "unknown name in a var file", args: []string{"-var", "image=x", "-var-file", undeclared}, code: 1, wantErr: "bad.hcl:1:1: Undeclared variable"},
		{name: "validation", args: []string{"-var", "image=x", "-var", "tier=qa"}, code: 1, wantErr: "job.hcl:12:21: Invalid value for variable; tier must be dev or prod."},
		{name: "not name=value", args: []string{"-var", "image"}, code: 1, wantErr: `"image" is not name=value`},
		{name: "missing var file", args: []string{"-var-file", "/nonexistent/v.hcl"}, code: 1, wantErr: "reading var file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.JSON("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: clitest.EvalID, Index: 10})
			jobFile := filepath.Join(t.TempDir(), "job.hcl")
			if err := os.WriteFile(jobFile, []byte(varsHCL), 0o600); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"DROVER_ADDR": f.Srv.URL}
			for k, v := range tc.env {
				env[k] = v
			}
			args := append(append([]string{"job", "run", "-detach"}, tc.args...), jobFile)
			r := clitest.RunCLI(t, env, "", nil, args...)
			clitest.WantCode(t, r, tc.code)
			if tc.code != 0 {
				clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
				for _, req := range f.Reqs {
					if req.Method == "PUT" {
						t.Fatalf("a refused job file was sent: %s %s", req.Method, req.Path)
					}
				}
				return
			}
			var body struct{ Job *structs.Job }
			if err := json.Unmarshal(f.Request("PUT /v1/jobs").Body, &body); err != nil {
				t.Fatal(err)
			}
			j := body.Job
			if got := j.TaskGroups[0].Tasks[0].Config["image"]; got != tc.image {
				t.Errorf("image = %v, want %s", got, tc.image)
			}
			if j.Meta["tier"] != tc.tier {
				t.Errorf("tier = %q, want %s", j.Meta["tier"], tc.tier)
			}
			if got := strings.Join(j.Datacenters, ","); got != tc.dcs {
				t.Errorf("datacenters = %s, want %s", got, tc.dcs)
			}
		})
	}
}

// TestJobValidate: every problem is listed at its position and the exit
// code is 1; a good file says so and exits 0. No agent is needed.
func TestJobValidate(t *testing.T) {
	tests := []struct {
		name string
		src  string
		args []string
		code int
		want []string
	}{
		{name: "valid", src: clitest.BatchHCL, code: 0, want: []string{"Job validation successful"}},
		{name: "valid with variables", src: varsHCL, args: []string{"-var", "image=redis"}, code: 0, want: []string{"Job validation successful"}},
		{name: "every parse error", code: 1, src: "job \"j\" {\n  prioritty = 1\n  group \"g\" {\n    cuont = 2\n  }\n}\n", want: []string{
			"Job validation errors:",
			"job.hcl:2:3: Unsupported argument",
			"job.hcl:4:5: Unsupported argument",
		}},
		{name: "every validation error at its block", code: 1, src: "job \"j\" {\n  priority = 500\n  group \"g\" {\n    count = -1\n    task \"t\" {\n    }\n  }\n}\n", want: []string{
			"job.hcl:1:1: Invalid job; job priority 500",
			"job.hcl:3:3: Invalid job; group \"g\": count must not be negative",
			"job.hcl:5:5: Invalid job; group \"g\": task \"t\": ",
		}},
		// A service naming no provider is the servers' to resolve at
		// registration (default_service_provider); "consul" is refused.
		{name: "a consul service and a missing port label", code: 1, src: "job \"j\" {\n  group \"g\" {\n    service {\n      port = \"http\"\n    }\n    task \"t\" {\n      driver = \"raw_exec\"\n      service {\n        provider = \"consul\"\n      }\n    }\n  }\n}\n", want: []string{
			"job.hcl:3:5: Invalid job; group \"g\": service \"j-g\": port \"http\" is not a port label of the group's network block",
			"job.hcl:8:7: Invalid job; group \"g\": task \"t\": service \"j-g-t\": provider \"consul\" needs Consul",
		}},
		{name: "a service port missing from the network block", code: 1, src: "job \"j\" {\n  group \"g\" {\n    service {\n      provider = \"nomad\"\n      port = \"http\"\n    }\n    task \"t\" {\n      driver = \"raw_exec\"\n    }\n  }\n}\n", want: []string{
			"job.hcl:3:5: Invalid job; group \"g\": service \"j-g\": port \"http\" is not a port label of the group's network block",
		}},
		{name: "variable problems", src: varsHCL, args: []string{"-var", "tier=qa"}, code: 1, want: []string{
			"job.hcl:1:1: Missing value for variable",
			"job.hcl:12:21: Invalid value for variable; tier must be dev or prod.",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "job.hcl", tc.src)
			// The agent's address refuses connections: validate needs none.
			env := map[string]string{"DROVER_ADDR": "http://127.0.0.1:1"}
			r := clitest.RunCLI(t, env, "", nil, append(append([]string{"job", "validate"}, tc.args...), path)...)
			clitest.WantCode(t, r, tc.code)
			out := r.Out
			if tc.code != 0 {
				out = r.ErrOut
			}
			// Positions are printed with the path given; compare from the
			// file's base name.
			out = strings.ReplaceAll(out, path, "job.hcl")
			clitest.WantContains(t, "output", out, tc.want...)
		})
	}
}
