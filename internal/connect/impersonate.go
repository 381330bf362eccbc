package connect

import "fmt"

// ServiceAccountUsername is the user name Kubernetes gives the ServiceAccount
// name in namespace; impersonating it acts with that account's RBAC.
func ServiceAccountUsername(namespace, name string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name)
}

// ImpersonatedServiceAccount is the ServiceAccount a HelmRelease's release
// work runs as: its spec.serviceAccountName, else the controller's
// --default-service-account (the multi-tenancy lockdown), else none (the
// controller's own identity, or the kubeconfig's user on a remote cluster).
// The same rule holds for remote clusters: the account is then looked up in
// the namespace of the same name on the remote cluster.
func ImpersonatedServiceAccount(specName, defaultName string) string {
	if specName != "" {
		return specName
	}
	return defaultName
}
