// Package connect builds the Kubernetes connection a HelmRelease's release work
// runs on: the controller's own cluster or a remote one named by
// spec.kubeConfig, optionally impersonating a ServiceAccount. Everything that
// touches release objects (Helm actions and storage, readiness waits,
// uninstall, inventory, drift detection) takes its REST config, discovery and
// REST mapper from the Target built here, so it reaches the same cluster with
// the same identity. Chart sources and values are not release work: they stay
// on the controller's cluster and its own client.
package connect
