package hostpath

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: Version}, nil
}

// GetPluginCapabilities reports the controller service only when this
// process serves it, and always the topology constraints: a hostpath volume
// is reachable only on the node that holds its directory.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	svc := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	caps := []*csi.PluginCapability{svc(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)}
	if d.cfg.Mode.HasController() {
		caps = append(caps, svc(csi.PluginCapability_Service_CONTROLLER_SERVICE))
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe is ready once New has returned; it also checks that the volumes
// directory is still there, since nothing works without it.
func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if !dirExists(d.volumePath("")) {
		return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf("volumes directory %s is missing", d.volumePath("")))
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
