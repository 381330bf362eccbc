package action

import (
	"context"
	"fmt"
	"maps"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"
)

// What an install or upgrade does to one CRD of the chart's crds/.
const (
	CRDCreate    = "create"
	CRDUpdate    = "update"
	CRDUnchanged = "unchanged"
	// CRDLeft: client-side Create leaves an existing CRD as it is.
	CRDLeft = "left as it is"
)

// CRDChange is what an install or upgrade would do to one CRD of the
// chart's crds/ (applyCRDs), before Helm's own action.
type CRDChange struct {
	Name   string `json:"name"`
	Change string `json:"change"`
}

// CRDPlan is the CRD step of an install or upgrade: its policy and what it
// would do to each CRD. Empty when the chart has no CRDs in crds/.
type CRDPlan struct {
	Policy     helmv2.CRDsPolicy `json:"policy,omitempty"`
	ServerSide bool              `json:"serverSide,omitempty"`
	Changes    []CRDChange       `json:"changes,omitempty"`
}

// planCRDs tells what applyCRDs would do with a, with reads and
// server-side dry runs only: each CRD is missing (created), left alone
// (client-side Create), or applied, and then updated or unchanged as a
// dry run of the apply shows.
func planCRDs(ctx context.Context, cfg *helmaction.Configuration, chrt *chartv2.Chart, a crdApply) (CRDPlan, error) {
	if a.policy == helmv2.Skip || chrt == nil || len(chrt.CRDObjects()) == 0 {
		return CRDPlan{Policy: a.policy}, nil
	}
	all, err := chartCRDs(cfg, chrt, a)
	if err != nil {
		return CRDPlan{}, err
	}
	out := CRDPlan{Policy: a.policy, ServerSide: a.serverSide}
	for _, info := range all {
		change, err := crdChange(ctx, info, a)
		if err != nil {
			return CRDPlan{}, fmt.Errorf("planning CRD %s: %w", info.Name, err)
		}
		out.Changes = append(out.Changes, CRDChange{Name: info.Name, Change: change})
	}
	return out, nil
}

// crdChange is what applying info under a does to the live CRD.
func crdChange(ctx context.Context, info *resource.Info, a crdApply) (string, error) {
	helper := resource.NewHelper(info.Client, info.Mapping)
	live, err := helper.Get("", info.Name)
	switch {
	case apierrors.IsNotFound(err):
		return CRDCreate, nil
	case err != nil:
		return "", err
	}
	if a.policy == helmv2.Create && !a.serverSide {
		return CRDLeft, nil
	}
	data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, info.Object)
	if err != nil {
		return "", err
	}
	force := true
	applied, err := helper.WithFieldManager(DefaultFieldManager).DryRun(true).
		Patch("", info.Name, types.ApplyPatchType, data, &metav1.PatchOptions{Force: &force})
	if err != nil {
		return "", fmt.Errorf("server-side apply dry run: %w", err)
	}
	before, err := meta.Accessor(live)
	if err != nil {
		return "", err
	}
	after, err := meta.Accessor(applied)
	if err != nil {
		return "", err
	}
	// A changed spec bumps the generation; labels (the origin labels
	// among them) do not.
	if after.GetGeneration() != before.GetGeneration() || !maps.Equal(after.GetLabels(), before.GetLabels()) {
		return CRDUpdate, nil
	}
	return CRDUnchanged, nil
}
