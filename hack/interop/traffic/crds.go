// Package traffic only pins modules; their CRD manifests are copied into bin/traffic-crds.
package traffic
