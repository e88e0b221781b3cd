package pluginhost

import (
	"context"
	"fmt"
	"reflect"

	"github.com/hashicorp/go-plugin"
)

// The host's registry is typed: every plugin kind is a KindOf[C, D], which
// says what a loaded plugin of the kind is called through (its client, C)
// and what it declares about itself at every launch (D: a scheduler's job
// types, a driver's name, a gc plugin's collections). Callers reach a kind
// with Get and receive C and D as such; the one conversion from go-plugin's
// untyped Dispense happens at launch (a plugin whose client is not a C does
// not launch), so no caller asserts a type.

// KindSpec describes a plugin kind for NewKind.
type KindSpec[C, D any] struct {
	// Name is the kind's name, also its key in go-plugin's plugin map
	// (shared.KindScheduler, …).
	Name string

	// Plugin is the go-plugin glue of the kind (its GRPCClient half is used);
	// its GRPCClient must return a C.
	Plugin plugin.Plugin

	// Init readies a freshly launched instance before any call reaches it:
	// it gets the instance's client, checks that the instance really serves
	// the kind, and returns the instance's declaration. It runs after every
	// launch, restarts and reloads included, once the instance has its
	// config (the base protocol, which every kind shares, delivers it; see
	// baseconfig.go), so a declaration may depend on the config.
	//
	// A third-party plugin's kinds are discovered with Init: every registered
	// kind is dispensed and initialised, and the plugin serves the kinds
	// whose Init succeeds. Init must return an error with gRPC code
	// Unimplemented when the kind is not served; that is what gRPC returns
	// for a service the plugin did not register, so an Init that makes any
	// RPC of the kind gets it for free. A kind with a nil Init is never
	// discovered (a built-in declares its kind, so nil is fine there), and
	// its declaration is D's zero value.
	Init func(ctx context.Context, client C) (D, error)

	// Version is the plugin version a declaration gives, for Status and
	// logs; nil when the kind's declaration has none.
	Version func(D) string
}

// KindOf is a plugin kind whose plugins are called through a C and declare
// themselves with a D. Build it with NewKind; hand its Kind to Config.Kinds
// (the kinds of this package are always registered), and reach its plugins
// with Get.
type KindOf[C, D any] struct{ k Kind }

// NewKind returns the kind s describes.
func NewKind[C, D any](s KindSpec[C, D]) *KindOf[C, D] {
	k := Kind{name: s.Name, plugin: s.Plugin, discover: s.Init != nil}
	k.init = func(ctx context.Context, raw any) (any, error) {
		c, ok := raw.(C)
		if !ok {
			return nil, fmt.Errorf("the %s plugin glue gave the host a %T, not a %s", s.Name, raw, reflect.TypeFor[C]())
		}
		if s.Init == nil {
			var zero D
			return zero, nil
		}
		return s.Init(ctx, c)
	}
	if s.Version != nil {
		k.version = func(decl any) string { return s.Version(as[D](decl)) }
	}
	k.declared = func(decl any) error {
		if _, ok := decl.(D); !ok {
			return fmt.Errorf("a %s declaration must be a %s, not a %T", s.Name, reflect.TypeFor[D](), decl)
		}
		return nil
	}
	return &KindOf[C, D]{k: k}
}

// Name is the kind's name.
func (k *KindOf[C, D]) Name() string { return k.k.name }

// Kind is k with its types erased, for Config.Kinds.
func (k *KindOf[C, D]) Kind() Kind { return k.k }

// Kind is one plugin kind the host can dispense, its types erased: the
// registry's entry for a KindOf.
type Kind struct {
	name   string
	plugin plugin.Plugin
	// init checks a dispensed client is the kind's C, then runs the
	// spec's Init; it returns the declaration.
	init func(ctx context.Context, raw any) (decl any, err error)
	// discover: a third-party plugin is tried for the kind.
	discover bool
	version  func(decl any) string // nil: the declaration has none
	// declared checks that a declaration made without a process
	// (Builtin.Declare) is of the kind's type D.
	declared func(decl any) error
}

