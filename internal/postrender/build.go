package postrender

import (
	"bytes"
	"errors"
	"fmt"
	"maps"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/postrenderer"
)

// Origin labels name the HelmRelease an object belongs to, under
// upstream's keys, so `flux trace` and label selectors find it.
var (
	OriginNameLabel      = helmv2.GroupVersion.Group + "/name"
	OriginNamespaceLabel = helmv2.GroupVersion.Group + "/namespace"
)

// Build returns the post renderer of the HelmRelease with the given spec,
// name and namespace: its Kustomize post renderers in order, then
// commonMetadata, then the origin labels. commonMetadata comes after the
// user's patches so its labels and annotations hold whatever a patch did,
// and the origin labels come last so nothing can change which HelmRelease
// an object claims to belong to.
//
// Entries without a kustomize section do nothing, as upstream. Entries
// kustomize refuses whatever the objects are all reported in one error,
// naming the field at fault; see Check.
func Build(spec *helmv2.HelmReleaseSpec, name, namespace string) (postrenderer.PostRenderer, error) {
	var chain chain
	err := eachKustomize(spec, func(field string, k *helmv2.Kustomize) error {
		r, err := newKustomizeRenderer(field, k)
		if err == nil {
			chain = append(chain, r)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if md := spec.CommonMetadata; md != nil {
		chain = append(chain, &metadataRenderer{labels: maps.Clone(md.Labels), annotations: maps.Clone(md.Annotations)})
	}
	chain = append(chain, &metadataRenderer{labels: map[string]string{
		OriginNameLabel:      name,
		OriginNamespaceLabel: namespace,
	}})
	return chain, nil
}

// Check reads the Kustomize post renderers of spec as kustomize will.
// refused names every entry kustomize refuses while configuring itself:
// every install and upgrade with it fails, whatever the chart renders, here
// and upstream alike, and Build refuses it too. warnings names entries that
// fail, or do nothing, only on some objects; Build accepts them and leaves
// the verdict to kustomize, as upstream does.
func Check(spec *helmv2.HelmReleaseSpec) (refused error, warnings []string) {
	refused = eachKustomize(spec, func(field string, k *helmv2.Kustomize) error {
		entryRefused, entryWarnings := checkKustomize(field, k)
		warnings = append(warnings, entryWarnings...)
		return entryRefused
	})
	return refused, warnings
}

// eachKustomize calls visit with the field path and the kustomize section of
// every post renderer that has one (entries without one do nothing, as
// upstream), and reports all the entries visit refuses in one error, so a
// user fixes them in one go rather than one per reconcile.
func eachKustomize(spec *helmv2.HelmReleaseSpec, visit func(field string, k *helmv2.Kustomize) error) error {
	var errs []error
	for i, pr := range spec.PostRenderers {
		if pr.Kustomize == nil {
			continue
		}
		if err := visit(fmt.Sprintf("spec.postRenderers[%d].kustomize", i), pr.Kustomize); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid post renderer: %w", err)
	}
	return nil
}

// chain runs post renderers one after the other, each on the output of the
// one before, after making every document of Helm's output parse on its own
// (see inlineAliases).
type chain []postrenderer.PostRenderer

func (c chain) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	out, err := inlineAliases(in)
	if err != nil {
		return nil, err
	}
	for _, r := range c {
		if out, err = r.Run(out); err != nil {
			return nil, err
		}
	}
	return out, nil
}
