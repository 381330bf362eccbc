package helmclient

import (
	helmaction "helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/storage"
)

// Reconfigured returns a copy of cfg that talks to the cluster through kc
// and keeps releases in store; the rest (REST client getter, registry
// client, capabilities, template functions, hook output, logger) is
// shared. A wrapper of the kube client or the storage driver runs its
// action on such a copy, so that later actions on cfg are not wrapped by
// accident.
func Reconfigured(cfg *helmaction.Configuration, kc helmkube.Interface, store *storage.Storage) *helmaction.Configuration {
	c := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(cfg.Logger().Handler()))
	c.RESTClientGetter = cfg.RESTClientGetter
	c.KubeClient = kc
	c.RegistryClient = cfg.RegistryClient
	c.Capabilities = cfg.Capabilities
	c.CustomTemplateFuncs = cfg.CustomTemplateFuncs
	c.HookOutputFunc = cfg.HookOutputFunc
	c.Releases = store
	return c
}
