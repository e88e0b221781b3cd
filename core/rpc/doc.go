// Package rpc is the RPC layer between drover agents: unary gRPC methods
// that carry core/structs values as MessagePack (no .proto for internal
// types), errors that keep their structs kind across the wire, mutual TLS,
// and a connection multiplexer that lets gRPC and Raft share one port, as
// Nomad's 4647 does.
//
// A server wires it like this:
//
//	mux := rpc.NewMux(ln, serverTLS, logger)
//	srv := rpc.NewServer(serverTLS, logger)
//	rpc.Handle(srv, "Job.Register", endpoints.Register)
//	go srv.Serve(mux.GRPCListener())
//	layer, _ := rpc.NewRaftLayer(mux.RaftListener(), nil, clientTLS)
//	trans := raft.NewNetworkTransportWithLogger(layer, 3, 10*time.Second, logger)
//
// When the TLS config lets peers without a certificate in (a join
// exchange), NewMux(..., rpc.WithPublicSplit()) hands their connections to
// mux.PublicListener(), and srv.ServePublic serves them only the methods
// named for them, under PublicLimits decided before any message is read
// (see public.go). A PreAuthorizer refuses, from the headers, calls that an
// authenticated peer may never make.
package rpc
