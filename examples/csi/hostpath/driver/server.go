package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// ParseEndpoint turns a CSI endpoint into a unix socket path. It accepts
// unix:///abs/path, unix:/abs/path, unix://rel/path and a bare path.
func ParseEndpoint(ep string) (string, error) {
	if ep == "" {
		return "", errors.New("endpoint is empty")
	}
	path := ep
	if rest, ok := strings.CutPrefix(ep, "unix:"); ok {
		path = strings.TrimPrefix(rest, "//")
	} else if i := strings.Index(ep, "://"); i >= 0 {
		return "", fmt.Errorf("endpoint %q: only unix sockets are supported", ep)
	}
	if path == "" {
		return "", fmt.Errorf("endpoint %q has no socket path", ep)
	}
	return filepath.Clean(path), nil
}

// Listen listens on a unix socket at path, creating its directory and
// removing a stale socket that an earlier run left behind. Anything at path
// that is not a socket is left alone and reported.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket: refusing to remove it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// NewGRPCServer returns a gRPC server with the driver's services registered
// for its mode, logging every RPC at debug level and every failure at warn.
func (d *Driver) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append([]grpc.ServerOption{grpc.UnaryInterceptor(d.logRPC)}, opts...)
	srv := grpc.NewServer(opts...)
	csi.RegisterIdentityServer(srv, d)
	if d.cfg.Mode.HasController() {
		csi.RegisterControllerServer(srv, d)
	}
	if d.cfg.Mode.HasNode() {
		csi.RegisterNodeServer(srv, d)
	}
	return srv
}

func (d *Driver) logRPC(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	if err != nil {
		st := status.Convert(err)
		d.logger.Warn("rpc failed", "method", info.FullMethod, "code", st.Code(), "error", st.Message(), "took", time.Since(start))
	} else {
		d.logger.Debug("rpc", "method", info.FullMethod, "took", time.Since(start))
	}
	return resp, err
}

// GracefulStop stops srv, letting RPCs in flight finish for up to timeout
// before it cuts them off.
func GracefulStop(srv *grpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		srv.Stop()
		<-done
	}
}
