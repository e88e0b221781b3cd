package driver_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fake records what reached the implementation and returns err (if set)
// from every task method.
type fake struct {
	err error

	gotCfg     *driverpb.TaskConfig
	gotID      string
	gotTimeout time.Duration
	gotSignal  string
	gotForce   bool
	gotHandle  *driverpb.TaskHandle

	// waitBlocks makes WaitTask block until its ctx ends; waitCtxErr
	// receives the server-side ctx error.
	waitBlocks  bool
	waitEntered chan struct{}
	waitCtxErr  chan error
}

var _ driver.Driver = (*fake)(nil)

func (f *fake) Info(context.Context) (*driverpb.InfoResponse, error) {
	return &driverpb.InfoResponse{Name: "fake", Version: "1.2.3"}, nil
}

func (f *fake) Fingerprint(context.Context) (*driverpb.FingerprintResponse, error) {
	return &driverpb.FingerprintResponse{Detected: true, Healthy: true, HealthDescription: "ok",
		Attributes: map[string]string{"driver.fake": "1"}}, nil
}

func (f *fake) StartTask(_ context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error) {
	f.gotCfg = cfg
	if f.err != nil {
		return nil, f.err
	}
	return &driverpb.TaskHandle{Id: cfg.GetId(), Pid: 77, StartedAtUnixNano: 5, State: []byte("opaque")}, nil
}

func (f *fake) WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error) {
	f.gotID = id
	if f.waitBlocks {
		close(f.waitEntered)
		<-ctx.Done()
		f.waitCtxErr <- ctx.Err()
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return &driverpb.ExitResult{ExitCode: 137, Signal: 9, OomKilled: true, Err: "e"}, nil
}

func (f *fake) StopTask(_ context.Context, id string, timeout time.Duration, signal string) error {
	f.gotID, f.gotTimeout, f.gotSignal = id, timeout, signal
	return f.err
}

func (f *fake) DestroyTask(_ context.Context, id string, force bool) error {
	f.gotID, f.gotForce = id, force
	return f.err
}

func (f *fake) InspectTask(_ context.Context, id string) (*driverpb.TaskStatus, error) {
	f.gotID = id
	if f.err != nil {
		return nil, f.err
	}
	return &driverpb.TaskStatus{Id: id, State: driverpb.TaskState_TASK_STATE_EXITED, Pid: 77,
		ExitResult: &driverpb.ExitResult{ExitCode: 3}}, nil
}

func (f *fake) SignalTask(_ context.Context, id string, signal string) error {
	f.gotID, f.gotSignal = id, signal
	return f.err
}

func (f *fake) RecoverTask(_ context.Context, h *driverpb.TaskHandle) error {
	f.gotHandle = h
	return f.err
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRoundTrip(t *testing.T) {
	impl := &fake{}
	d := drivertest.Connect(t, impl)
	c := ctx(t)

	info, err := d.Info(c)
	if err != nil || info.GetName() != "fake" || info.GetVersion() != "1.2.3" {
		t.Fatalf("Info = %v, %v", info, err)
	}
	fp, err := d.Fingerprint(c)
	if err != nil || !fp.GetDetected() || !fp.GetHealthy() || fp.GetAttributes()["driver.fake"] != "1" {
		t.Fatalf("Fingerprint = %v, %v", fp, err)
	}

	cfg := &driverpb.TaskConfig{
		Id: "a1/web", AllocId: "a1", TaskName: "web", ConfigJson: []byte(`{"command":"x"}`),
		Env: map[string]string{"A": "b"}, User: "u", AllocDir: "/alloc", TaskDir: "/alloc/web",
		StdoutPath: "/o", StderrPath: "/e", KillSignal: "SIGINT",
		Resources:   &driverpb.Resources{Cpu: 100, MemoryMb: 300, MemoryMaxMb: 600},
		LogRotation: &driverpb.LogRotation{MaxFiles: 3, MaxFileSizeBytes: 1 << 20},
	}
	h, err := d.StartTask(c, cfg)
	if err != nil || h.GetPid() != 77 || string(h.GetState()) != "opaque" {
		t.Fatalf("StartTask = %v, %v", h, err)
	}
	if !proto.Equal(impl.gotCfg, cfg) {
		t.Fatalf("config reached the driver as %v", impl.gotCfg)
	}

	res, err := d.WaitTask(c, "a1/web")
	if err != nil || res.GetExitCode() != 137 || res.GetSignal() != 9 || !res.GetOomKilled() || res.GetErr() != "e" {
		t.Fatalf("WaitTask = %v, %v", res, err)
	}

	if err := d.StopTask(c, "a1/web", 1500*time.Millisecond, "SIGQUIT"); err != nil {
		t.Fatal(err)
	}
	if impl.gotID != "a1/web" || impl.gotTimeout != 1500*time.Millisecond || impl.gotSignal != "SIGQUIT" {
		t.Fatalf("StopTask reached the driver as %q %v %q", impl.gotID, impl.gotTimeout, impl.gotSignal)
	}

	if err := d.DestroyTask(c, "a1/web", true); err != nil || !impl.gotForce {
		t.Fatalf("DestroyTask: %v, force=%v", err, impl.gotForce)
	}

	st, err := d.InspectTask(c, "a1/web")
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_EXITED || st.GetExitResult().GetExitCode() != 3 {
		t.Fatalf("InspectTask = %v, %v", st, err)
	}

	if err := d.SignalTask(c, "a1/web", "SIGHUP"); err != nil || impl.gotSignal != "SIGHUP" {
		t.Fatalf("SignalTask: %v, signal %q", err, impl.gotSignal)
	}

	if err := d.RecoverTask(c, h); err != nil || !proto.Equal(impl.gotHandle, h) {
		t.Fatalf("RecoverTask: %v, handle %v", err, impl.gotHandle)
	}
}

func TestMissingMessagesAreRefused(t *testing.T) {
	d := drivertest.Connect(t, &fake{})
	if _, err := d.StartTask(ctx(t), nil); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Fatalf("StartTask(nil) = %v", err)
	}
	if err := d.RecoverTask(ctx(t), nil); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Fatalf("RecoverTask(nil) = %v", err)
	}
}

