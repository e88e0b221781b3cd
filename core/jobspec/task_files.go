package jobspec

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/core/structs"
)

// A task's artifact and template blocks (Nomad's names and defaults; the
// defaults are filled by Canonicalize so that the API and the job file
// agree).

var (
	artifactAttrs  = []string{"source", "destination", "mode", "options", "headers", "insecure", "chown"}
	artifactBlocks = []blockKind{{name: "options"}, {name: "headers"}}
)

func (p *parser) artifacts(bs hcl.Blocks) []*structs.TaskArtifact {
	var out []*structs.TaskArtifact
	for i, b := range bs {
		p.noteBlock(fmt.Sprintf("%s: artifact %d", p.taskKey, i+1), b.DefRange)
		a := &structs.TaskArtifact{}
		attrs, blocks := p.content(b.Body, artifactAttrs, artifactBlocks)
		if !p.setString(attrs["source"], &a.GetterSource) {
			p.errorf(b.DefRange, "Missing required argument", "An artifact block needs a source (a go-getter URL).")
		}
		p.setString(attrs["destination"], &a.RelativeDest)
		p.setString(attrs["mode"], &a.GetterMode)
		a.GetterOptions = p.stringMap(attrs, blocks, "options")
		a.GetterHeaders = p.stringMap(attrs, blocks, "headers")
		// insecure and chown are kept; validation refuses them at
		// registration (drover's client always verifies TLS and does not
		// change the owner of artifacts).
		p.setBool(attrs["insecure"], &a.GetterInsecure)
		p.setBool(attrs["chown"], &a.Chown)
		out = append(out, a)
	}
	return out
}

var (
	templateAttrs = []string{
		"data", "source", "destination", "change_mode", "change_signal", "splay", "perms", "uid", "gid",
		"left_delimiter", "right_delimiter", "env", "error_on_missing_key", "vault_grace", "once",
	}
	templateBlocks = []blockKind{{name: "wait"}, {name: "change_script"}}
)

func (p *parser) templates(bs hcl.Blocks) []*structs.Template {
	var out []*structs.Template
	for i, b := range bs {
		p.noteBlock(fmt.Sprintf("%s: template %d", p.taskKey, i+1), b.DefRange)
		t := &structs.Template{}
		attrs, blocks := p.content(b.Body, templateAttrs, templateBlocks)
		p.setString(attrs["data"], &t.EmbeddedTmpl)
		p.setString(attrs["source"], &t.SourcePath)
		if !p.setString(attrs["destination"], &t.DestPath) {
			p.errorf(b.DefRange, "Missing required argument", "A template block needs a destination.")
		}
		if attrs["data"] == nil && attrs["source"] == nil {
			p.errorf(b.DefRange, "Missing required argument", "A template block needs data or a source.")
		}
		p.setString(attrs["change_mode"], &t.ChangeMode)
		p.setString(attrs["change_signal"], &t.ChangeSignal)
		p.setDuration(attrs["splay"], &t.Splay)
		p.setString(attrs["perms"], &t.Perms)
		if a := attrs["uid"]; a != nil {
			var v int
			if p.setInt(a, &v) {
				t.Uid = &v
			}
		}
		if a := attrs["gid"]; a != nil {
			var v int
			if p.setInt(a, &v) {
				t.Gid = &v
			}
		}
		p.setString(attrs["left_delimiter"], &t.LeftDelim)
		p.setString(attrs["right_delimiter"], &t.RightDelim)
		p.setBool(attrs["env"], &t.Envvars)
		p.setBool(attrs["error_on_missing_key"], &t.ErrMissingKey)
		// once is kept; validation refuses once = true at registration.
		p.setBool(attrs["once"], &t.Once)
		if a := attrs["vault_grace"]; a != nil {
			p.errorf(a.NameRange, "Unsupported argument",
				"vault_grace needs Vault, and drover has no Vault integration; remove it.")
		}
		if wb := first(blocks, "wait"); wb != nil {
			w := &structs.TemplateWait{}
			wattrs, _ := p.content(wb.Body, []string{"min", "max"}, nil)
			p.setDurationPtr(wattrs["min"], &w.Min)
			p.setDurationPtr(wattrs["max"], &w.Max)
			t.Wait = w
		}
		if cb := first(blocks, "change_script"); cb != nil {
			// Nomad's defaults: a 5s timeout.
			t.ChangeScript = &structs.ChangeScript{Timeout: 5 * time.Second}
			p.decodeTagged(cb, t.ChangeScript)
		}
		out = append(out, t)
	}
	return out
}
