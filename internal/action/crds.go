package action

import (
	"bytes"
	"fmt"
	"maps"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/kube"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/helmverb"
	"github.com/afterhooks/helm-controller/internal/kubewait"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/postrender"
)

// crdWaitTimeout bounds the wait for applied CRDs to be established, the
// same bound Helm uses for its own CRD step.
const crdWaitTimeout = 60 * time.Second

// installCRDPolicy returns the CRD policy of an install: crds, else Create.
// The deprecated skipCRDs is not read, as upstream does not read it.
func installCRDPolicy(in helmv2.Install) (helmv2.CRDsPolicy, error) {
	return crdPolicyOrCreate(helmverb.Install, in.CRDs)
}

// upgradeCRDPolicy returns the CRD policy of an upgrade: crds, else Create.
// The API's documentation says Skip; upstream's code has always used
// Create, and what users run is the code: a chart upgrade that brings a
// new CRD gets it.
func upgradeCRDPolicy(up helmv2.Upgrade) (helmv2.CRDsPolicy, error) {
	return crdPolicyOrCreate(helmverb.Upgrade, up.CRDs)
}

func crdPolicyOrCreate(action helmverb.Verb, policy helmv2.CRDsPolicy) (helmv2.CRDsPolicy, error) {
	switch policy {
	case "":
		return helmv2.Create, nil
	case helmv2.Skip, helmv2.Create, helmv2.CreateReplace:
		return policy, nil
	default:
		return "", fmt.Errorf("unknown %s CRD policy %q", action, policy)
	}
}

// installCRDStep is the CRD step of install: one decision, which applyCRDs
// acts on and planCRDs previews.
func installCRDStep(obj *v2.HelmRelease, install *helmaction.Install, values map[string]any) (crdApply, error) {
	policy, err := installCRDPolicy(obj.GetInstall().Install)
	if err != nil {
		return crdApply{}, err
	}
	return crdApply{policy: policy, serverSide: install.ServerSideApply, wait: install.WaitStrategy,
		waitOpts: install.WaitOptions, values: values, origin: crdOrigin(obj)}, nil
}

// upgradeCRDStep is installCRDStep for upgrade: the CRDs are applied as the
// plan says Helm applies the rest (serverSideApply auto resolved from the
// release's newest revision).
func upgradeCRDStep(obj *v2.HelmRelease, upgrade *helmaction.Upgrade, p plan.Plan, values map[string]any) (crdApply, error) {
	policy, err := upgradeCRDPolicy(obj.GetUpgrade().Upgrade)
	if err != nil {
		return crdApply{}, err
	}
	apply, err := plannedApply(p)
	if err != nil {
		return crdApply{}, err
	}
	return crdApply{policy: policy, serverSide: apply.ServerSide, wait: upgrade.WaitStrategy,
		waitOpts: upgrade.WaitOptions, values: values, origin: crdOrigin(obj)}, nil
}

// crdApply says how applyCRDs talks to the cluster.
type crdApply struct {
	policy     helmv2.CRDsPolicy
	serverSide bool
	wait       kube.WaitStrategy
	waitOpts   []kube.WaitOption
	// values decide which subcharts are enabled, and with them whose
	// crds/ count.
	values map[string]any
	// origin labels every CRD with the HelmRelease it came from, as the
	// objects of the release are labelled.
	origin map[string]string
}

// applyCRDs puts the CRDs of chrt (its crds/ directories, those of enabled
// subcharts included) on the cluster before a Helm action, which then runs
// with SkipCRDs, as upstream does:
//
//   - Skip: nothing.
//   - Create: server-side, every CRD is applied with conflicts forced, so
//     existing CRDs take the chart's version (upstream's Create through
//     Helm 4's server-side create); client-side, the missing CRDs are
//     created and existing ones left as they are.
//   - CreateReplace: every CRD is created or updated. Server-side, with
//     conflicts forced, so fields owned by other managers (a caBundle set by
//     an injector, for instance) survive; client-side (Helm 3 defaults or
//     serverSideApply off), by replacing the object as upstream did with
//     Helm 3.
//
// Objects in crds/ that are not CRDs are left out, as upstream leaves them.
// Helm's own CRD step is not used: it only exists for install.
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
	all, err := chartCRDs(cfg, chrt, a)
	if err != nil || len(all) == 0 {
		return err
	}

	var changed kube.ResourceList
	switch {
	case a.policy == helmv2.Create && !a.serverSide:
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
	default:
		// Create server-side, or CreateReplace. With the CRDs as their own
		// originals, Helm's Update creates the missing ones, updates the
		// others and deletes nothing.
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

// chartCRDs builds the CRDs of chrt's crds/ directories, and of its
// subcharts that values enable, each with the origin labels.
func chartCRDs(cfg *helmaction.Configuration, chrt *chartv2.Chart, a crdApply) (kube.ResourceList, error) {
	if len(chrt.CRDObjects()) == 0 {
		return nil, nil
	}
	// Helm's action processes the dependencies again, to the same result;
	// the chart is this reconcile's own (chartsource.Chart.Load).
	if err := chartutil.ProcessDependencies(chrt, a.values); err != nil {
		return nil, fmt.Errorf("processing the chart's dependencies for its CRDs: %w", err)
	}
	var all kube.ResourceList
	for _, crd := range chrt.CRDObjects() {
		if crd.File == nil || len(bytes.TrimSpace(crd.File.Data)) == 0 {
			return nil, fmt.Errorf("CRD file %s is empty", crd.Filename)
		}
		res, err := cfg.KubeClient.Build(bytes.NewReader(crd.File.Data), false)
		if err != nil {
			return nil, fmt.Errorf("building CRDs from %s: %w", crd.Filename, err)
		}
		for _, info := range res {
			if !isCRD(info) {
				cfg.Logger().Warn("leaving out an object in the chart's crds/ that is not a CustomResourceDefinition",
					"file", crd.Filename, "name", info.Name)
				continue
			}
			if err := addLabels(info, a.origin); err != nil {
				return nil, err
			}
			all = append(all, info)
		}
	}
	return all, nil
}

// crdOrigin are the labels naming obj on its chart's CRDs: upstream's
// origin labels, which the post renderer puts on every other object.
func crdOrigin(obj *v2.HelmRelease) map[string]string {
	return map[string]string{postrender.OriginNameLabel: obj.Name, postrender.OriginNamespaceLabel: obj.Namespace}
}

// isCRD tells whether info is a CustomResourceDefinition.
func isCRD(info *resource.Info) bool {
	gvk := info.Object.GetObjectKind().GroupVersionKind()
	if info.Mapping != nil {
		gvk = info.Mapping.GroupVersionKind
	}
	return gvk.Group == apiextensionsv1.GroupName && gvk.Kind == "CustomResourceDefinition"
}

// addLabels merges labels into the labels of info's object.
func addLabels(info *resource.Info, labels map[string]string) error {
	if len(labels) == 0 {
		return nil
	}
	obj, err := meta.Accessor(info.Object)
	if err != nil {
		return fmt.Errorf("labelling CRD %s: %w", info.Name, err)
	}
	merged := obj.GetLabels()
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, labels)
	obj.SetLabels(merged)
	return nil
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
