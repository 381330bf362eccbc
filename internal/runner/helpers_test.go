package runner

import (
	"io"
	"log/slog"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
)

// memoryConfig is a Helm configuration whose storage is in memory; it has
// no kube client.
func memoryConfig() *helmaction.Configuration {
	cfg := helmaction.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	return cfg
}

// fakeClusterConfig is memoryConfig with a kube client that applies
// nothing and finds everything ready, so Helm's actions run to their end.
func fakeClusterConfig() *helmaction.Configuration {
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.DiscardHandler))
	cfg.Releases = storage.Init(driver.NewMemory())
	cfg.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard, LogOutput: io.Discard}
	cfg.Capabilities = common.DefaultCapabilities.Copy()
	cfg.HookOutputFunc = func(_, _, _ string) io.Writer { return io.Discard }
	return cfg
}

// actionRunner is the runner of obj over a fake cluster, its writes logged
// as New logs them.
func actionRunner(obj *v2.HelmRelease, s Settings) *Runner {
	r := newRunner(fakeClusterConfig(), obj, s)
	r.writes = &action.WriteLog{}
	r.cfg.Releases = storage.Init(r.writes.Wrap(r.cfg.Releases.Driver))
	return r
}

// configMapChart is a chart of one ConfigMap.
func configMapChart(version string) *chartv2.Chart {
	return &chartv2.Chart{
		Metadata:  &chartv2.Metadata{Name: "web", Version: version, APIVersion: chartv2.APIVersionV2},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n")}},
	}
}
