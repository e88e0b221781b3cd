package jobspec

import (
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
	for _, b := range bs {
		a := &structs.TaskArtifact{}
		attrs, blocks := p.content(b.Body, artifactAttrs, artifactBlocks)
		if !p.setString(attrs["source"], &a.GetterSource) {
			p.errorf(b.DefRange, "Missing required argument", "An artifact block needs a source (a go-getter URL).")
		}
		p.setString(attrs["destination"], &a.RelativeDest)
		p.setString(attrs["mode"], &a.GetterMode)
		a.GetterOptions = p.stringMap(attrs, blocks, "options")
		a.GetterHeaders = p.stringMap(attrs, blocks, "headers")
		if at := attrs["insecure"]; at != nil && p.setBool(at, &a.GetterInsecure) && a.GetterInsecure {
			p.errorf(at.NameRange, "Unsupported argument",
				"insecure = true is not supported: drover's client always verifies the TLS certificate of an artifact's server.")
		}
		if at := attrs["chown"]; at != nil && p.setBool(at, &a.Chown) && a.Chown {
			p.errorf(at.NameRange, "Unsupported argument",
				"chown = true is not supported: drover's client does not change the owner of downloaded artifacts.")
		}
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
	for _, b := range bs {
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
		if a := attrs["once"]; a != nil && p.setBool(a, &t.Once) && t.Once {
			p.errorf(a.NameRange, "Unsupported argument",
				"once = true is not supported: drover's client re-renders a template whenever its data changes.")
		}
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
			p.errorf(cb.DefRange, "Unsupported block type",
				"drover runs no template change scripts; use change_mode = \"restart\", \"signal\" or \"noop\".")
		}
		out = append(out, t)
	}
	return out
}