// TestErrorKindsCrossTheWire checks that every sentinel an implementation
// returns arrives as itself, with its message and gRPC code.
func TestErrorKindsCrossTheWire(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantKind error // nil: no sentinel
		wantCode codes.Code
	}{
		{"not found", fmt.Errorf("%w: %q", driver.ErrTaskNotFound, "a1/web"), driver.ErrTaskNotFound, codes.NotFound},
		{"exists", fmt.Errorf("%w: a1/web", driver.ErrTaskExists), driver.ErrTaskExists, codes.AlreadyExists},
		{"invalid config", fmt.Errorf("%w: command %q", driver.ErrInvalidConfig, "x"), driver.ErrInvalidConfig, codes.InvalidArgument},
		{"invalid signal", fmt.Errorf("%w: SIGX", driver.ErrInvalidSignal), driver.ErrInvalidSignal, codes.InvalidArgument},
		{"running", fmt.Errorf("%w: a1/web", driver.ErrTaskRunning), driver.ErrTaskRunning, codes.FailedPrecondition},
		{"not running", fmt.Errorf("%w: a1/web", driver.ErrTaskNotRunning), driver.ErrTaskNotRunning, codes.FailedPrecondition},
		{"deadline", fmt.Errorf("stop: %w", context.DeadlineExceeded), context.DeadlineExceeded, codes.DeadlineExceeded},
		// A plugin written without this SDK still maps by code.
		{"bare NotFound status", status.Error(codes.NotFound, "no such task"), driver.ErrTaskNotFound, codes.NotFound},
		{"plain error", errors.New("disk on fire"), nil, codes.Unknown},
	}
	kinds := []error{driver.ErrTaskNotFound, driver.ErrTaskExists, driver.ErrInvalidConfig,
		driver.ErrInvalidSignal, driver.ErrTaskRunning, driver.ErrTaskNotRunning}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := drivertest.Connect(t, &fake{err: tt.err})
			calls := map[string]func() error{
				"StartTask":   func() error { _, err := d.StartTask(ctx(t), &driverpb.TaskConfig{Id: "x"}); return err },
				"WaitTask":    func() error { _, err := d.WaitTask(ctx(t), "x"); return err },
				"StopTask":    func() error { return d.StopTask(ctx(t), "x", 0, "") },
				"DestroyTask": func() error { return d.DestroyTask(ctx(t), "x", false) },
				"InspectTask": func() error { _, err := d.InspectTask(ctx(t), "x"); return err },
				"SignalTask":  func() error { return d.SignalTask(ctx(t), "x", "SIGHUP") },
				"RecoverTask": func() error { return d.RecoverTask(ctx(t), &driverpb.TaskHandle{Id: "x"}) },
			}
			for name, call := range calls {
				err := call()
				if err == nil {
					t.Fatalf("%s: no error", name)
				}
				for _, k := range kinds {
					if got, want := errors.Is(err, k), k == tt.wantKind; got != want {
						t.Errorf("%s: errors.Is(%v, %v) = %v", name, err, k, got)
					}
				}
				if tt.wantKind != nil && !errors.Is(err, tt.wantKind) {
					t.Errorf("%s: %v is not %v", name, err, tt.wantKind)
				}
				if code := status.Code(err); code != tt.wantCode {
					t.Errorf("%s: code %v, want %v", name, code, tt.wantCode)
				}
				if s, _ := status.FromError(tt.err); !containsMsg(err, s.Message()) {
					t.Errorf("%s: message %q lost %q", name, err, s.Message())
				}
			}
		})
	}
}