// as converts what the registry stores for a kind back to the kind's type.
// Launch admitted only a C as client and Init returned a D, so it cannot
// fail; the zero value stands for a kind the instance does not serve.
func as[T any](v any) T {
	t, _ := v.(T)
	return t
}

// Get is the typed view of h's plugins of kind k.
func Get[C, D any](h *Host, k *KindOf[C, D]) Clients[C, D] {
	return Clients[C, D]{h: h, kind: k.k.name}
}

// Clients are the plugins of one kind on a host, with their clients typed.
// Every call goes to the plugin's current instance, surviving restarts and
// reloads.
type Clients[C, D any] struct {
	h    *Host
	kind string
}

// Loaded is one plugin of a kind as the registry holds it.
type Loaded[D any] struct {
	Name    string
	Kind    string
	Builtin bool
	// Version is what the declaration gives ("" if the kind has none).
	Version string
	// Declaration is what the plugin's Init returned at its last launch.
	Declaration D
}

// Names returns the plugins serving the kind, in config order. A plugin
// that is down counts with the kinds it last served.
func (c Clients[C, D]) Names() []string { return c.h.Plugins(c.kind) }

// Loaded returns every plugin serving the kind, in config order.
func (c Clients[C, D]) Loaded() []Loaded[D] {
	var out []Loaded[D]
	for _, name := range c.Names() {
		decl, ok := c.Declaration(name)
		if !ok {
			continue
		}
		m, ok := c.h.plugin(name)
		if !ok {
			continue // removed since Names
		}
		l := Loaded[D]{Name: name, Kind: c.kind, Builtin: m.builtin, Declaration: decl}
		if v := c.h.kinds[c.kind].version; v != nil {
			l.Version = v(decl)
		}
		out = append(out, l)
	}
	return out
}

// Declaration returns what plugin name declared for the kind at its last
// successful launch, and false when the plugin is unknown or does not serve
// the kind. A plugin that is down keeps the declaration of its last
// instance; a reload replaces it once the new instance is current.
func (c Clients[C, D]) Declaration(name string) (D, bool) {
	decl, ok := c.h.info(name, c.kind)
	return as[D](decl), ok
}

// Running reports whether plugin name has a live instance right now.
func (c Clients[C, D]) Running(name string) bool { return c.h.Running(name) }

// Call runs fn with plugin name's client, holding the current instance for
// the duration of fn so a reload waits for it. fn's error is classified: a
// failure caused by the process dying wraps ErrPluginUnavailable. While the
// plugin is down Call waits up to CallWait for it to come back.
func (c Clients[C, D]) Call(ctx context.Context, name string, fn func(context.Context, C) error) error {
	return c.h.call(ctx, name, c.kind, func(ctx context.Context, raw any) error { return fn(ctx, as[C](raw)) })
}

// Watch runs a long-lived call (a driver's WaitTask, a stream) that a
// reload does not wait for. It holds no reference on the instance: when a
// reload or restart replaces the instance, the context fn got is cancelled
// and Watch fails with ErrPluginUnavailable, so the caller re-attaches to
// the new instance (a driver's tasks outlive its process). Counting such
// calls as in flight would make every reload of the plugin wait out
// DrainTimeout whenever a task runs. Errors are classified as Call's.
func (c Clients[C, D]) Watch(ctx context.Context, name string, fn func(context.Context, C) error) error {
	return c.h.watch(ctx, name, c.kind, func(ctx context.Context, raw any) error { return fn(ctx, as[C](raw)) })
}

// Dispense returns plugin name's client and a release function that must
// be called once the caller is done with it. It is for callers that hold a
// plugin across several calls or a stream: until release, a Reload waits
// (up to DrainTimeout) before killing the instance. Prefer Call for single
// calls; it also classifies errors. The client must not be used after
// release.
func (c Clients[C, D]) Dispense(ctx context.Context, name string) (C, func(), error) {
	_, raw, release, err := c.h.dispense(ctx, name, c.kind)
	return as[C](raw), release, err
}

// builtinKinds are drover's plugin kinds, registered on every host.
func builtinKinds() []Kind {
	return []Kind{SchedulerKind.Kind(), DriverKind.Kind(), CSIBridgeKind.Kind(), GCKind.Kind()}
}
