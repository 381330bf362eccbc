package runner

import (
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// memoryConfig is a Helm configuration whose storage is in memory; it has
// no kube client.
func memoryConfig() *helmaction.Configuration {
	cfg := helmaction.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	return cfg
}