func containsMsg(err error, msg string) bool {
	return err != nil && msg != "" && strings.Contains(err.Error(), msg)
}

// TestCancellationReachesTheDriver checks that a blocked WaitTask ends on
// both sides when the caller gives up.
func TestCancellationReachesTheDriver(t *testing.T) {
	impl := &fake{waitBlocks: true, waitEntered: make(chan struct{}), waitCtxErr: make(chan error, 1)}
	d := drivertest.Connect(t, impl)
	c, cancel := context.WithCancel(ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := d.WaitTask(c, "a1/web")
		errc <- err
	}()
	select {
	case <-impl.waitEntered:
	case <-time.After(30 * time.Second):
		t.Fatal("WaitTask never reached the driver")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client WaitTask = %v, want context.Canceled", err)
	}
	select {
	case err := <-impl.waitCtxErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("driver saw ctx error %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the driver's WaitTask never saw the cancellation")
	}
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in      string
		want    syscall.Signal
		wantErr bool
	}{
		{"SIGTERM", syscall.SIGTERM, false},
		{"SIGKILL", syscall.SIGKILL, false},
		{"sigint", syscall.SIGINT, false},
		{"HUP", syscall.SIGHUP, false},
		{" SIGUSR1 ", syscall.SIGUSR1, false},
		{"SIGQUIT", syscall.SIGQUIT, false},
		{"", 0, true},
		{"SIG", 0, true},
		{"SIGNOPE", 0, true},
		{"15", 0, true},
	}
	for _, tt := range tests {
		got, err := driver.ParseSignal(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, driver.ErrInvalidSignal) {
			t.Errorf("ParseSignal(%q) error %v is not ErrInvalidSignal", tt.in, err)
		}
	}
}

// validatingFake judges its plugin config: "bad" is refused.
type validatingFake struct{ fake }

func (*validatingFake) ValidateConfig(_ context.Context, raw []byte) error {
	if string(raw) == "bad" {
		return driver.InvalidPluginConfig(errors.New(`fake plugin config: key "x" is not known`))
	}
	return nil
}

// ValidateConfig crosses the wire with its kind and the driver's own
// message; a driver that judges no config accepts every one.
func TestValidateConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		impl    driver.Driver
		raw     string
		wantErr string // "" accepts
	}{
		{"accepted", &validatingFake{}, `{"x":1}`, ""},
		{"refused", &validatingFake{}, "bad", `fake plugin config: key "x" is not known`},
		{"no validator", &fake{}, "bad", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := drivertest.Connect(t, tc.impl).ValidateConfig(t.Context(), []byte(tc.raw))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateConfig = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, driver.ErrInvalidPluginConfig) || errors.Is(err, driver.ErrInvalidConfig) || err.Error() != tc.wantErr {
				t.Fatalf("ValidateConfig = %v, want ErrInvalidPluginConfig with the message %q", err, tc.wantErr)
			}
		})
	}
}
