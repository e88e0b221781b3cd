package agent

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
)

// listenDevRPC opens the RPC port of a dev agent whose config or flags
// chose one (ports.rpc, -rpc-port), so that client agents elsewhere can
// join it (client { servers = ["host:port"] }), as they join Nomad's dev
// agent. A dev server keeps Raft in memory: the mux's Raft connections are
// closed, so another server cannot join it (it needs server_join against a
// real server). Like the rest of -dev, this RPC is plaintext and
// unauthenticated; it is logged as such.
func (a *Agent) listenDevRPC(scfg *server.Config, serverTLS *tls.Config) error {
	cfg := a.cfg
	rpcLn, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Ports.RPC)))
	if err != nil {
		return fmt.Errorf("rpc listener: %w", err)
	}
	scfg.RPCAddr = advertiseAddr(cfg, rpcLn.Addr().String(), cfg.Advertise.rpcAddr())
	a.mux = rpc.NewMux(rpcLn, serverTLS, a.logger.Named("rpc"), a.muxOpts...)
	_ = a.mux.RaftListener().Close()
	scfg.RPCPool = a.pool
	a.logger.Warn("dev agent: RPC is plaintext and unauthenticated; clients may join it, servers cannot (Raft is in memory)",
		"rpc", scfg.RPCAddr)
	return nil
}
