package reconcile

import (
	"context"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/ownrevision"
)

type runFunc func(ctx context.Context, chart *chartv2.Chart, mark ownrevision.Mark) (*releasev1.Release, error)

func (req *Request) helmInstall(h Helm) runFunc {
	return func(ctx context.Context, chart *chartv2.Chart, mark ownrevision.Mark) (*releasev1.Release, error) {
		return h.Install(ctx, chart, req.Values, mark)
	}
}

func (req *Request) helmUpgrade(h Helm) runFunc {
	return func(ctx context.Context, chart *chartv2.Chart, mark ownrevision.Mark) (*releasev1.Release, error) {
		return h.Upgrade(ctx, chart, req.Values, mark)
	}
}

// releaseName is "<namespace>/<name>" of the Helm release.
func (req *Request) releaseName() string {
	name := req.ReleaseName
	if name == "" {
		name = req.Object.GetReleaseName()
	}
	return req.Object.GetReleaseNamespace() + "/" + name
}
