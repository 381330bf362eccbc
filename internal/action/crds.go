package action

import (
	"bytes"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// crdWaitTimeout bounds the wait for applied CRDs to be established, the
// same bound Helm uses for its own CRD step.
const crdWaitTimeout = 60 * time.Second

// installCRDPolicy returns the CRD policy of an install: crds, else Skip when
// the deprecated skipCRDs is set, else Create.
func installCRDPolicy(in helmv2.Install) (helmv2.CRDsPolicy, error) {
	switch in.CRDs {
	case "":
		if in.SkipCRDs {
			return helmv2.Skip, nil
		}
		return helmv2.Create, nil
	case helmv2.Skip, helmv2.Create, helmv2.CreateReplace:
		return in.CRDs, nil
	default:
		return "", fmt.Errorf("unknown install CRD policy %q", in.CRDs)
	}
}

// upgradeCRDPolicy returns the CRD policy of an upgrade: crds, else Skip.
func upgradeCRDPolicy(up helmv2.Upgrade) (helmv2.CRDsPolicy, error) {
	switch up.CRDs {
	case "":
		return helmv2.Skip, nil
	case helmv2.Skip, helmv2.Create, helmv2.CreateReplace:
		return up.CRDs, nil
	default:
		return "", fmt.Errorf("unknown upgrade CRD policy %q", up.CRDs)
	}
}

// crdApply says how applyCRDs talks to the cluster.
type crdApply struct {
	policy     helmv2.CRDsPolicy
	serverSide bool
	wait       kube.WaitStrategy
	waitOpts   []kube.WaitOption
}

// applyCRDs puts the CRDs of chrt (its crds/ directories, subcharts
// included) on the cluster before a Helm action, which then runs with
// SkipCRDs:
//
//   - Skip: nothing.
//   - Create: every CRD is created unless it exists; existing CRDs are left
//     exactly as they are.
//   - CreateReplace: every CRD is created or updated. Server-side, with
//     conflicts forced, so fields owned by other managers (a caBundle set by
//     an injector, for instance) survive; client-side (Helm 3 defaults or
//     serverSideApply off), by replacing the object as upstream did with
//     Helm 3.
//
// Helm's own CRD step is not used: it only exists for install, and in
// server-side mode it applies every CRD, so existing CRDs would be updated
// under Create, and an install would fail on a field conflict with whoever
// created them.
//
// Created or updated CRDs are waited for (established) and the discovery
// cache and REST mapper are reset, so the action that follows can render
// and build objects of the new kinds.
func applyCRDs(cfg *helmaction.Configuration, chrt *chartv2.Chart, a crdApply) error {
	if a.policy == helmv2.Skip || chrt == nil {
		return nil
	}
	if a.policy != helmv2.Create && a.policy != helmv2.CreateReplace {
		return fmt.Errorf("unknown CRD policy %q", a.policy)
	}
	var all kube.ResourceList
	for _, crd := range chrt.CRDObjects() {
		if crd.File == nil || len(bytes.TrimSpace(crd.File.Data)) == 0 {
			return fmt.Errorf("CRD file %s is empty", crd.Filename)
		}
		res, err := cfg.KubeClient.Build(bytes.NewReader(crd.File.Data), false)
		if err != nil {
			return fmt.Errorf("building CRDs from %s: %w", crd.Filename, err)
		}
		all = append(all, res...)
	}
	if len(all) == 0 {
		return nil
	}

	var changed kube.ResourceList
	switch a.policy {
	case helmv2.Create:
		for _, info := range all {
			// A plain create: the API server refuses it for an existing
			// CRD, which is exactly what Create wants.
			_, err := cfg.KubeClient.Create(kube.ResourceList{info}, kube.ClientCreateOptionServerSideApply(false, false))
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("creating CRD %s: %w", info.Name, err)
			}
			changed = append(changed, info)
		}
	case helmv2.CreateReplace:
		// With the CRDs as their own originals, Helm's Update creates the
		// missing ones, updates the others and deletes nothing.
		opts := []kube.ClientUpdateOption{kube.ClientUpdateOptionServerSideApply(a.serverSide, a.serverSide)}
		if !a.serverSide {
			opts = append(opts, kube.ClientUpdateOptionForceReplace(true))
		}
		if _, err := cfg.KubeClient.Update(all, all, opts...); err != nil {
			return fmt.Errorf("creating or replacing CRDs: %w", err)
		}
		changed = all
	}
	if len(changed) == 0 {
		return nil
	}

	strategy := a.wait
	if strategy == kube.HookOnlyStrategy || strategy == "" {
		// hookOnly waits for nothing but hooks; CRDs must be established
		// whatever the action's own wait.
		strategy = kube.StatusWatcherStrategy
	}
	waiter, err := kubewait.Waiter(cfg.KubeClient, strategy, a.waitOpts...)
	if err != nil {
		return fmt.Errorf("waiting for CRDs: %w", err)
	}
	if err := waiter.Wait(changed, crdWaitTimeout); err != nil {
		return fmt.Errorf("waiting for CRDs to be established: %w", err)
	}
	return refreshDiscovery(cfg)
}

// refreshDiscovery drops what cfg knows about the cluster's API so that new
// CRDs are seen by rendering (.Capabilities) and by object building.
func refreshDiscovery(cfg *helmaction.Configuration) error {
	if cfg.RESTClientGetter == nil {
		return nil
	}
	cfg.Capabilities = nil
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return fmt.Errorf("refreshing discovery after applying CRDs: %w", err)
	}
	if dc != nil {
		dc.Invalidate()
	}
	mapper, err := cfg.RESTClientGetter.ToRESTMapper()
	if err != nil {
		return fmt.Errorf("refreshing the REST mapper after applying CRDs: %w", err)
	}
	if r, ok := mapper.(meta.ResettableRESTMapper); ok {
		r.Reset()
	}
	return nil
}
