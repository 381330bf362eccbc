// Package v2 is the helm.toolkit.fluxcd.io/v2 HelmRelease API of Flux's
// helm-controller, extended with the per-action waitStrategy field.
//
// The types reuse upstream's (github.com/fluxcd/helm-controller/api/v2) by
// embedding them inline; only the structs that gain a field are shadowed.
// Everything upstream accepts, this API accepts unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=helm.toolkit.fluxcd.io
package v2
