# A volume created through the hostpath plugin's controller:
#
#   drover volume create examples/csi/scratch-volume.hcl
#   drover volume status scratch
id        = "scratch"
name      = "scratch"
type      = "csi"
plugin_id = "hostpath"

capacity_min = "10MiB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
